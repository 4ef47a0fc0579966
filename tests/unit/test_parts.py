"""The fan-out protocol (pipeline.parts): parts written in any order are gathered in part
order; a missing part or one written for another fan-out fails the combine, named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import storage
from pipeline.errors import InternalError
from pipeline.parts import Parts

PARTS = Parts(name="step", what="step part", token_field="token",
              missing_hint="run them first", stale_hint="are of another fan-out than {count}")


@pytest.fixture
def work(tmp_path: Path) -> storage.Storage:
    return storage.open_storage(str(tmp_path))


def test_parts_are_gathered_in_part_order_whatever_order_they_were_written_in(
        work: storage.Storage) -> None:
    for index in (2, 0, 3, 1):
        uri = PARTS.write(work, index, "t1", {"index": index, "rows": 10 * index})
        assert uri == work.uri(f"step-{index:05d}.json")
    results = PARTS.gather(work, 4, "t1")
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert [r["rows"] for r in results] == [0, 10, 20, 30]
    assert all(r["token"] == "t1" for r in results)


def test_missing_parts_are_named(work: storage.Storage) -> None:
    PARTS.write(work, 1, "t1", {})
    with pytest.raises(InternalError) as err:
        PARTS.gather(work, 4, "t1", where="s3://bucket/work")
    assert str(err.value).endswith("step part(s) [0, 2, 3] of 4 have no result (step-00000.json "
                                   "under s3://bucket/work): run them first")


def test_a_part_of_another_fan_out_is_stale(work: storage.Storage) -> None:
    for index in range(3):
        PARTS.write(work, index, "t1", {})
    PARTS.write(work, 1, "t2", {})  # the fan-out began again; part 1 ran again
    with pytest.raises(InternalError, match=r"step part\(s\) \[0, 2\] are of another fan-out "
                                            r"than 3"):
        PARTS.gather(work, 3, "t2")
    # a result without a token is stale too
    work.write_bytes(PARTS.key(0), json.dumps({"index": 0}).encode())
    with pytest.raises(InternalError, match=r"\[0\]"):
        PARTS.gather(work, 1, "t1")


def test_no_parts_gather_to_nothing(work: storage.Storage) -> None:
    assert PARTS.gather(work, 0, "t1") == []
