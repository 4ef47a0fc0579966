"""Every key and folder of the output, state and work trees, named once.

Keys are relative to their tree's root and use "/" separators. The stages build their
paths from these names only, so the trees below are the whole list:

    <out>/                                    served
      manifest.json                           LIVE_MANIFEST_KEY: the live generation's manifest
      sitemap_index.xml, sitemap_index-2.xml  root_index_name(n): the root index(es)
      robots-sitemaps.txt                     ROBOTS_KEY: one "Sitemap: <url>" line per root index
      feed.atom                               FEED_KEY: the feed of recent changes
      sitemaps/<section>-<nnnnn>-<digest>.xml.gz   SHARDS_FOLDER: shard files, immutable
      generations/<id>/                       GENERATIONS_FOLDER: each generation's indexes,
                                              manifest.json, rolled-back.json (ROLLED_BACK),
                                              commit.json (COMMIT_RECORD), pinned.json (PIN),
                                              collecting.json (COLLECTING)
      _lease.json                             LEASE_KEY: the lease a running publish holds
      .tmp-*, .sitemaps-write-check-*, _conditional_write_probe-<token>.json
                                              temporaries, probes (never listed)
    <state>/ (default <out>.state/)           private: never serve it; beside --out, not in
                                              it (older versions' <out>/_state/ is still used
                                              while it holds a state: pipeline.state_owner)
      generations/<id>/                       snapshot.parquet, rejects.parquet,
                                              changes.parquet (STATE_FILES), report.html
      runs/<dag id>.<run id>/                 RUNS_FOLDER: the DAG's work prefixes
      refused/<generation id>/rejects.parquet refused_rejects_key(id): the rejects of a run
                                              the reject guard refused (gc removes them)
      owner.json                              STATE_OWNER_KEY: the output this state is for
      input-identity.json                     INPUT_IDENTITY_KEY: the input the live
                                              generation was made from, each section's
                                              with its shards, the inventory's listing
                                              (pipeline.unchanged)
    <work>/                                   a run's intermediate files
      normalized.parquet, duplicates.parquet, rejects.parquet      load
      section-sample.parquet                  a first run's sample of URLs by section (load)
      normalized/bucket=K/*.parquet           a first run's rows, by section (pipeline.diffed)
      normalized/diff_partition=K/*.parquet   the rows cut by diff partition (several)
      diffed/part-NNNNN.parquet, changes/part-NNNNN.parquet         diff (a first run: none)
      diffed/part-NNNNN/bucket=K/*.parquet    a first run's diffed rows in forced partitions
      plan-slices.json, plan-bounds.parquet, planned/part-NNNNN.parquet, shards.json   plan
      plan-input/slice=N/*.parquet            the diffed rows split by slice (many slices)
      live_keys.json                          the live generation's shard keys at begin
      unchanged-sections.json                 the sections load found unchanged
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pipeline.errors import ConfigError

# --- the output ------------------------------------------------------------------------------

#: The live generation's full manifest; replaced by one conditional write per publish.
LIVE_MANIFEST_KEY = "manifest.json"
#: The root index robots.txt names; more than one index: sitemap_index-2.xml, ...
ROOT_INDEX_NAME = "sitemap_index.xml"
#: The regular expression of every root index name (for robots.txt lines this output owns).
ROOT_INDEX_PATTERN = r"sitemap_index(-[0-9]+)?\.xml"
#: The prefix of the root indexes after the first (listed to remove stale ones).
MORE_ROOT_INDEXES_PREFIX = "sitemap_index-"
#: One "Sitemap: <url>" line per root index (and the feed).
ROBOTS_KEY = "robots-sitemaps.txt"
#: The feed of recent changes (written by pipeline.notify), beside the root index.
FEED_KEY = "feed.atom"
#: The folder of the shard files, whose keys carry a digest of their content.
SHARDS_FOLDER = "sitemaps"
#: Each generation's files: below the output its indexes and manifest, below the state
#: its snapshot, rejects, changes and report.
GENERATIONS_FOLDER = "generations"
#: A generation's own manifest (below GENERATIONS_FOLDER/<id>/).
GENERATION_MANIFEST = "manifest.json"
#: Written beside a generation's manifest when a rollback takes it out of service.
ROLLED_BACK = "rolled-back.json"
#: Written beside a generation's manifest after each swap that made it live ({generation,
#: sequence, committed}): repair trusts only committed generations, newest commit first.
COMMIT_RECORD = "commit.json"
#: A rollback's or repair's claim on the generation it is about to make live ({at, by}):
#: gc spares a pinned generation's files (pipeline.gc).
PIN = "pinned.json"
#: gc's mark on a generation whose files it is about to delete: a rollback to it refuses.
COLLECTING = "collecting.json"
#: The lease a running publish holds (pipeline.lease).
LEASE_KEY = "_lease.json"
#: The conditional-write probe's key at the output root, less the token each probe adds
#: before `.json` (racing runs never share one).
PROBE_KEY = "_conditional_write_probe.json"
#: The object written and deleted at the root of `--out` to prove it is writable
#: (a dot name: local listings skip it, and it lives for one request).
WRITE_CHECK_KEY = ".sitemaps-write-check"
#: Prefix of a local write's temporary file (beside its target, so os.replace is atomic).
TEMP_PREFIX = ".tmp-"

# --- the state ---------------------------------------------------------------------------------

#: Added to the output's name for the state when --state is not given: `<out>.state`.
STATE_SUFFIX = ".state"
#: The state's folder below the output when --state was not given, before `<out>.state`
#: (served with the output): still used where it holds a state.
LEGACY_STATE_FOLDER = "_state"
#: The work prefixes of DAG runs, below the state: runs/<dag id>.<run id>/ (named by site
#: and run, so sites may share a work root; pipeline.orchestration.work_folder_name).
RUNS_FOLDER = "runs"
#: A run id (`--run-id`) names one folder below the work root: letters, digits, '_', '-' and
#: '.', not first (so never '.' or '..'), no slash, at most 200 characters.
RUN_ID_PATTERN = r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}"
#: The rejects of runs the reject guard refused, below the state: refused/<id>/ (gc deletes
#: them after its grace period, as it does old work prefixes).
REFUSED_FOLDER = "refused"
#: The output a state belongs to ({out}): written by the first run or gc that uses the state;
#: one with another --out refuses (two outputs sharing a state would delete each other's).
STATE_OWNER_KEY = "owner.json"
#: The identity of the input that made (or last confirmed) a generation: {generation,
#: identity, sections, run_time, inventory}, written by every publish; a run of the same
#: input skips the work, and one of the same inventory listing reads no row to know it.
INPUT_IDENTITY_KEY = "input-identity.json"
#: A generation's private files (below GENERATIONS_FOLDER/<id>/ of the state), by name.
STATE_FILES = ("snapshot", "rejects", "changes")
SNAPSHOT_KEY = "snapshot.parquet"
#: The run report of a generation.
REPORT_KEY = "report.html"

# --- the work prefix ---------------------------------------------------------------------------

#: load: every row, normalised; the row ids of duplicates; the rejected rows.
NORMALIZED_KEY = "normalized.parquet"
DUPLICATES_KEY = "duplicates.parquet"
REJECTS_KEY = "rejects.parquet"
#: load's parts of them: each dedupe part's duplicates, each group's rejects (as rejected
#: rows, `dNNNNN.parquet`, `gNNNNN.parquet`), which the load task puts together.
DUPLICATE_PARTS_FOLDER = "duplicate-parts"
REJECT_PARTS_FOLDER = "reject-parts"
#: A first run's sample of the valid URLs (section, url: one in `sample_every` by a hash of
#: the URL), from which plan cuts its large sections; each group's under SAMPLE_PARTS_FOLDER
#: (`gNNNNN.parquet`), which the load task puts together.
SECTION_SAMPLE_KEY = "section-sample.parquet"
SAMPLE_PARTS_FOLDER = "sample-parts"
#: The Hive column of rows cut by diff partition (`<folder>/diff_partition=K/*.parquet`):
#: the normalised rows (NORMALIZED_KEY less .parquet) and the live snapshot's (PREVIOUS_FOLDER).
DIFF_PARTITION_COLUMN = "diff_partition"
PREVIOUS_FOLDER = "previous"
#: diff: the rows to publish and the changes, one Parquet per partition.
DIFFED_FOLDER = "diffed"
CHANGES_FOLDER = "changes"
#: The changes of a generation as one file (below the state's generation folder).
CHANGES_KEY = "changes.parquet"
#: plan: the planned rows, one Parquet per slice; the shards; the slices; the boundaries.
PLANNED_FOLDER = "planned"
#: The diffed rows split by plan slice, when there are many slices: `slice=N/*.parquet`.
SLICE_INPUT_FOLDER = "plan-input"
SHARDS_KEY = "shards.json"
SLICES_KEY = "plan-slices.json"
BOUNDS_KEY = "plan-bounds.parquet"
#: The shard keys of the generation live when the run began.
LIVE_KEYS = "live_keys.json"
#: The inventory's listing begin found (pipeline.unchanged.listing) and the rows' sums
#: where begin read them: publish records them with the identity.
INVENTORY_LISTING = "inventory_listing.json"
#: The sections load found unchanged (pipeline.unchanged): each one's rows and live shards.
UNCHANGED_SECTIONS_KEY = "unchanged-sections.json"


def root_index_name(n: int) -> str:
    """sitemap_index.xml, sitemap_index-2.xml, ..."""
    return ROOT_INDEX_NAME if n == 1 else f"{MORE_ROOT_INDEXES_PREFIX}{n}.xml"


#: A generation id begins with the UTC time of its run in this format, so ids sort by time
#: (publish.new_generation_id adds a random suffix; gc keeps the ids after a time).
GENERATION_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def generation_time(when: datetime) -> str:
    """The time that begins the id of a generation made at `when`: an id made at or after
    `when` compares greater than or equal to it, one made before compares less."""
    return when.astimezone(UTC).strftime(GENERATION_TIME_FORMAT)


def generation_key(generation: str, name: str = "") -> str:
    """A key below a generation's folder (the folder itself, with a trailing "/", without
    `name`): `generations/<id>/<name>`."""
    return f"{GENERATIONS_FOLDER}/{generation}/{name}"


def state_file_key(generation: str, name: str) -> str:
    """The key of one of a generation's private files (a name of STATE_FILES)."""
    return generation_key(generation, f"{name}.parquet")


