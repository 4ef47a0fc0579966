"""The plan's pure rules, without DuckDB or files: which groups are kept, merged or repacked,
where slices are cut, how shards are numbered and cut by count and bytes."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline import plan
from pipeline.config import Limits
from pipeline.errors import ConfigError
from pipeline.extensions import NEWS_SECTION
from pipeline.plan import Group, Slice, packing, slices

LIMITS = Limits(max_urls=100, max_bytes=100_000)
BUDGET = LIMITS.body_budget


def _group(section: str, base: int | None, urls: int, body: int, max_line: int = 100
           ) -> tuple[str, int | None, int, int, int]:
    return (section, base, urls, body, max_line)


def test_a_shard_within_limits_is_kept_as_it_is() -> None:
    groups, split, merged = packing._groups([_group("a", 0, 60, 6_000)], LIMITS, first_run=False)
    assert (split, merged) == (0, 0)
    assert [(g.base_shard, g.repack, g.fill_urls, g.merged) for g in groups] == [
        (0, False, 1, False)]


def test_a_shard_over_a_limit_is_split_to_three_quarters() -> None:
    groups, split, _ = packing._groups([_group("a", 0, 101, 10_100, 100)], LIMITS, first_run=False)
    assert split == 1
    g = groups[0]
    assert g.repack and g.fill_urls == 75
    assert g.fill_bytes == int(BUDGET * plan.SPLIT_FILL) - 100 + 1
    # too many bytes splits it as well, whatever the count
    groups, split, _ = packing._groups([_group("a", 0, 10, BUDGET + 1)], LIMITS, first_run=False)
    assert split == 1 and groups[0].repack


def test_a_new_section_or_a_first_run_is_packed_full() -> None:
    groups, split, _ = packing._groups([_group("new", None, 500, 50_000, 120)], LIMITS,
                                    first_run=False)
    assert split == 0  # a new section is not a split
    assert (groups[0].fill_urls, groups[0].fill_bytes) == (100, BUDGET - 120 + 1)
    groups, _, _ = packing._groups([_group("a", 0, 150, 15_000)], LIMITS, first_run=True)
    assert groups[0].fill_urls == 100


def test_a_tiny_shard_merges_into_its_predecessor_when_both_fit() -> None:
    stats = [_group("a", 0, 50, 5_000), _group("a", 1, 5, 500), _group("a", 2, 9, 900)]
    groups, _, merged = packing._groups(stats, LIMITS, first_run=False)
    assert merged == 2
    # the merged groups share the predecessor's group id, so they are written as one shard
    assert [g.group_id for g in groups] == [0, 0, 0]
    assert groups[0].urls == 64 and groups[0].body == 6_400
    # no merge across sections, none into a repacked group, none past the limits
    stats = [_group("a", 0, 95, 9_500), _group("a", 1, 9, 900), _group("b", 0, 5, 500)]
    groups, _, merged = packing._groups(stats, LIMITS, first_run=False)
    assert merged == 0 and [g.group_id for g in groups] == [0, 1, 2]
    stats = [_group("a", 0, 150, 15_000), _group("a", 1, 5, 500)]
    groups, _, merged = packing._groups(stats, LIMITS, first_run=False)
    assert merged == 0


def test_news_sitemaps_hold_at_most_1000_urls() -> None:
    limits = Limits()
    assert plan.section_limits(NEWS_SECTION, limits).max_urls == 1_000
    assert plan.section_limits("product", limits).max_urls == limits.max_urls
    groups, _, _ = packing._groups([_group(NEWS_SECTION, None, 5_000, 50_000)], limits,
                                first_run=True)
    assert groups[0].fill_urls == 1_000


def test_an_entry_larger_than_a_file_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot hold one entry of section 'a'"):
        packing._groups([_group("a", None, 1, BUDGET + 1, BUDGET + 1)], LIMITS, first_run=True)


def test_pack_subs_never_passes_a_limit_and_makes_few_shards() -> None:
    rng = np.random.default_rng(7)
    lines = rng.integers(50, 400, size=5_000).astype(np.int64)
    cuts = plan.pack_subs(lines, fill_urls=100, fill_bytes=20_000)
    assert cuts[0] == 0 and cuts == sorted(set(cuts))
    ends = [*cuts[1:], len(lines)]
    for start, end in zip(cuts, ends, strict=True):
        assert 0 < end - start <= 100
        # a line may straddle a byte bucket's edge: fill_bytes leaves room for the longest
        assert lines[start:end].sum() < 20_000 + lines.max()
    # a shard ends at a count bucket's or a byte bucket's edge: never more shards than both
    assert len(cuts) <= -(-5_000 // 100) + -(-int(lines.sum()) // 20_000)
    # equal short lines: cut by count alone, every 100 rows
    assert plan.pack_subs(np.full(350, 10, np.int64), 100, 20_000) == [0, 100, 200, 300]
    # long lines: cut by bytes alone
    assert plan.pack_subs(np.full(10, 1_000, np.int64), 100, 3_000) == [0, 3, 6, 9]
    assert plan.pack_subs(np.array([], np.int64), 100, 3_000) == []


def test_cuts_by_shards_never_cut_a_previous_shard() -> None:
    # (lower, upper, urls, weight); the shard "b".."m" spans the start of "c": no cut at "c"
    bounds = [("a", "a9", 40, 40), ("b", "m", 40, 40), ("c", "c9", 40, 40), ("n", "n9", 40, 40),
              ("o", "o9", 40, 40)]
    cuts = slices._cuts_by_shards(bounds, slice_rows=70, max_rows=70)
    assert "c" not in cuts
    assert cuts == ["b", "n", "o"]
    assert slices._cuts_by_shards(bounds, slice_rows=1_000, max_rows=1_000) == []


def test_cuts_by_shards_weigh_the_rows_to_write() -> None:
    # An incremental run: only "n" has rows to write; the others are counted, up to max_rows.
    bounds = [(lo, lo + "9", 40, 40 if lo == "n" else 0) for lo in ("a", "b", "c", "n", "o")]
    assert slices._cuts_by_shards(bounds, slice_rows=70, max_rows=1_000) == []
    assert slices._cuts_by_shards(bounds, slice_rows=70, max_rows=130) == ["n"]
    heavy = [(lo, hi, urls, urls) for lo, hi, urls, _ in bounds]
    assert slices._cuts_by_shards(heavy, slice_rows=70, max_rows=1_000) == ["b", "c", "n", "o"]


def test_cuts_by_sample_are_quantiles() -> None:
    sample = [f"u{i:03d}" for i in range(100)]
    assert slices._cuts_by_sample(sample, rows=1_000, slice_rows=250) == ["u025", "u050", "u075"]
    assert slices._cuts_by_sample([], rows=1_000, slice_rows=250) == []
    assert slices._cuts_by_sample(sample, rows=200, slice_rows=250) == []


def test_provisional_numbers_are_final_in_a_sections_first_slice_only() -> None:
    slices = [Slice(("a", "b")), Slice(("c",), None, "m"), Slice(("c",), "m", None)]
    assert plan.provisional_base(slices, 0, {"a": 7}) == {"a": 7, "b": 0}
    assert plan.provisional_base(slices, 1, {"c": 3}) == {"c": 3}
    later = plan.provisional_base(slices, 2, {"c": 3})
    assert later == {"c": 3 << plan.PROVISIONAL_SHIFT}
    assert later["c"] > 2**32  # above every final number


def test_number_shards_keeps_kept_numbers_and_counts_on_for_new_ones() -> None:
    by_id = {0: Group("a", base_shard=4, group_id=0, repack=True, fill_urls=10, fill_bytes=1_000,
                      urls=30, body=3_000),
             1: Group("a", base_shard=None, group_id=1, repack=True, fill_urls=10,
                      fill_bytes=1_000, urls=10, body=1_000)}
    # (group_id, sub, start, end): group 0 split in three, group 1 new
    pieces = [(0, 0, 0, 10), (0, 1, 10, 20), (0, 2, 20, 30), (1, 0, 30, 40)]
    assert packing._number_shards(pieces, by_id, {"a": 9}) == [4, 9, 10, 11]


def test_group_ids_take_the_narrowest_type_that_holds_every_id() -> None:
    """planned_rows' sort key begins with the group id: 2 bytes while ids 0..65535 fit."""
    import pyarrow as pa

    assert packing._group_id_type(1) == pa.uint16()
    most = packing._group_id_type(2**16)
    assert most == pa.uint16() and pa.array([2**16 - 1], most)[0].as_py() == 2**16 - 1
    assert packing._group_id_type(2**16 + 1) == pa.int32()
