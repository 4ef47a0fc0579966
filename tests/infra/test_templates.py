"""The deployment templates: linted by the real tools, and checked for what the pipeline needs.

- `infra/aws/sitemaps.yaml` passes cfn-lint and checkov (exit 0); every checkov suppression has a
  written reason and is still needed; and the template keeps its promises: nothing public,
  TLS only, incomplete multipart uploads aborted, the pipeline's policy limited to its prefixes
  with no wildcard action, the sitemaps served by CloudFront as stored (Compress false: no
  Content-Encoding added) and the private state (`<prefix>.state/`, an older `_state/`) and
  `_lease.json` never served.
- `infra/airflow`: yamllint passes, checkov passes on the Dockerfile, and `values.yaml`, the
  Dockerfile and the example site configuration agree with each other and with the pipeline.

The tools run as subprocesses, all three started at once: cfn-lint and yamllint next to the
interpreter (the dev extra); checkov from its own virtualenv, since it pins boto3 and packaging
to versions this project cannot install beside it: `$SITEMAPS_CHECKOV`, else
`.venv/checkov/bin/checkov`, else next to the interpreter, else on PATH. A missing tool skips
its test, except under CI (`CI` set), where it fails.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "aws" / "sitemaps.yaml"
VALUES = ROOT / "infra" / "airflow" / "values.yaml"
DOCKERFILE = ROOT / "infra" / "airflow" / "Dockerfile"
DOCKERIGNORE = ROOT / "infra" / "airflow" / "Dockerfile.dockerignore"
SITES_EXAMPLE = ROOT / "infra" / "airflow" / "sites.example.toml"
YAML_FILES = sorted((ROOT / "infra" / "aws").glob("*.yaml")) + sorted(
    (ROOT / "infra" / "airflow").glob("*.yaml"))
BIN = Path(sys.executable).parent
TIMEOUT = 600
YAMLLINT_CONFIG = "{extends: default, rules: {line-length: {max: 120}, document-start: disable}}"
SITES_FILE = "/opt/airflow/dags/sites.toml"

pytestmark = pytest.mark.infra


# ---------------------------------------------------------------- tools

def find_tool(name: str, *preferred: Path) -> str | None:
    override = os.environ.get("SITEMAPS_" + name.upper().replace("-", "_"))
    for candidate in ((Path(override),) if override else (*preferred, BIN / name)):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None if override else shutil.which(name)


@dataclass
class Run:
    """One tool run, started in the background; `result()` waits for it."""

    name: str
    missing: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    out: Path | None = None
    err: Path | None = None

    def result(self) -> tuple[int, str, str]:
        if self.proc is None:
            if os.environ.get("CI"):
                pytest.fail(self.missing or self.name)
            pytest.skip(self.missing or self.name)
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"{self.name} took more than {TIMEOUT} s")
        assert self.out is not None and self.err is not None
        return self.proc.returncode, self.out.read_text(), self.err.read_text()


def _start(name: str, tool: str | None, missing: str, args: list[str], tmp: Path,
           env: dict[str, str] | None = None) -> Run:
    if tool is None:
        return Run(name, missing=missing)
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([tool, *args], stdout=o, stderr=e, cwd=ROOT,
                                env={**os.environ, **(env or {})})
    return Run(name, proc=proc, out=out, err=err)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    tmp = tmp_path_factory.mktemp("infra-lint")
    started = {
        "cfn-lint": _start(
            "cfn-lint", find_tool("cfn-lint"),
            "cfn-lint is not installed (the dev extra has it: pip install -e '.[dev]')",
            [str(TEMPLATE.relative_to(ROOT))], tmp),
        "checkov": _start(
            "checkov", find_tool("checkov", ROOT / ".venv" / "checkov" / "bin" / "checkov"),
            "checkov is not installed: it needs its own virtualenv (it pins boto3==1.35.49): "
            "python -m venv .venv/checkov && .venv/checkov/bin/pip install 'checkov>=3.2,<4'",
            ["-f", str(TEMPLATE.relative_to(ROOT)), "-f", str(DOCKERFILE.relative_to(ROOT)),
             "--framework", "cloudformation", "dockerfile", "--compact", "--skip-download",
             "-o", "json"],
            tmp, env={"BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "WARNING"}),
        "yamllint": _start(
            "yamllint", find_tool("yamllint"),
            "yamllint is not installed (the dev extra has it: pip install -e '.[dev]')",
            ["--strict", "-d", YAMLLINT_CONFIG, *(str(p.relative_to(ROOT)) for p in YAML_FILES)],
            tmp),
    }
    yield started
    for run in started.values():
        if run.proc is not None and run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()


# ---------------------------------------------------------------- reading CloudFormation

class CfnLoader(yaml.SafeLoader):
    """A YAML loader that reads CloudFormation's short tags as their long forms."""


