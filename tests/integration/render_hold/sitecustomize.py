"""Fault injection for the killed-worker test (tests/integration/test_celery_cluster.py).

The cluster's processes get this folder on PYTHONPATH, so Python imports this module at start.
When ``SITEMAPS_TEST_HOLD_DIR`` is set and the file ``hold`` exists in it, a render that
writes under an output URI containing ``SITEMAPS_TEST_HOLD_OUT`` stops in the middle of its
first shard (its gzip object open, its header written), writes ``started`` (the worker's name)
and waits until ``hold`` is removed. The test kills the worker named in ``started`` while it
waits: the kill lands mid-render, every time, instead of racing a render that takes a second.
Nothing else changes: the real task, on the real worker, against the real S3 server.
"""

import importlib.abc
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

HOLD_DIR = os.environ.get("SITEMAPS_TEST_HOLD_DIR")
HOLD_OUT = os.environ.get("SITEMAPS_TEST_HOLD_OUT", "")


def _patch(render: object) -> None:
    sink = render._GzipSink  # type: ignore[attr-defined]
    init, write = sink.__init__, sink.write

    def patched_init(self, out, key, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, out, key, *args, **kwargs)
        self._hold_uri = out.uri(key)

    def patched_write(self, data):  # type: ignore[no-untyped-def]
        write(self, data)
        hold = Path(HOLD_DIR or "", "hold")
        if HOLD_OUT and HOLD_OUT in self._hold_uri and hold.exists():
            started = Path(HOLD_DIR or "", f"started-{os.getpid()}")
            partial = started.with_suffix(".tmp")  # renamed whole: never read half-written
            partial.write_text(json.dumps({"worker": os.environ.get("SITEMAPS_WORKER_NAME"),
                                           "pid": os.getpid(), "key": self._hold_uri}))
            partial.replace(started)
            while hold.exists():
                time.sleep(0.2)

    sink.__init__, sink.write = patched_init, patched_write


class _PatchRenderOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != "pipeline.render":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):  # type: ignore[no-untyped-def]
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if HOLD_DIR:
    sys.meta_path.insert(0, _PatchRenderOnImport())
