"""Reads a published output back and checks it the way a crawler and a reviewer would."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from lxml import etree

from pipeline import storage
from pipeline.layout import default_state
from pipeline.validate import SCHEMAS, schema  # the vendored XSDs, read offline  # noqa: F401

NS = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}
XHTML = "http://www.w3.org/1999/xhtml"


def check_hreflang(doc: etree._Element) -> None:
    """Google's hreflang rules: rel=alternate, hreflang and href set, each URL lists itself."""
    for url in doc.iterfind("sm:url", NS):
        links = url.findall(f"{{{XHTML}}}link")
        if not links:
            continue
        loc = url.findtext("sm:loc", namespaces=NS)
        assert all(lk.get("rel") == "alternate" and lk.get("hreflang") and lk.get("href")
                   for lk in links)
        assert loc in {lk.get("href") for lk in links}, f"{loc} does not list itself"


@dataclass
class Output:
    manifest: dict[str, Any]
    locs: list[str] = field(default_factory=list)
    lastmods: dict[str, str | None] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # key -> its locs
    raw_sizes: dict[str, int] = field(default_factory=dict)
    namespaces: dict[str, set[str]] = field(default_factory=dict)


def read_output(out_uri: str, *, max_urls: int = 50_000, max_bytes: int = 52_428_800,
                max_per_index: int = 50_000) -> Output:
    """Parse and validate every index and sitemap the live manifest lists; check limits."""
    out = storage.open_storage(out_uri)
    manifest = json.loads(out.read_bytes("manifest.json"))
    result = Output(manifest)
    listed: list[str] = []
    public = manifest["public_url"].rstrip("/") + "/"
    for index in manifest["indexes"]:
        raw = out.read_bytes(index["key"])
        assert raw == out.read_bytes(index["generation_key"]), "root index lags the manifest"
        doc = etree.fromstring(raw)
        schema("siteindex.xsd").assertValid(doc)
        locs = [e.text for e in doc.iterfind("sm:sitemap/sm:loc", NS)]
        assert 0 < len(locs) <= max_per_index
        listed += locs
    entries = {s["url"]: s for s in manifest["sitemaps"]}
    assert sorted(listed) == sorted(entries), "indexes and manifest disagree"
    for url, entry in entries.items():
        assert url.startswith(public)
        key = url[len(public):]
        assert key == entry["key"]
        gz = out.read_bytes(key)
        import hashlib

        assert hashlib.sha256(gz).hexdigest() == entry["sha256"]
        assert len(gz) == entry["gzip_bytes"]
        raw = gzip.decompress(gz)
        assert len(raw) == entry["bytes"] <= max_bytes
        doc = etree.fromstring(raw)
        check_hreflang(doc)
        used = {etree.QName(e).namespace for e in doc.iter()} - {NS["sm"]}
        declared = {uri for prefix, uri in doc.nsmap.items() if prefix is not None}
        assert used == declared, f"{key}: namespaces declared {declared}, used {used}"
        result.namespaces[key] = used
        for link in doc.iterfind(f".//{{{XHTML}}}link"):  # no schema for xhtml:link
            link.getparent().remove(link)
        schema("all.xsd" if used else "sitemap.xsd").assertValid(doc)
        locs = [e.text for e in doc.iterfind("sm:url/sm:loc", NS)]
        assert 0 < len(locs) == entry["urls"] <= max_urls
        result.files[key] = locs
        result.raw_sizes[key] = len(raw)
        for u in doc.iterfind("sm:url", NS):
            loc = u.findtext("sm:loc", namespaces=NS)
            result.lastmods[loc] = u.findtext("sm:lastmod", namespaces=NS)
        result.locs += locs
    assert len(result.locs) == len(set(result.locs)), "a URL is published twice"
    assert manifest["counts"]["published"] == len(result.locs)
    return result


def write_inventory(path: Path, columns: dict[str, list[Any]], schema: pa.Schema | None = None
                    ) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def state_file(out_uri: str, manifest: dict[str, Any], name: str,
               state_uri: str | None = None) -> str:
    """The URI of a generation's private state file (`snapshot`, `rejects`, `changes`): the
    served manifest names none, it is `<state>/generations/<id>/<name>.parquet`."""
    return storage.join(state_uri or default_state(out_uri), "generations",
                        manifest["generation"], f"{name}.parquet")
