"""pytest fixtures for a real local S3 server (SeaweedFS, see infra/local/seaweedfs.py).

Use from ``tests/conftest.py`` with ``pytest_plugins = ["tests.s3_fixtures"]`` (or
``from tests.s3_fixtures import *``).

* ``seaweedfs`` (session): one ``weed server -s3`` in a temp dir for the whole run.
* ``s3_bucket`` (function): a fresh, uniquely named, empty bucket; while the test runs the
  ``AWS_*`` environment points at the server, so code that builds its own boto3 client or uses
  ``smart_open`` with default transport params talks to it. The bucket is deleted afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import sys
import types
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

__all__ = ["S3Bucket", "SeaweedFS", "seaweedfs", "s3_bucket"]

_MODULE_PATH = pathlib.Path(__file__).resolve().parents[1] / "infra" / "local" / "seaweedfs.py"
_MODULE_NAME = "sitemaps_infra_local_seaweedfs"


def _load_seaweedfs_module() -> types.ModuleType:
    # infra/local is not a package: load the file directly (once).
    mod = sys.modules.get(_MODULE_NAME)
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, _MODULE_PATH)
    assert spec is not None and spec.loader is not None, _MODULE_PATH
    mod = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = mod
    spec.loader.exec_module(mod)
    return mod


_seaweedfs_module = _load_seaweedfs_module()
SeaweedFS = _seaweedfs_module.SeaweedFS

# Variables that would make boto3 ignore or override what s3_bucket sets (a profile that does
# not exist here raises ProfileNotFound; a session token would be sent along with our keys; a
# service-specific endpoint wins over AWS_ENDPOINT_URL).
_AWS_ENV_TO_CLEAR = (
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL_S3",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


@dataclass(frozen=True)
class S3Bucket:
    """A bucket on the test S3 server."""

    name: str
    endpoint_url: str
    client: Any  # boto3 S3 client (path-style, us-east-1)
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def url(self, key: str = "") -> str:
        """``s3://<bucket>/<key>``."""
        return f"s3://{self.name}/{key.lstrip('/')}"


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running SeaweedFS (master+volume+filer+S3) for the test session."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start(timeout=float(os.environ.get("SEAWEEDFS_START_TIMEOUT", "90")))
    try:
        yield server
    finally:
        server.stop()


def _bucket_name(node_name: str) -> str:
    # S3 rules: 3-63 chars of [a-z0-9.-], starting/ending alphanumeric.
    stem = re.sub(r"[^a-z0-9]+", "-", node_name.lower()).strip("-")[:40].strip("-")
    return f"t-{stem}-{uuid.uuid4().hex[:10]}" if stem else f"t-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def s3_bucket(
    seaweedfs: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[S3Bucket]:
    """A fresh, empty bucket; ``AWS_*`` env vars point at the server during the test."""
    name = seaweedfs.create_bucket(_bucket_name(request.node.name))
    for var in _AWS_ENV_TO_CLEAR:
        monkeypatch.delenv(var, raising=False)
    # Keep a developer's ~/.aws/{config,credentials} out of the picture.
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    for var, value in seaweedfs.env().items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("AWS_REGION", seaweedfs.region)
    bucket = S3Bucket(
        name=name,
        endpoint_url=seaweedfs.endpoint_url,
        client=seaweedfs.client(),
        access_key=seaweedfs.access_key,
        secret_key=seaweedfs.secret_key,
        region=seaweedfs.region,
    )
    try:
        yield bucket
    finally:
        try:
            seaweedfs.delete_bucket(name)
        except Exception as e:  # noqa: BLE001 - cleanup must not mask the test's outcome
            warnings.warn(f"could not delete test bucket {name}: {e!r}", stacklevel=1)
