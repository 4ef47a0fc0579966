"""The render batches plan hands the DAG (pipeline.steps.render_batches): shards in plan
order, about `render_batch_bytes` each, live shards left out, and never more batches than
Airflow maps (`max_map_length`): past that the batches grow."""

from __future__ import annotations

from pipeline.shards import Shard
from pipeline.steps import render_batches


def _shards(n: int, body_bytes: int = 100) -> list[Shard]:
    return [Shard(section="s", shard=i, urls=10, body_bytes=body_bytes, lastmod=None,
                  digest=f"{i:032x}", changed_rows=1) for i in range(n)]


def test_batches_by_bytes_in_plan_order_without_live_shards() -> None:
    shards = _shards(10)
    assert render_batches(shards, set(), 300) == [
        ["s/0", "s/1", "s/2"], ["s/3", "s/4", "s/5"], ["s/6", "s/7", "s/8"], ["s/9"]]
    live = {shards[1].key, shards[2].key}
    assert render_batches(shards, live, 300) == [
        ["s/0", "s/3", "s/4"], ["s/5", "s/6", "s/7"], ["s/8", "s/9"]]
    assert render_batches(shards, {s.key for s in shards}, 300) == []  # nothing to render
    big = _shards(2, body_bytes=1_000)  # a shard larger than a batch is a batch of its own
    assert render_batches(big, set(), 300) == [["s/0"], ["s/1"]]


def test_more_batches_than_airflow_maps_grow_the_batches() -> None:
    shards = _shards(5_000)
    assert len(render_batches(shards, set(), 100)) == 5_000  # no limit: one shard a batch
    batches = render_batches(shards, set(), 100, max_batches=1_024)
    assert len(batches) == 625 and {len(b) for b in batches} == {8}  # 100 B doubled 3 times
    assert [uid for b in batches for uid in b] == [s.uid for s in shards]  # none lost
    assert len(render_batches(shards, set(), 100, max_batches=1)) == 1
    assert render_batches(shards, set(), 100, max_batches=5_000) == \
        render_batches(shards, set(), 100)  # within the limit: as they were
