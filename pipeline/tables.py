"""Inventories kept as tables: a Delta Lake table or an Apache Iceberg table.

A table URI names the table; its current version's Parquet data files are the inventory,
read by load as any list of Parquet files is:

- `delta+file:///path/to/table`, `delta+/path/to/table`, `delta+s3://bucket/table`;
- `iceberg+sqlite:///path/to/catalog.db#namespace.table` (a SQL catalog on SQLite;
  `iceberg+postgresql://user@host/db#namespace.table` for one on PostgreSQL), with
  `?catalog=NAME` when the catalog's name is not `default`.

`resolve` reads the table's metadata only (the Delta log, the Iceberg metadata and
manifests) and gives its files with their sizes, each versioned by the table's identity
(format, table id, Delta version or Iceberg snapshot id): the listing pipeline.unchanged
records. The same table version is the same listing, so an unchanged table is decided
unchanged from one metadata read; a new version lists other versions and its rows are
read whole, as a changed Parquet inventory's are.

What the files alone would publish wrongly is refused (InventoryError): Delta deletion
vectors and column mapping, Iceberg delete files and renamed columns, data files that
are not Parquet. deltalake and pyiceberg are imported only here, only for a table URI.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from pipeline.errors import InventoryError, TransientError
from pipeline.storage import ListedFile, s3_settings

log = logging.getLogger(__name__)

DELTA_PREFIX = "delta+"
ICEBERG_PREFIX = "iceberg+"
#: The SQLAlchemy schemes an Iceberg SQL catalog may have (its database's).
ICEBERG_CATALOG_SCHEMES = ("sqlite", "postgresql")
#: The catalog name pyiceberg and Spark give a SQL catalog unless told otherwise.
DEFAULT_CATALOG = "default"
INSTALL_HINT = "install the tables extra: pip install 'sitemap-pipeline[tables]'"
TABLE_FORMS = ("delta+file:///path/to/table, delta+s3://bucket/table or "
               "iceberg+sqlite:///path/to/catalog.db#namespace.table")


@dataclass(frozen=True)
class TableVersion:
    """One version of a table: what it is and its data files."""

    format: str  # "delta" or "iceberg"
    location: str
    table_id: str
    #: The Delta version, or the Iceberg snapshot id.
    version: int
    files: list[ListedFile]

    @property
    def identity(self) -> str:
        """What names this very version: the version of each of its files' listing."""
        return f"{self.format}:{self.table_id}@{self.version}"


def is_table(uri: str) -> bool:
    """Whether `uri` names a table rather than Parquet files."""
    return uri.startswith((DELTA_PREFIX, ICEBERG_PREFIX))


def hive_partitioned(uri: str) -> bool:
    """Whether the inventory's `key=value` folders are columns: not an Iceberg table's,
    whose data files hold every column (a folder's value is the writer's spelling of it,
    `a+b` for `a b`); a Delta table's partition columns are only in its folders."""
    return not uri.startswith(ICEBERG_PREFIX)


def storage_location(uri: str) -> str | None:
    """The storage URI a table's files are under, where the URI says it (a Delta table's
    location); None for an Iceberg table (its catalog says where)."""
    return _delta_location(uri) if uri.startswith(DELTA_PREFIX) else None


def resolve(uri: str) -> TableVersion:
    """The current version of the table `uri` names, from its metadata; InventoryError
    for a bad URI, a missing table or one whose files alone do not hold its rows."""
    if uri.startswith(DELTA_PREFIX):
        return _resolve_delta(uri)
    if uri.startswith(ICEBERG_PREFIX):
        return _resolve_iceberg(uri)
    raise InventoryError(f"inventory {uri!r} is not a table URI: use {TABLE_FORMS}")


def _local_or_s3(uri: str, table: str) -> str:
    """A data file's URI as storage reads it: a local path or s3://."""
    if uri.startswith("file://"):  # a path as it is, as the rest of the pipeline reads one
        return uri.removeprefix("file://")
    if uri.startswith("s3a://"):
        return "s3://" + uri.removeprefix("s3a://")
    if uri.startswith("s3://") or "://" not in uri:
        return uri
    raise InventoryError(f"table {table}: data file {uri!r} is on storage this pipeline "
                         "cannot read: only local files and s3:// are read")


def _with_files(found: TableVersion, files: list[ListedFile]) -> TableVersion:
    """`found` with its data `files` (in URI order, as a listing is); InventoryError when
    it has none."""
    if not files:
        raise InventoryError(f"{found.format} table {found.location} has no data files in its "
                             f"current version ({found.version}): nothing to publish")
    log.info("inventory: %s table %s, version %d: %d data file(s)", found.format,
             found.location, found.version, len(files))
    return dataclasses.replace(found, files=sorted(files, key=lambda f: f.uri))


# Delta Lake ------------------------------------------------------------------------------


def _delta_location(uri: str) -> str:
    location = uri.removeprefix(DELTA_PREFIX)
    scheme, sep, rest = location.partition("://")
    if not location or (sep and scheme not in ("file", "s3")) or (sep and not rest):
        raise InventoryError(f"inventory {uri!r}: a Delta table URI is delta+ followed by a "
                             "local path, file:///path or s3://bucket/prefix")
    return location


