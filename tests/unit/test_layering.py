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


#: The layers of pipeline/, lowest first (the design's "A layout to aim for"): a
#: module imports only modules of its own layer or of a layer below, at the top level or
#: inside a function alike. A new module must be placed here.
LAYERS: dict[str, tuple[str, ...]] = {
    "shared": (
        "pipeline", "pipeline.errors", "pipeline.limits", "pipeline.layout", "pipeline.settings",
        "pipeline.config", "pipeline.context", "pipeline.sql", "pipeline.parquet",
        "pipeline.parts", "pipeline.storage", "pipeline.urls", "pipeline.extensions",
        "pipeline.sitemap_xml", "pipeline.w3c", "pipeline.hugepages", "pipeline.progress",
        "pipeline.taskio",
        "pipeline.manifest", "pipeline.integrity", "pipeline.lease", "pipeline.shards",
        "pipeline.diffed", "pipeline.snapshot", "pipeline.unchanged", "pipeline.state_owner",
        "pipeline.tables",
    ),
    "load": ("pipeline.load",),
    "diff": ("pipeline.diff",),
    "plan": ("pipeline.plan",),
    "render": ("pipeline.render",),
    "publish": ("pipeline.publish", "pipeline.gc"),
    "notify": ("pipeline.notify",),
    "steps/run/cli": (
        "pipeline.preflight", "pipeline.steps", "pipeline.run", "pipeline.status",
        "pipeline.orchestration", "pipeline.alerts", "pipeline.sites", "pipeline.validate", "pipeline.verify",
        "pipeline.explain",
        "pipeline.demo",
        "pipeline.cli_notify", "pipeline.cli",
    ),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PIPELINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _pipeline_imports(path: Path) -> set[str]:
    """The pipeline modules `path` imports anywhere in it: `from pipeline.x import y` is
    pipeline.x.y when y is a module, else pipeline.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if _is_module(s)] or [node.module]
        found.update(n for n in names if n.split(".")[0] == "pipeline")
    return found


def _is_module(name: str) -> bool:
    path = PIPELINE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def import_graph() -> dict[str, set[str]]:
    return {_module_name(p): _pipeline_imports(p) for p in sorted(PIPELINE.rglob("*.py"))}


def layer_of(module: str) -> int:
    """The index of the layer of `module` (a package's modules are in the package's)."""
    for index, members in enumerate(LAYERS.values()):
        if any(module == m or (m != "pipeline" and module.startswith(m + ".")) for m in members):
            return index
    raise AssertionError(f"{module} is in no layer of LAYERS: place it there")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({list(LAYERS)[layer_of(m)]}) imports {d} ({list(LAYERS)[layer_of(d)]})"
                  for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m))


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (a module importing itself back through others), or None.
    A package's __init__ importing its own modules is no cycle of theirs: they import their
    siblings by name."""
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep] if dep in path else [module, dep]
            if dep not in state and (found := visit(dep, [*path, dep])) is not None:
                return found
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])) is not None:
            return found
    return None


def test_every_module_is_placed_in_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_module_imports_a_layer_above_it() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycle() -> None:
    assert import_cycle(import_graph()) is None


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    """The checks themselves: a shared module importing a stage, two modules importing
    each other (here both in one layer, which only the cycle check sees)."""
    graph = {"pipeline.diffed": {"pipeline.diff"}, "pipeline.diff": {"pipeline.diffed"},
             "pipeline.sql": {"pipeline.parquet"}, "pipeline.parquet": {"pipeline.sql"}}
    assert upward_imports(graph) == ["pipeline.diffed (shared) imports pipeline.diff (diff)"]
    assert import_cycle(graph) == ["pipeline.diff", "pipeline.diffed", "pipeline.diff"]
    assert import_cycle({"pipeline.sql": {"pipeline.parquet"},
                         "pipeline.parquet": {"pipeline.sql"}}) is not None
    assert import_cycle({"pipeline.diff": {"pipeline.diffed"}, "pipeline.diffed": set()}) is None
