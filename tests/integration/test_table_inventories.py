"""A Delta Lake table and an Apache Iceberg table as the inventory (pipeline.tables).

Each is written with its own library (deltalake, pyiceberg with a SQL catalog on SQLite)
and read by a whole run: it publishes the table's valid URLs; a run of the same table
version is decided unchanged from the table's metadata (no row read); a new version with
more rows publishes them; a compaction (the same rows in other files) is read, found the
same and publishes nothing. What the data files alone would publish wrongly is refused."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.errors import InventoryError
from pipeline.run import run
from pipeline.settings import RunOptions
from pipeline.tables import resolve
from tests.output_check import read_output

pytestmark = pytest.mark.integration

SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
ROWS = 300
SCHEMA = pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us", "UTC")),
                    ("changefreq", pa.string())])


def rows(start: int, count: int) -> pa.Table:
    """`count` URL rows from `start`, every 50th one not http(s) (rejected)."""
    ids = range(start, start + count)
    return pa.table({
        "url": [f"ftp://www.example.com/x-{i}" if i % 50 == 7 else f"{SITE}{'ab'[i % 2]}/page-{i:05d}"
                for i in ids],
        "lastmod": [T0 - timedelta(days=i % 9) for i in ids],
        "changefreq": ["daily" if i % 3 else "weekly" for i in ids],
    }, schema=SCHEMA)


def valid_urls(*tables: pa.Table) -> set[str]:
    return {u for t in tables for u in t["url"].to_pylist() if u.startswith(SITE)}


def run_on(inventory: str, out: str, day: int) -> dict[str, Any]:
    return run(RunOptions(inventory=inventory, site_url=SITE, out=out,
                          run_time=T0 + timedelta(days=day)))


def begin_rows(summary: dict[str, Any]) -> int:
    return int(summary["stage_io"]["begin"]["rows_read"])


def check_versions(inventory: str, out: str, append: Any, compact: Any,
                   caplog: pytest.LogCaptureFixture) -> None:
    """The whole life of a table inventory: published, unchanged, appended, compacted."""
    first_rows = rows(0, ROWS)
    first = run_on(inventory, out, 0)
    assert first["published"]
    assert set(read_output(out).locs) == valid_urls(first_rows)
    assert first["counts"]["rejected"] == {"not_http": ROWS // 50}

    # the same version: decided from one read of the table's metadata, not a row read
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.tables"):
        again = run_on(inventory, out, 1)
    assert again["unchanged"] and again["generation"] == first["generation"]
    assert begin_rows(again) == 0
    assert len([r for r in caplog.records if r.name == "pipeline.tables"]) == 1

    added = rows(ROWS, 100)
    append(added)
    grown = run_on(inventory, out, 2)
    assert grown["published"] and not grown["unchanged"]
    assert grown["counts"]["added"] == len(valid_urls(added))
    assert set(read_output(out).locs) == valid_urls(first_rows, added)

    # the same rows in other files: a new version, read whole, the same rows: no publish
    before = resolve(inventory)
    compact()
    after = resolve(inventory)
    assert after.version != before.version and {f.uri for f in after.files} != {
        f.uri for f in before.files}
    compacted = run_on(inventory, out, 3)
    assert compacted["unchanged"] and compacted["generation"] == grown["generation"]
    assert begin_rows(compacted) == ROWS + 100
    # and the night after, decided from the metadata again
    assert begin_rows(run_on(inventory, out, 4)) == 0


# Delta Lake -------------------------------------------------------------------------------


def test_a_delta_table_is_published_skipped_when_unchanged_and_read_again_when_not(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from deltalake import DeltaTable, write_deltalake

    table = tmp_path / "urls"
    write_deltalake(str(table), rows(0, ROWS))
    check_versions(
        f"delta+file://{table}", str(tmp_path / "out"),
        lambda added: write_deltalake(str(table), added, mode="append"),
        lambda: DeltaTable(str(table)).optimize.compact(), caplog)
    # the identity kept is the table's own version
    record = json.loads((tmp_path / "out.state" / "input-identity.json").read_text())
    version = DeltaTable(str(table)).version()
    assert {f[2] for f in record["inventory"]["files"]} == {
        f"delta:{DeltaTable(str(table)).metadata().id}@{version}"}


def test_a_delta_table_on_s3_is_read(s3_bucket: Any, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from pipeline.tables import _delta_storage_options

    location = s3_bucket.url("tables/urls")
    options = {**_delta_storage_options(location), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(location, rows(0, ROWS), storage_options=options)
    out = s3_bucket.url("out/")
    first = run_on(f"delta+{location}", out, 0)
    assert first["published"]
    assert set(read_output(out).locs) == valid_urls(rows(0, ROWS))
    assert all(f.uri.startswith(location + "/") for f in resolve(f"delta+{location}").files)
    again = run_on(f"delta+{location}", out, 1)
    assert again["unchanged"] and begin_rows(again) == 0


def test_a_delta_table_with_deletion_vectors_is_refused(tmp_path: Path) -> None:
    """deltalake writes no deletion vector: the commit Spark makes for a DELETE on a table
    with them enabled is written as the protocol has it."""
    from deltalake import DeltaTable, write_deltalake

    table = tmp_path / "urls"
    write_deltalake(str(table), rows(0, ROWS))
    add = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pylist()[0]
    now = int(T0.timestamp() * 1000)
    commit = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
        {"remove": {"path": add["path"], "deletionTimestamp": now, "dataChange": True}},
        {"add": {"path": add["path"], "size": add["size_bytes"], "partitionValues": {},
                 "modificationTime": add["modification_time"], "dataChange": True,
                 "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                                    "offset": 1, "sizeInBytes": 36, "cardinality": 2}}},
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
    ]
    (table / "_delta_log" / f"{1:020d}.json").write_text("\n".join(map(json.dumps, commit)) + "\n")
    with pytest.raises(InventoryError, match="deletion vectors.*purge them"):
        run_on(f"delta+{table}", str(tmp_path / "out"), 0)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_delta_table_with_column_mapping_is_refused(tmp_path: Path) -> None:
    """Its data files name columns by physical names (col-<uuid>), not the table's."""
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "urls"), rows(0, 10),
                    configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(InventoryError, match="column mapping"):
        resolve(f"delta+{tmp_path / 'urls'}")


