"""A shard's gzip bytes are a function of its uncompressed bytes only.

Shard keys are digests of the uncompressed content, and the manifest records each file's
sha256 and gzip size: a DAG (render mapped over batches) must write the very bytes the CLI
(one render of every shard) writes, and a shard rendered again (`--force`, a live file found
missing and uploaded again) must come out as the manifest recorded it. Render hands the
compressor a shard's lines in pieces that depend on the planned part's row groups and on
which shards are rendered together (a batch reads only its row groups); ISA-L's output for
the same input cut into other calls differs (for about 1 cut in 150 of a sitemap body).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import random
from collections.abc import Iterator
from typing import IO

from pipeline.render import _compressor, _GzipSink
from pipeline.sitemap_xml import URLSET_FOOTER, urlset_header


class MemoryStorage:
    """Objects in a dict: what render's sink writes (it needs only open_write), no disk."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    @contextlib.contextmanager
    def open_write(self, key: str, *, cache_control: str | None = None
                   ) -> Iterator[IO[bytes]]:
        f = io.BytesIO()
        yield f
        self.objects[key] = f.getvalue()


def _body(seed: int, lines: int) -> list[bytes]:
    rng = random.Random(seed)
    return [(f"<url><loc>https://www.example.com/product/item-{rng.randrange(10**6)}</loc>"
             + (f"<lastmod>2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T03:00:00Z</lastmod>"
                if rng.random() < 0.6 else "") + "</url>\n").encode() for _ in range(lines)]


def _write(out: MemoryStorage, key: str, header: bytes, pieces: list[bytes],
           footer: bytes) -> tuple[str, bytes]:
    sink = _GzipSink(out, key, header)
    for piece in pieces:
        sink.write(piece)
    sha = sink.close(footer)
    assert sink.raw == len(header) + sum(map(len, pieces)) + len(footer)
    return sha, out.objects[key]


def test_gzip_bytes_do_not_depend_on_how_the_writes_are_cut() -> None:
    out = MemoryStorage()
    header, footer = urlset_header([]).encode(), URLSET_FOOTER.encode()
    differ = []
    for seed in range(3):
        lines = _body(seed, 1_500)
        body = b"".join(lines)
        whole_sha, whole = _write(out, "whole.xml.gz", header, [body], footer)
        assert hashlib.sha256(whole).hexdigest() == whole_sha
        # A body in one piece: the bytes earlier versions wrote (header, body and footer
        # compressed in three calls), so a file published before is rendered again as it is.
        z = _compressor()
        assert whole == b"".join([z.compress(header), z.compress(body), z.compress(footer),
                                  z.flush()])
        ends = [0]
        for line in lines:
            ends.append(ends[-1] + len(line))
        # The body cut in two at every 7th line, as a shard that straddles two row-group
        # blocks is written; then in many pieces.
        cuttings = [[body[:c], body[c:]] for c in ends[1:-1:7]]
        cuttings.append(lines)
        for pieces in cuttings:
            sha, data = _write(out, "cut.xml.gz", header, pieces, footer)
            assert gzip.decompress(data) == header + body + footer
            if sha != whole_sha:
                differ.append((seed, [len(p) for p in pieces][:2]))
    assert differ == [], f"{len(differ)} cuttings gave other gzip bytes, e.g. {differ[:3]}"