def _cfn_tag(loader: CfnLoader, suffix: str, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _cfn_tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=CfnLoader)  # noqa: S506 - a SafeLoader


def alternatives(value: Any) -> list[Any]:
    """The concrete values `value` can take: both branches of each Fn::If, no AWS::NoValue."""
    if isinstance(value, dict) and list(value) == ["Fn::If"]:
        _, yes, no = value["Fn::If"]
        return alternatives(yes) + alternatives(no)
    if value == {"Ref": "AWS::NoValue"}:
        return []
    return [value]


def items(value: Any) -> list[Any]:
    """A list property's items (a single value counts as a list of one), Fn::If expanded."""
    out: list[Any] = []
    for alt in alternatives(value):
        for item in alt if isinstance(alt, list) else [alt]:
            out.extend(alternatives(item))
    return out


def text(value: Any) -> str:
    """A string-valued expression in Fn::Sub notation: `${SitemapBucket.Arn}/${SitemapsPrefix}/*`."""
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        sub = value["Fn::Sub"]
        return sub if isinstance(sub, str) else sub[0]
    if "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    raise AssertionError(f"not a string expression: {value!r}")


def resource(template: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    res = template["Resources"][name]
    assert res["Type"] == kind
    return res["Properties"]


def statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return items(policy["PolicyDocument"]["Statement"])


def actions(stmt: dict[str, Any]) -> list[str]:
    return items(stmt["Action"])


def max_age(cache_control: str) -> int:
    match = re.search(r"max-age=(\d+)", cache_control)
    assert match, cache_control
    return int(match.group(1))


# ---------------------------------------------------------------- the tools pass

def test_cfn_lint_passes(runs: dict[str, Run]) -> None:
    code, out, err = runs["cfn-lint"].result()
    assert code == 0, f"cfn-lint exit {code}:\n{out}\n{err}"


def test_checkov_passes_and_every_suppression_is_used(runs: dict[str, Run],
                                                      template: dict[str, Any]) -> None:
    code, out, err = runs["checkov"].result()
    try:
        reports = json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"checkov exit {code}, no JSON report:\n{out[-3000:]}\n{err[-3000:]}")
    reports = {r["check_type"]: r for r in (reports if isinstance(reports, list) else [reports])}
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}"
              for r in reports.values() for c in r["results"]["failed_checks"]]
    assert code == 0 and not failed, f"checkov exit {code}:\n" + "\n".join(failed)
    assert set(reports) == {"cloudformation", "dockerfile"}, set(reports)
    for report in reports.values():
        assert report["summary"]["parsing_errors"] == 0, report["summary"]
        assert report["summary"]["passed"] > 0, report["summary"]

    # A suppression that no check needs any more is a stale exception: remove it.
    declared = {(name, skip["id"]) for name, res in template["Resources"].items()
                for skip in res.get("Metadata", {}).get("checkov", {}).get("skip", [])}
    used = {(c["resource"].split(".", 1)[1], c["check_id"])
            for c in reports["cloudformation"]["results"]["skipped_checks"]}
    assert used == declared
    inline = set(re.findall(r"checkov:skip=(CKV\w+)", DOCKERFILE.read_text()))
    assert {c["check_id"] for c in reports["dockerfile"]["results"]["skipped_checks"]} == inline