# Apache Iceberg ---------------------------------------------------------------------------


def iceberg_catalog(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("default", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                      warehouse=f"file://{tmp_path / 'warehouse'}")


def test_an_iceberg_table_is_published_skipped_when_unchanged_and_read_again_when_not(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    catalog = iceberg_catalog(tmp_path)
    catalog.create_namespace("www")
    table = catalog.create_table("www.urls", schema=SCHEMA)
    table.append(rows(0, ROWS))

    def compact() -> None:  # pyiceberg's compaction: the rows overwritten into new files
        whole = table.scan().to_arrow()
        table.overwrite(whole)

    check_versions(f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.urls",
                   str(tmp_path / "out"), table.append, compact, caplog)


def test_an_iceberg_table_on_s3_is_read(s3_bucket: Any, tmp_path: Path) -> None:
    """The catalog on SQLite, the table's metadata and data files on SeaweedFS."""
    from pyiceberg.catalog.sql import SqlCatalog

    from pipeline.tables import _iceberg_properties

    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                         warehouse=s3_bucket.url("warehouse"), **_iceberg_properties())
    catalog.create_namespace("www")
    catalog.create_table("www.urls", schema=SCHEMA).append(rows(0, ROWS))
    inventory, out = f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.urls", s3_bucket.url("out/")
    assert all(f.uri.startswith(s3_bucket.url("warehouse/")) for f in resolve(inventory).files)
    assert run_on(inventory, out, 0)["published"]
    assert set(read_output(out).locs) == valid_urls(rows(0, ROWS))
    again = run_on(inventory, out, 1)
    assert again["unchanged"] and begin_rows(again) == 0


def test_an_iceberg_table_with_delete_files_is_refused(tmp_path: Path) -> None:
    """pyiceberg writes no delete file (its merge-on-read falls back to copy-on-write): a
    positional delete file Spark would write, committed through pyiceberg's snapshot
    producer."""
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    catalog = iceberg_catalog(tmp_path)
    catalog.create_namespace("www")
    table = catalog.create_table("www.urls", schema=SCHEMA)
    table.append(rows(0, ROWS))
    data = next(iter(table.scan().plan_files())).file.file_path
    deletes = tmp_path / "warehouse" / "deletes.parquet"
    pq.write_table(pa.table({"file_path": [data], "pos": pa.array([3], pa.int64())}), deletes)
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=f"file://{deletes}",
        file_format=FileFormat.PARQUET, partition={}, record_count=1,
        file_size_in_bytes=deletes.stat().st_size)
    delete_file.spec_id = table.spec().spec_id
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(delete_file)
    with pytest.raises(InventoryError, match="delete files.*compact the table"):
        run_on(f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.urls", str(tmp_path / "out"), 0)


def test_an_iceberg_table_with_a_renamed_column_or_an_orc_file_is_refused(tmp_path: Path
                                                                          ) -> None:
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    catalog = iceberg_catalog(tmp_path)
    catalog.create_namespace("www")
    renamed = catalog.create_table("www.renamed", schema=SCHEMA)
    renamed.append(rows(0, 10))
    with renamed.update_schema() as update:
        update.rename_column("changefreq", "change_frequency")
    with pytest.raises(InventoryError, match="'change_frequency' was renamed from 'changefreq'"):
        resolve(f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.renamed")

    orc = catalog.create_table("www.orc", schema=SCHEMA)
    orc_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"file://{tmp_path}/urls.orc",
        file_format=FileFormat.ORC, partition={}, record_count=10, file_size_in_bytes=1000)
    orc_file.spec_id = orc.spec().spec_id
    with orc.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(orc_file)
    with pytest.raises(InventoryError, match="is ORC, not Parquet"):
        resolve(f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.orc")


# URIs and what is not there --------------------------------------------------------------


@pytest.mark.parametrize(("uri", "words"), [
    ("delta+ftp://host/t", "a Delta table URI is"),
    ("delta+{tmp}/nothing", "no Delta table at"),
    ("iceberg+sqlite://{tmp}/nothing.db#www.urls", "no Iceberg catalog at"),
    ("iceberg+sqlite://{tmp}/catalog.db", "an Iceberg table URI is"),
    ("iceberg+sqlite://relative/catalog.db#www.urls", "must be absolute"),
    ("iceberg+mysql://host/db#www.urls", "an Iceberg table URI is"),
    ("iceberg+sqlite://{tmp}/catalog.db#www.other", "no Iceberg table www.other"),
    ("iceberg+sqlite:///{tmp}/catalog.db#www.other", "no Iceberg table www.other"),
])
def test_a_bad_table_uri_or_a_missing_table_is_refused(tmp_path: Path, uri: str,
                                                       words: str) -> None:
    iceberg_catalog(tmp_path).create_namespace("www")
    with pytest.raises(InventoryError, match=words):
        run_on(uri.format(tmp=tmp_path), str(tmp_path / "out"), 0)


def test_a_catalog_of_another_name_is_named_in_the_uri(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from pipeline.tables import _iceberg_parts

    catalog = SqlCatalog("prod", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                         warehouse=f"file://{tmp_path / 'warehouse'}")
    catalog.create_namespace("www")
    catalog.create_table("www.urls", schema=SCHEMA).append(rows(0, 10))
    uri = f"iceberg+sqlite://{tmp_path / 'catalog.db'}?catalog=prod#www.urls"
    assert len(resolve(uri).files) == 1
    with pytest.raises(InventoryError, match="no Iceberg table www.urls in catalog 'default'"):
        resolve(uri.replace("?catalog=prod", ""))
    assert _iceberg_parts("iceberg+postgresql://u@db.internal/cat?sslmode=require&catalog=prod"
                          "#www.urls") == (
        "postgresql://u@db.internal/cat?sslmode=require", "prod", "www.urls")


def test_a_run_without_tables_imports_neither_library() -> None:
    code = ("import sys, pipeline.cli, pipeline.steps, pipeline.load, pipeline.run\n"
            "print(sorted(m for m in ('deltalake', 'pyiceberg') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert found == "[]"


def test_an_iceberg_tables_partition_folders_are_not_read_as_columns(tmp_path: Path) -> None:
    """An identity-partitioned Iceberg table's folders spell its values as the writer does
    (`section=a+b` for `a b`); its data files hold the values themselves."""
    import duckdb

    from pipeline.load import plan_load
    from pipeline.parquet import register_parquet

    catalog = iceberg_catalog(tmp_path)
    catalog.create_namespace("www")
    table = catalog.create_table("www.urls", schema=SCHEMA.append(pa.field("section", pa.string())))
    with table.update_spec() as spec:
        spec.add_identity("section")
    first = rows(0, 10)
    table.append(first.append_column("section", pa.array(["a b", "c"] * 5)))
    plan = plan_load(f"iceberg+sqlite://{tmp_path / 'catalog.db'}#www.urls", SITE)
    assert not plan.hive and any("/section=a+b/" in f for f in plan.files)
    con = duckdb.connect()
    register_parquet(con, "inventory", plan.files, hive=plan.hive)
    assert con.sql("SELECT DISTINCT section FROM inventory ORDER BY 1").fetchall() == [("a b",), ("c",)]