def _delta_storage_options(location: str) -> dict[str, str]:
    """object_store's options for S3 from the run's S3 settings (an Airflow connection's
    or the environment's), so a table is read as the rest of the inventory would be."""
    if not location.startswith("s3://"):
        return {}
    options = _s3_options("AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
                          "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    if options.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def _s3_options(region: str, endpoint: str, key_id: str, secret: str, token: str
                ) -> dict[str, str]:
    """The run's S3 settings (pipeline.storage.s3_settings: an Airflow connection's or the
    environment's) under a library's names for them; those not set left out."""
    cfg = s3_settings()
    options = {region: cfg.region}
    if cfg.endpoint_url:
        options[endpoint] = cfg.endpoint_url
    if cfg.access_key_id:
        options[key_id] = cfg.access_key_id
        options[secret] = cfg.secret_access_key or ""
    if cfg.session_token:
        options[token] = cfg.session_token
    return options


def _resolve_delta(uri: str) -> TableVersion:
    location = _delta_location(uri)
    try:
        import pyarrow as pa
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError
    except ImportError as exc:
        raise InventoryError(f"inventory {uri!r} is a Delta table: {INSTALL_HINT}") from exc
    if location.startswith("file://"):
        location = location.removeprefix("file://")
    if "://" not in location:
        location = os.path.abspath(location)
    try:
        table = DeltaTable(location, storage_options=_delta_storage_options(location))
        protocol = table.protocol()
        config = table.metadata().configuration
        if config.get("delta.columnMapping.mode", "none") != "none":
            raise InventoryError(
                f"Delta table {location} uses column mapping (delta.columnMapping.mode = "
                f"{config['delta.columnMapping.mode']}): its data files name columns other "
                "than the table does, and cannot be read as Parquet; write the inventory to "
                "a table without column mapping")
        if "deletionVectors" in (protocol.reader_features or []):
            _refuse_deletion_vectors(table, location)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()  # arro3's, as pyarrow
        uris = table.file_uris()
        found = TableVersion("delta", location, str(table.metadata().id), table.version(), [])
    except TableNotFoundError as exc:
        raise InventoryError(f"inventory {uri!r}: no Delta table at {location} (no _delta_log "
                             "there); check the path") from exc
    except DeltaError as exc:
        raise _delta_error(uri, exc) from exc
    except OSError as exc:
        raise TransientError(f"inventory {uri!r}: cannot read the Delta log: {exc}") from exc
    if len(uris) != len(actions["path"]):
        raise InventoryError(f"Delta table {location}: its log lists {len(actions['path'])} "
                             f"files but {len(uris)} file URIs")
    files = []
    for file_uri, path, size in zip(uris, actions["path"], actions["size_bytes"], strict=True):
        if not file_uri.endswith(path.rsplit("/", 1)[-1]):
            raise InventoryError(f"Delta table {location}: cannot match the data file {path!r} "
                                 "to its URI")
        files.append(ListedFile(uri=_local_or_s3(file_uri, location), size=int(size),
                                version=found.identity))
    return _with_files(found, files)