def refused_rejects_key(generation: str) -> str:
    """Where a run the reject guard refused keeps its rejects: `refused/<id>/rejects.parquet`."""
    return f"{REFUSED_FOLDER}/{generation}/{REJECTS_KEY}"


def part_key(folder: str, n: int) -> str:
    """The key of part `n` of a fanned-out Parquet: `<folder>/part-NNNNN.parquet`."""
    return f"{folder}/part-{n:05d}.parquet"


def default_state(out_uri: str) -> str:
    """The state URI when none is given: the sibling `<out>.state` of the output, outside
    what is served (`/srv/out` -> `/srv/out.state`, `s3://b/site/` -> `s3://b/site.state`;
    a relative local path is made absolute first, so `.` has a name too).

    ConfigError when --out has no parent to put it in: the root of a bucket or of the
    filesystem.
    """
    scheme, sep, rest = out_uri.partition("://")
    if sep and scheme != "file":
        bucket, _, key = rest.strip("/").partition("/")
        if not key:
            raise ConfigError(f"--out is the root of bucket {bucket}: give --state, a private "
                              "prefix or bucket")
        return f"{scheme}://{bucket}/{key.rstrip('/')}{STATE_SUFFIX}"
    path = os.path.abspath(os.path.expanduser(rest if sep else out_uri))
    if path == os.path.dirname(path):
        raise ConfigError(f"--out is the filesystem root {path}: give --state, a private folder")
    return path + STATE_SUFFIX


def legacy_state(out_uri: str) -> str:
    """Where older versions put the state when none was given: `<out>/_state`, below
    the output (pipeline.state_owner.resolve_state still uses one that holds a state)."""
    return out_uri.rstrip("/") + "/" + LEGACY_STATE_FOLDER
