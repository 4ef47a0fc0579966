"""pipeline core never imports Airflow or its Airflow adapter (pipeline.orchestration); no
module outside pipeline/storage/ asks which storage backend it has; plan reads what the
stages before it wrote, through shared modules, not through their stage modules."""

from __future__ import annotations

import ast
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
#: The one module of the package that is about Airflow (imported only by the DAG files).
ADAPTER = "orchestration.py"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_core_never_imports_airflow_or_the_adapter() -> None:
    for path in sorted(PIPELINE.rglob("*.py")):
        if path.name == ADAPTER:
            continue
        bad = {n for n in _imports(path)
               if n.split(".")[0] == "airflow" or n.startswith("pipeline.orchestration")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_adapter_imports_airflow_only_inside_functions() -> None:
    """Importing it (the DAG file does, at parse time) costs no Airflow import of its own."""
    tree = ast.parse((PIPELINE / ADAPTER).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not [n for n in top if "airflow" in ast.dump(n)]


#: Names that say which storage backend a URI or a store is: only pipeline/storage/ uses them.
BACKEND_NAMES = ("LocalStorage", "S3Storage", "s3_filesystem", "is_s3")


def test_only_storage_knows_its_backends() -> None:
    for path in sorted(PIPELINE.rglob("*.py")):
        if path.parent.name == "storage":
            continue
        tree = ast.parse(path.read_text())
        used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.split(".")[-1] for n in _imports(path)}
        bad = sorted(used & set(BACKEND_NAMES))
        assert not bad, f"{path.relative_to(PIPELINE)} uses {bad}"


def test_plan_imports_no_other_stage() -> None:
    for path in sorted((PIPELINE / "plan").glob("*.py")):
        bad = {n for n in _imports(path)
               if n.split(".")[:2] in (["pipeline", "load"], ["pipeline", "diff"])}
        assert not bad, f"plan/{path.name} imports {sorted(bad)}"