def _refuse_deletion_vectors(table: Any, location: str) -> None:
    """InventoryError when a current file of `table` has a deletion vector: its rows
    marked deleted are still in its Parquet file."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    refusal = (f"Delta table {location} has deletion vectors (rows deleted without "
               "rewriting their files), which this pipeline cannot apply; purge them "
               "(REORG TABLE ... APPLY (PURGE) in Spark or Databricks) or disable "
               "delta.enableDeletionVectors and rewrite the table")
    try:
        with_vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all().num_rows
    except DeltaError as exc:  # a vector that cannot be read is a vector all the same
        raise InventoryError(f"{refusal} ({_one_line(exc)})") from exc
    if with_vectors:
        raise InventoryError(f"{refusal}: {with_vectors} data file(s) have one")


def _delta_error(uri: str, exc: Exception) -> Exception:
    text = _one_line(exc)
    if any(w in text.lower() for w in ("timed out", "timeout", "connection", "slow down",
                                       "503", "500 internal")):
        return TransientError(f"inventory {uri!r}: cannot read the Delta log: {text}")
    return InventoryError(f"inventory {uri!r}: cannot read the Delta table: {text}")


# Apache Iceberg --------------------------------------------------------------------------


def _iceberg_parts(uri: str) -> tuple[str, str, str]:
    """(SQLAlchemy URL of the catalog, catalog name, table identifier) of an Iceberg URI."""
    catalog, _, identifier = uri.removeprefix(ICEBERG_PREFIX).partition("#")
    parts = urlsplit(catalog)
    query = parse_qs(parts.query)
    name = query.pop("catalog", [DEFAULT_CATALOG])[0]
    if (parts.scheme.split("+")[0] not in ICEBERG_CATALOG_SCHEMES or "://" not in catalog
            or not (parts.netloc or parts.path) or "." not in identifier
            or "" in identifier.split(".")):
        raise InventoryError(
            f"inventory {uri!r}: an Iceberg table URI is iceberg+<SQL catalog URI>#namespace."
            "table, e.g. iceberg+sqlite:///path/to/catalog.db#www.urls (the catalog on "
            "SQLite or PostgreSQL; ?catalog=NAME for a catalog not named default)")
    if parts.scheme == "sqlite":
        if parts.netloc or not parts.path.startswith("/"):
            raise InventoryError(f"inventory {uri!r}: the SQLite catalog's path must be "
                                 "absolute: iceberg+sqlite:///path/to/catalog.db#namespace.table")
        path = "/" + parts.path.lstrip("/")  # SQLAlchemy's own spelling has four slashes
        if not os.path.isfile(path):  # SQLAlchemy would make an empty database there
            raise InventoryError(f"inventory {uri!r}: no Iceberg catalog at {path} (no such "
                                 "file); check the path")
        return f"sqlite:///{path}", name, identifier
    # the database's own options (sslmode=...) kept, ours taken out
    return urlunsplit(parts._replace(query=urlencode(query, doseq=True))), name, identifier


def _iceberg_properties() -> dict[str, str]:
    """pyiceberg's S3 properties from the run's S3 settings (for metadata and manifests
    on S3)."""
    return _s3_options("s3.region", "s3.endpoint", "s3.access-key-id", "s3.secret-access-key",
                       "s3.session-token")


def _resolve_iceberg(uri: str) -> TableVersion:
    catalog_uri, name, identifier = _iceberg_parts(uri)
    try:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
        from pyiceberg.manifest import FileFormat
    except ImportError as exc:
        raise InventoryError(f"inventory {uri!r} is an Iceberg table: {INSTALL_HINT}") from exc
    try:
        catalog = SqlCatalog(name, uri=catalog_uri, **_iceberg_properties())
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise InventoryError(f"inventory {uri!r}: no Iceberg table {identifier} in catalog "
                             f"{name!r} ({_one_line(exc)}); check the identifier and "
                             "?catalog=") from exc
    except OSError as exc:  # the table's metadata file on a store that did not answer
        raise TransientError(f"inventory {uri!r}: cannot read the Iceberg table's metadata: "
                             f"{exc}") from exc
    except Exception as exc:  # SQLAlchemy's and pyiceberg's own: a catalog that is not one
        raise InventoryError(f"inventory {uri!r}: cannot open the Iceberg catalog: "
                             f"{_one_line(exc)}") from exc
    location = table.location()
    snapshot = table.current_snapshot()
    if snapshot is None:
        raise InventoryError(f"Iceberg table {identifier} ({location}) has no snapshot: "
                             "nothing to publish")
    _refuse_renamed_columns(table, identifier)
    # Spark and pyiceberg count them in the summary: refused before any manifest is read
    deletes = int((snapshot.summary.get("total-delete-files") if snapshot.summary else 0) or 0)
    if deletes:
        raise InventoryError(_iceberg_deletes(identifier, f"{deletes} delete file(s)"))
    try:
        tasks = list(table.scan(snapshot_id=snapshot.snapshot_id).plan_files())
    except ValueError as exc:  # pyiceberg refuses equality deletes in its own words
        raise InventoryError(_iceberg_deletes(identifier, _one_line(exc))) from exc
    except OSError as exc:
        raise TransientError(f"inventory {uri!r}: cannot read the Iceberg manifests: "
                             f"{exc}") from exc
    found = TableVersion("iceberg", location, str(table.metadata.table_uuid),
                         snapshot.snapshot_id, [])
    files = []
    for task in tasks:
        if task.delete_files:
            raise InventoryError(_iceberg_deletes(
                identifier, f"{len(task.delete_files)} for {task.file.file_path}"))
        if task.file.file_format != FileFormat.PARQUET:
            raise InventoryError(f"Iceberg table {identifier}: data file {task.file.file_path} "
                                 f"is {task.file.file_format.value}, not Parquet; rewrite the "
                                 "table with write.format.default = parquet")
        files.append(ListedFile(uri=_local_or_s3(task.file.file_path, location),
                                size=int(task.file.file_size_in_bytes),
                                version=found.identity))
    return _with_files(found, files)


def _iceberg_deletes(identifier: str, what: str) -> str:
    return (f"Iceberg table {identifier} has delete files ({what}): rows deleted without "
            "rewriting their data files, which this pipeline cannot apply; compact the table "
            "first (Spark: CALL system.rewrite_data_files(... options => map("
            "'delete-file-threshold', '1')), or write it copy-on-write")


def _refuse_renamed_columns(table: Any, identifier: str) -> None:
    """Data files written before a column was renamed name it as it was: read by name, its
    values would be lost."""
    current = {f.field_id: f.name for f in table.schema().fields}
    for schema in table.metadata.schemas:
        for f in schema.fields:
            if f.field_id in current and current[f.field_id] != f.name:
                raise InventoryError(
                    f"Iceberg table {identifier}: column {current[f.field_id]!r} was renamed "
                    f"from {f.name!r}, and the data files written before name it so; "
                    "rewrite the table's data files (or the table) first")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
