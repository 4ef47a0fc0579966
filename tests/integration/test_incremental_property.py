"""Property: for random inventories and random edits, every run publishes exactly the
valid inventory within the limits, a shard's key changes only if its content did, and the
shard bounds in the snapshot's footer are those of its rows."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import sql
from pipeline.config import Limits
from pipeline.layout import default_state, state_file_key
from pipeline.snapshot import register_snapshot, shard_bounds
from tests.integration.test_incremental import SITE, Site

pytestmark = pytest.mark.integration

paths = st.tuples(st.sampled_from(["a", "b", "c", "dé"]), st.integers(0, 60)).map(
    lambda t: f"{SITE}{t[0]}/{t[1]:03d}")
inventories = st.dictionaries(paths, st.sampled_from(["h1", "h2", "h3"]), min_size=1, max_size=80)
edits = st.lists(st.tuples(st.sampled_from(["add", "remove", "change"]), paths,
                           st.sampled_from(["h1", "h2", "h3", "h4"])), max_size=30)


def shard_contents(out) -> dict[str, tuple[str, tuple]]:  # type: ignore[no-untyped-def]
    """section-number -> (key, the (loc, lastmod) pairs it holds)."""
    return {Path(k).name.rsplit("-", 1)[0]: (k, tuple((u, out.lastmods[u]) for u in locs))
            for k, locs in out.files.items()}


def assert_footer_bounds(root: str, generation: str) -> None:
    """The bounds plan reads from the snapshot's footer are what a scan of its rows finds."""
    snapshot = f"{default_state(root)}/{state_file_key(generation, 'snapshot')}"
    con = sql.connect()
    register_snapshot(con, snapshot)
    con.execute(sql.load_sql("previous_shard_bounds"))
    scanned = con.sql("SELECT * FROM shard_bounds ORDER BY section, shard").to_arrow_table()
    footer = shard_bounds(snapshot)
    assert footer is not None
    assert footer.sort_by([("section", "ascending"), ("shard", "ascending")]).equals(
        scanned.cast(footer.schema))
    assert scanned.num_rows > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventory=inventories, rounds=st.lists(edits, min_size=1, max_size=3),
       max_urls=st.integers(3, 12))
def test_random_edits(inventory: dict[str, str], rounds: list, max_urls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        site = Site(f"{tmp}/out", Path(tmp), {u: (h, None) for u, h in inventory.items()},
                    Limits(max_urls=max_urls))
        when = datetime(2026, 12, 1, tzinfo=UTC)
        first = site.publish(when)
        assert_footer_bounds(site.root, first["generation"])
        before = shard_contents(site.output())
        for edit in rounds:
            for op, url, h in edit:
                if op == "remove":
                    site.rows.pop(url, None)
                elif op == "add" or url in site.rows:
                    site.rows[url] = (h, None)
            if not site.rows:
                site.rows[f"{SITE}a/keep"] = ("k", None)
            when += timedelta(hours=1)
            summary = site.publish(when)
            if summary["published"]:
                assert_footer_bounds(site.root, summary["generation"])
            out = site.output()  # validates every file, limits and counts
            expected = {u.replace("dé", "d%C3%A9") for u in site.rows}
            assert set(out.locs) == expected
            after = shard_contents(out)
            for name, (key, content) in after.items():
                if name in before and before[name][1] == content:
                    assert before[name][0] == key, f"{name} got a new key for the same content"
                if name in before and before[name][0] == key:
                    assert before[name][1] == content
            before = after