def test_yamllint_passes(runs: dict[str, Run]) -> None:
    assert TEMPLATE in YAML_FILES and VALUES in YAML_FILES
    code, out, err = runs["yamllint"].result()
    assert code == 0, f"yamllint exit {code}:\n{out}\n{err}"


def test_every_checkov_suppression_has_a_written_reason(template: dict[str, Any]) -> None:
    skips = 0
    for name, res in template["Resources"].items():
        for skip in res.get("Metadata", {}).get("checkov", {}).get("skip", []):
            skips += 1
            assert re.fullmatch(r"CKV2?_AWS_\d+", skip.get("id", "")), (name, skip)
            comment = skip.get("comment")
            assert isinstance(comment, str) and len(comment.split()) >= 8, \
                f"{name}: checkov skip {skip.get('id')} needs a comment saying why"
    assert skips, "no suppression at all: drop this test's expectation"
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if "checkov:skip" in ln]
    for line in lines:
        match = re.search(r"checkov:skip=(CKV\w+):(.*)$", line)
        assert match and len(match.group(2).split()) >= 8, f"Dockerfile: no reason in {line!r}"


# ---------------------------------------------------------------- the bucket

@pytest.mark.parametrize("name", ["SitemapBucket", "LogBucket"])
def test_buckets_are_private_versioned_encrypted_and_kept(template: dict[str, Any],
                                                          name: str) -> None:
    props = resource(template, name, "AWS::S3::Bucket")
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True,
        "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    algorithms = {alt["SSEAlgorithm"] for alt in alternatives(rule["ServerSideEncryptionByDefault"])}
    assert algorithms <= {"AES256", "aws:kms"} and algorithms
    assert template["Resources"][name]["DeletionPolicy"] == "Retain"
    assert template["Resources"][name]["UpdateReplacePolicy"] == "Retain"


def test_sitemap_bucket_has_no_acls_and_logs_its_access(template: dict[str, Any]) -> None:
    props = resource(template, "SitemapBucket", "AWS::S3::Bucket")
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": "LogBucket"}


def test_lifecycle_aborts_uploads_and_expires_old_versions(template: dict[str, Any]) -> None:
    rules = resource(template, "SitemapBucket", "AWS::S3::Bucket")["LifecycleConfiguration"]["Rules"]
    assert all(r["Status"] == "Enabled" for r in rules)
    # Whole-bucket rules: no Prefix or filter that would leave some keys out.
    assert all(not {"Prefix", "TagFilters", "ObjectSizeGreaterThan"} & set(r) for r in rules)
    aborts = [r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
              for r in rules if "AbortIncompleteMultipartUpload" in r]
    assert aborts == [1]
    noncurrent = [r["NoncurrentVersionExpiration"]["NoncurrentDays"]
                  for r in rules if "NoncurrentVersionExpiration" in r]
    assert noncurrent == [{"Ref": "NoncurrentVersionDays"}]
    assert template["Parameters"]["NoncurrentVersionDays"]["Default"] >= 1


