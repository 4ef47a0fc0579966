"""A messy 200,000-row inventory, every kind of dirt mixed in, end to end on SeaweedFS:
every input row is published or rejected with a reason, and the counts reconcile."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.run import RunOptions, run
from pipeline.urls import normalize_url
from tests.output_check import read_output

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SITE = "https://shop.example.com/store/"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
N = 200_000


def messy_row(i: int, rnd: random.Random) -> dict[str, Any]:
    kind = rnd.randrange(100)
    base = f"{SITE}{rnd.choice(['shoes', 'bags', 'hats', 'kids'])}/{i}"
    url: str | None = {
        0: "ftp://shop.example.com/store/x/" + str(i),
        1: f"https://other.example.com/store/a/{i}",
        2: f"https://shop.example.com/elsewhere/{i}",
        3: None,
        4: "   ",
        5: base + "/\x07bell",
        6: base + "/100%",
        7: "https://sh op.example.com/store/a/" + str(i),
        8: base + "/" + "z" * 2100,
        9: f"{SITE}shoes/{i - 1}",  # duplicate of another row, most of the time
        10: base.upper().replace("/STORE/", "/store/", 1).replace("HTTPS://SHOP.EXAMPLE.COM",
                                                                 "HTTPS://SHOP.EXAMPLE.COM:443"),
        11: base + "/café crème",
        12: base + "#fragment",
        13: base + "?b=2&a=1",
    }.get(kind, base)
    lastmod = rnd.choice([None, (NOW - timedelta(days=rnd.randrange(400))).isoformat(),
                          "garbage", "2026-11-30", "2031-01-01T00:00:00Z"])
    return {"url": url, "lastmod": lastmod,
            "changefreq": rnd.choice([None, "daily", "WEEKLY", "sometimes"]),
            "priority": rnd.choice([None, 0.5, 1.0, 7.0, -1.0]),
            "images": rnd.choice([None, [], [{"loc": f"{SITE}i/{i}.jpg", "title": "A & B"}]])}


def test_messy_inventory_reconciles_on_s3(s3_bucket: Any, tmp_path: Path) -> None:
    rnd = random.Random(7)
    rows = [messy_row(i, rnd) for i in range(N)]
    image = pa.struct([("loc", pa.string()), ("title", pa.string())])
    schema = pa.schema([("url", pa.string()), ("lastmod", pa.string()),
                        ("changefreq", pa.string()), ("priority", pa.float64()),
                        ("images", pa.list_(image))])
    local = tmp_path / "messy.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), local, row_group_size=50_000)
    s3_bucket.client.upload_file(str(local), s3_bucket.name, "inv/messy.parquet")
    out = s3_bucket.url("out")
    summary = run(RunOptions(inventory=s3_bucket.url("inv/messy.parquet"), site_url=SITE,
                             out=out, run_time=NOW, max_reject_share=0.2))
    c = summary["counts"]
    assert c["input_rows"] == N == c["published"] + c["rejected_rows"]
    result = read_output(out)
    assert len(result.locs) == c["published"]

    # The same classification, computed row by row with the reference rules.
    expected: Counter[str] = Counter()
    kept: dict[str, tuple[Any, int]] = {}
    for i, r in enumerate(rows):
        url, reason = normalize_url(r["url"])
        if url is not None and not url.startswith(SITE):
            url, reason = None, "off_site"
        if url is None:
            expected[str(reason)] += 1
            continue
        lm = r["lastmod"]
        try:
            stamp = datetime.fromisoformat(lm.replace("Z", "+00:00")) if lm else None
            if stamp is not None and stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
        except ValueError:
            stamp = None
        if url in kept:
            expected["duplicate"] += 1
            other_stamp, other_i = kept[url]
            if (stamp or datetime.min.replace(tzinfo=UTC)) > (
                    other_stamp or datetime.min.replace(tzinfo=UTC)):
                kept[url] = (stamp, i)
        else:
            kept[url] = (stamp, i)
    assert c["rejected"] == dict(expected)
    assert set(result.locs) == set(kept)
    assert c["dropped_fields"]["lastmod_invalid"] > 0
    assert c["dropped_fields"]["changefreq_invalid"] > 0
    assert c["dropped_fields"]["priority_invalid"] > 0
    assert c["lastmod_clamped"] > 0