@pytest.mark.parametrize("policy", ["SitemapBucketPolicy", "LogBucketPolicy"])
def test_bucket_policies_refuse_plain_http(template: dict[str, Any], policy: str) -> None:
    props = resource(template, policy, "AWS::S3::BucketPolicy")
    bucket = props["Bucket"]["Ref"]
    deny = [s for s in statements(props) if s["Effect"] == "Deny"
            and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
    assert len(deny) == 1
    assert deny[0]["Principal"] == "*" and deny[0]["Action"] == "s3:*"
    arn = "${" + bucket + ".Arn}"
    assert {text(r) for r in items(deny[0]["Resource"])} == {arn, arn + "/*"}


def test_cloudfront_reads_only_the_served_prefix_of_its_distribution(
        template: dict[str, Any]) -> None:
    props = resource(template, "SitemapBucketPolicy", "AWS::S3::BucketPolicy")
    allows = [s for s in statements(props) if s["Effect"] == "Allow"]
    assert len(allows) == 1, "CloudFront is the only principal the bucket policy lets in"
    (allow,) = allows
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert actions(allow) == ["s3:GetObject"]
    assert [text(r) for r in items(allow["Resource"])] == ["${SitemapBucket.Arn}/${SitemapsPrefix}/*"]
    source = allow["Condition"]["StringEquals"]["AWS:SourceArn"]
    assert text(source).endswith(":distribution/${Distribution}")


def test_private_state_and_lease_are_never_served(template: dict[str, Any],
                                                  tmp_path: Path) -> None:
    from pipeline.layout import LEGACY_STATE_FOLDER, default_state
    from pipeline.lease import LEASE_KEY

    # The default state is beside the prefix CloudFront reads (`${SitemapsPrefix}/*`, the
    # test above), not below it; the pipeline's policy grants it (OWN_OBJECTS).
    assert default_state("s3://bucket/sitemaps") == "s3://bucket/sitemaps.state"
    props = resource(template, "SitemapBucketPolicy", "AWS::S3::BucketPolicy")
    denied = {text(r) for s in statements(props) if s["Effect"] == "Deny"
              and s["Principal"] == {"Service": "cloudfront.amazonaws.com"}
              and actions(s) == ["s3:GetObject"] for r in items(s["Resource"])}
    prefix = "${SitemapBucket.Arn}/${SitemapsPrefix}/"
    assert prefix + LEGACY_STATE_FOLDER + "/*" in denied  # an older version's state
    assert prefix + LEASE_KEY in denied
    # The catch-all for private top-level names, and no public name it would hide: the
    # names a real run (with its feed and report, which goes under the state) writes at the top.
    assert prefix + "_*" in denied
    served = _top_level_names_of_a_run(tmp_path)
    assert {"sitemap_index.xml", "robots-sitemaps.txt", "manifest.json", "sitemaps",
            "generations", "feed.atom"} <= served, served
    assert "report.html" not in served  # internal: under the state prefix
    assert {n for n in served if n.startswith(("_", "."))} == {LEASE_KEY}, served


def _top_level_names_of_a_run(tmp: Path) -> set[str]:
    from pipeline.run import RunOptions, run
    from tests.output_check import write_inventory

    inv = write_inventory(tmp / "inv.parquet", {"url": ["https://www.example.com/a"]})
    run(RunOptions(inventory=str(inv), site_url="https://www.example.com/", out=str(tmp / "out"),
                   feed_days=7, report=True, lease_seconds=60))
    return {p.name for p in (tmp / "out").iterdir()}


def test_live_manifest_is_only_written_conditionally(template: dict[str, Any]) -> None:
    from pipeline.publish import LIVE_MANIFEST_KEY

    props = resource(template, "SitemapBucketPolicy", "AWS::S3::BucketPolicy")
    (deny,) = [s for s in statements(props) if s.get("Sid") == "LiveManifestOnlyByConditionalWrite"]
    assert deny["Effect"] == "Deny" and actions(deny) == ["s3:PutObject"]
    assert text(deny["Resource"]) == "${SitemapBucket.Arn}/${SitemapsPrefix}/" + LIVE_MANIFEST_KEY
    assert deny["Condition"] == {"Null": {"s3:if-match": "true", "s3:if-none-match": "true"}}


# ---------------------------------------------------------------- the pipeline's policy

PIPELINE_ACTIONS = {
    "s3:ListBucket", "s3:ListBucketMultipartUploads", "s3:GetObject", "s3:PutObject",
    "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts",
    "kms:Decrypt", "kms:GenerateDataKey",
}
WRITE_ACTIONS = {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}
#: The output's prefix and the state's: StatePrefix, else the default beside the output.
OWN_OBJECTS = {"${SitemapBucket.Arn}/${SitemapsPrefix}/*", "${SitemapBucket.Arn}/${StatePrefix}/*",
               "${SitemapBucket.Arn}/${SitemapsPrefix}.state/*"}
OWN_PREFIXES = {"${SitemapsPrefix}", "${SitemapsPrefix}/", "${SitemapsPrefix}/*",
                "${StatePrefix}", "${StatePrefix}/", "${StatePrefix}/*",
                "${SitemapsPrefix}.state", "${SitemapsPrefix}.state/", "${SitemapsPrefix}.state/*"}


def test_pipeline_policy_is_limited_to_its_prefixes(template: dict[str, Any]) -> None:
    props = resource(template, "PipelinePolicy", "AWS::IAM::ManagedPolicy")
    stmts = statements(props)
    assert all(s["Effect"] == "Allow" for s in stmts)
    assert all(not {"NotAction", "NotResource", "NotPrincipal"} & set(s) for s in stmts)
    granted = {a for s in stmts for a in actions(s)}
    assert not any("*" in a for a in granted), "no wildcard action (s3:*, s3:Get*, ...)"
    assert granted == PIPELINE_ACTIONS
    assert "s3:DeleteObjectVersion" not in granted   # history is the lifecycle's business

    for stmt in stmts:
        acts = set(actions(stmt))
        resources = items(stmt["Resource"])
        assert resources and all(r != "*" for r in resources), stmt
        if acts & WRITE_ACTIONS:
            # Writes: only the output prefix and the state prefix of the sitemap bucket.
            assert {text(r) for r in resources} <= OWN_OBJECTS, stmt
        elif acts == {"s3:GetObject"}:
            # The inventory, read-only: a prefix of its bucket (or all of a separate bucket).
            (res,) = resources
            sub, variables = res["Fn::Sub"]
            assert sub == "arn:${AWS::Partition}:s3:::${Bucket}/${Keys}"
            assert {text(k) for k in alternatives(variables["Keys"])} == {"${InventoryPrefix}/*", "*"}
        elif acts == {"s3:ListBucket"}:
            buckets = {text(r) for r in resources}
            conditions = alternatives(stmt.get("Condition", {"Ref": "AWS::NoValue"}))
            if stmt["Sid"] == "ListInventory":
                # The inventory's prefix (all of it only when the parameter says so).
                assert buckets == {"arn:${AWS::Partition}:s3:::${InventoryBucket}",
                                   "${SitemapBucket.Arn}"}
                for cond in conditions:
                    assert {text(p) for p in items(cond["StringLike"]["s3:prefix"])} == {
                        "${InventoryPrefix}", "${InventoryPrefix}/", "${InventoryPrefix}/*"}
                continue
            assert buckets == {"${SitemapBucket.Arn}"}
            if stmt["Sid"] == "NotFoundIsNotFound":
                assert conditions == [{"Null": {"s3:prefix": "true"}}]
            else:
                (cond,) = conditions
                assert {text(p) for p in items(cond["StringLike"]["s3:prefix"])} == OWN_PREFIXES
        elif acts == {"s3:ListBucketMultipartUploads"}:
            assert [text(r) for r in resources] == ["${SitemapBucket.Arn}"]
        else:
            assert acts == {"kms:Decrypt", "kms:GenerateDataKey"}, stmt
            assert resources == [{"Ref": "KmsKeyArn"}]


# ---------------------------------------------------------------- serving

def _sitemaps_behaviour(template: dict[str, Any]) -> dict[str, Any]:
    config = resource(template, "Distribution", "AWS::CloudFront::Distribution")["DistributionConfig"]
    (behaviour,) = [b for b in config["CacheBehaviors"]
                    if text(b["PathPattern"]) == "/${SitemapsPrefix}/*"]
    return behaviour


def test_sitemaps_are_served_as_stored_over_https(template: dict[str, Any]) -> None:
    from pipeline.storage import content_type_for

    # The objects carry their own gzip: application/gzip and no Content-Encoding ...
    assert content_type_for("sitemaps/www-00001-abc.xml.gz") == "application/gzip"
    behaviour = _sitemaps_behaviour(template)
    # ... so CloudFront must not add one.
    assert behaviour["Compress"] is False
    assert behaviour["ViewerProtocolPolicy"] in ("https-only", "redirect-to-https")
    assert set(behaviour["AllowedMethods"]) == {"GET", "HEAD"}
    config = resource(template, "Distribution", "AWS::CloudFront::Distribution")["DistributionConfig"]
    assert config["DefaultCacheBehavior"]["ViewerProtocolPolicy"] in ("https-only", "redirect-to-https")
    (origin,) = [o for o in config["Origins"] if o["Id"] == behaviour["TargetOriginId"]]
    # Through the origin access control, the URL path being the key (no OriginPath).
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": ["OriginAccessControl", "Id"]}
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    assert text(origin["DomainName"]) == "${SitemapBucket.RegionalDomainName}"
    assert "OriginPath" not in origin
    oac = resource(template, "OriginAccessControl", "AWS::CloudFront::OriginAccessControl")
    assert oac["OriginAccessControlConfig"]["SigningBehavior"] == "always"
    # The site's own origin answers everything else, over HTTPS.
    (site,) = [o for o in config["Origins"] if o["Id"] == config["DefaultCacheBehavior"]["TargetOriginId"]]
    assert site["DomainName"] == {"Ref": "SiteOriginDomain"}
    assert site["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"


def test_cache_policy_honours_the_pipelines_cache_control(template: dict[str, Any]) -> None:
    from pipeline.storage import CACHE_IMMUTABLE, CACHE_SHORT

    behaviour = _sitemaps_behaviour(template)
    assert behaviour["CachePolicyId"] == {"Ref": "SitemapsCachePolicy"}
    policy = resource(template, "SitemapsCachePolicy", "AWS::CloudFront::CachePolicy")
    config = policy["CachePolicyConfig"]
    assert config["MinTTL"] == 0
    assert config["MinTTL"] <= max_age(CACHE_SHORT) <= config["MaxTTL"]
    assert max_age(CACHE_IMMUTABLE) <= config["MaxTTL"]
    key = config["ParametersInCacheKeyAndForwardedToOrigin"]
    assert key["EnableAcceptEncodingGzip"] is False and key["EnableAcceptEncodingBrotli"] is False
    assert key["QueryStringsConfig"] == {"QueryStringBehavior": "none"}
    assert key["CookiesConfig"] == {"CookieBehavior": "none"}


def test_outputs(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    assert outputs["BucketName"]["Value"] == {"Ref": "SitemapBucket"}
    assert outputs["PipelinePolicyArn"]["Value"] == {"Ref": "PipelinePolicy"}
    assert outputs["DistributionDomainName"]["Value"] == {"Fn::GetAtt": ["Distribution", "DomainName"]}
    assert text(outputs["PipelineOut"]["Value"]) == "s3://${SitemapBucket}/${SitemapsPrefix}/"


# ---------------------------------------------------------------- Airflow

@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def _dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, f"no default for ARG {name} in the Dockerfile"
    return match.group(1)


def test_airflow_values(values: dict[str, Any]) -> None:
    assert values["executor"] == "CeleryExecutor"
    assert values["workers"]["replicas"] >= 2
    assert values["airflowVersion"].startswith("3.")
    assert values["dagProcessor"]["enabled"] is True
    env = {e["name"]: e["value"] for e in values["env"]}
    assert env["SITEMAPS_SITES_FILE"] == SITES_FILE
    assert "SITEMAPS_DUCKDB_MEMORY" in env
    (mount,) = [m for m in values["volumeMounts"] if m["mountPath"] == SITES_FILE]
    assert mount["subPath"] == "sites.toml" and mount["readOnly"] is True
    (volume,) = [v for v in values["volumes"] if v["name"] == mount["name"]]
    assert {i["key"]: i["path"] for i in volume["configMap"]["items"]} == {"sites.toml": "sites.toml"}
    secrets = {s["envName"]: s for s in values["secret"]}
    assert secrets["AIRFLOW_CONN_SITEMAPS_S3"]["secretName"]


def test_image_versions_agree(values: dict[str, Any]) -> None:
    version = _dockerfile_arg("AIRFLOW_VERSION")
    assert values["airflowVersion"] == version == values["defaultAirflowTag"]
    assert values["images"]["airflow"]["tag"].startswith(version + "-")
    dockerfile = DOCKERFILE.read_text()
    assert "FROM apache/airflow:${AIRFLOW_VERSION}-python3.11" in dockerfile
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in dockerfile
    assert "[airflow]" in dockerfile
    assert f"ENV SITEMAPS_SITES_FILE={SITES_FILE}" in dockerfile


def test_dockerignore_keeps_everything_the_dockerfile_copies() -> None:
    sources = [src for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY ")
               for src in line.split()[1:-1] if not src.startswith("--")]
    assert {"pipeline/", "sql/", "dags/", "pyproject.toml"} <= set(sources)
    rules = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert rules[0] == "*", "ignore everything, then list what the image needs"
    kept = {ln[1:] for ln in rules if ln.startswith("!")}
    assert set(sources) <= kept
    # Every path the Dockerfile copies exists in the repository.
    assert all((ROOT / src).exists() for src in sources)


def _in_build_context(rel: str) -> bool:
    """Whether the Dockerfile's .dockerignore keeps the repository file `rel` (its rules, in
    order, the last that matches winning; `**/` matches at any depth)."""
    kept = True
    for rule in (ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()):
        if not rule or rule.startswith("#"):
            continue
        keep, pattern = rule.startswith("!"), rule.lstrip("!").rstrip("/")
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatchcase(p, pattern[3:]) for p in parts)
        else:
            hit = any(fnmatch.fnmatchcase(p, pattern) for p in prefixes)
        if hit:
            kept = keep
    return kept


def image_files(root: Path) -> None:
    """Lay out under `root` the files the Dockerfile's COPY lines put in the image, from the
    repository's tracked files that the build context keeps."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    context = [f for f in tracked if _in_build_context(f) and (ROOT / f).is_file()]
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        *sources, dest = [w for w in line.split()[1:] if not w.startswith("--")]
        for src in sources:
            for f in context:
                if f == src:
                    target = root / dest.lstrip("/") / Path(f).name
                elif src.endswith("/") and f.startswith(src):
                    target = root / dest.lstrip("/") / f.removeprefix(src)
                else:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / f, target)


def test_the_image_has_the_report_plugin(tmp_path: Path, values: dict[str, Any]) -> None:
    """Airflow's plugin manager, pointed where the image points it, finds the report tab
    among the files the Dockerfile copies (the build context filtered by .dockerignore)."""
    match = re.search(r"^ENV AIRFLOW__CORE__PLUGINS_FOLDER=(\S+)$", DOCKERFILE.read_text(),
                      re.MULTILINE)
    assert match, "the Dockerfile names no plugins folder"
    assert "plugins_folder" not in values["config"].get("core", {})
    assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in {e["name"] for e in values["env"]}
    image = tmp_path / "image"
    image_files(image)
    folder = image / match[1].lstrip("/")
    assert (folder / "sitemaps_report.py").is_file(), sorted(image.rglob("*"))
    probe = ("import json; from airflow import plugins_manager as pm; "
             "print(json.dumps({'plugins': pm.get_plugin_info(), "
             "'errors': pm.get_import_errors()}, default=str))")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(folder), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not found["errors"], found["errors"]
    (plugin,) = [p for p in found["plugins"] if p["name"] == "sitemaps_report"]
    assert [v["destination"] for v in plugin["external_views"]] == ["dag_run"], plugin


def test_example_sites_match_the_connection_and_the_template(values: dict[str, Any],
                                                            template: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT / "dags"))
    try:
        from sitemaps_sites import parse_sites
    finally:
        sys.path.remove(str(ROOT / "dags"))
    sites = parse_sites(tomllib.loads(SITES_EXAMPLE.read_text()), str(SITES_EXAMPLE))
    assert sites
    secret_envs = {s["envName"] for s in values["secret"]}
    prefix = template["Parameters"]["SitemapsPrefix"]["Default"]
    for site in sites:
        assert site.aws_conn_id and f"AIRFLOW_CONN_{site.aws_conn_id.upper()}" in secret_envs
        # --out is s3://<bucket>/<SitemapsPrefix>/ and is served at /<SitemapsPrefix>/.
        assert site.out.rstrip("/").split("/", 3)[3] == prefix
        assert site.public_url is not None and site.public_url.endswith(f"/{prefix}/")
