"""The package's layering (README "Architecture"): which module may import which, and no import cycle.

Imports are read from the source with ``ast`` (function-level imports included: a lazy import is still a
dependency), relative imports resolved; every module is also imported once, so a broken import fails here.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import bayesalign

ROOT = Path(bayesalign.__file__).parent
APPLICATION = {"registry", "compare", "_compare_cache", "_compare_tables", "io", "cli", "cli_checks", "plot",
               "singlecell"}
#: core layer -> the top-level parts of the package it may use (itself and the seeding helpers always)
ALLOWED = {
    "data": set(),
    "datasets": {"data"},
    "graph": {"data"},
    "matching": {"data"},
    "metrics": {"data"},
    "gp": {"data"},
    "spectral": {"graph", "metrics", "data"},  # metrics: least squares picks its reference by held-out FOSCTTM
    "transport": {"graph", "metrics", "data"},  # metrics: settings are chosen by the anchors' FOSCTTM
    # graph and spectral: the all-rows model's graph prior over the views' neighbourhoods and its start
    "mad": {"gp", "matching", "metrics", "graph", "spectral", "transport", "data"},
    "pipelines": {"gp", "spectral", "data"},
}


def _modules() -> dict[str, Path]:
    """Dotted name -> source file of every module of the package."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path, top_level_only: bool = False) -> set[str]:
    """The package modules ``name`` imports (resolved to names in MODULES)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("bayesalign.") or target == "bayesalign":
                found.add(target)
    return found - {name}


def _part(module: str) -> str:
    """The top-level part of the package a module belongs to (``bayesalign.gp.psi`` -> ``gp``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name):
    importlib.import_module(name)


def test_core_never_imports_the_application_layer_and_follows_its_layers():
    bad = []
    for name, path in MODULES.items():
        part = _part(name)
        if part not in ALLOWED:
            continue
        for target in _imports(name, path):
            used = _part(target)
            if used in ("", part, "_utils"):  # the package root is only reached through a submodule name
                continue
            if used in APPLICATION or used not in ALLOWED[part]:
                bad.append(f"{name} imports {target}")
    assert not bad, "layering violations:\n" + "\n".join(bad)


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of a directed graph (depth-first search), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_no_import_cycle_at_module_level():
    # module-level imports only (a function-level import runs after every module is loaded); a module's
    # import of its own parent packages is not an edge (Python has them loaded first)
    graph = {}
    for name, path in MODULES.items():
        parents = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = _imports(name, path, top_level_only=True) - parents
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]  # it finds one
    assert _find_cycle(graph) is None


def test_no_import_cycle_at_all():
    # function-level imports included: a lazy import that closes a cycle still ties the two modules together
    graph = {}
    for name, path in MODULES.items():
        parents = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = _imports(name, path) - parents
    assert _find_cycle(graph) is None


def test_mad_files_import_the_estimators_and_no_part_imports_the_files():
    # the files module builds the estimators from their files; nothing in the estimators needs to know of files
    importers = {name for name, path in MODULES.items() if "bayesalign.mad.files" in _imports(name, path)}
    assert importers <= {"bayesalign.mad"}
    assert {"bayesalign.mad.estimator", "bayesalign.mad.ensemble"} <= _imports("bayesalign.mad.files",
                                                                               MODULES["bayesalign.mad.files"])


def test_the_checker_sees_relative_and_lazy_imports(tmp_path):
    # the parser must find what it is meant to police: a relative import two levels up inside a function
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from ..registry import METHODS\n")
    assert _imports("bayesalign.gp.x", source) == {"bayesalign.registry"}
    assert _imports("bayesalign.gp.x", source, top_level_only=True) == set()


#: A module longer than this says in its first lines why it must be one file.
MAX_LINES = 500


def test_every_module_is_short_or_says_why_it_is_one_file():
    long = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and "one file" not in "\n".join(lines[:10]):
            long.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not long, "split these by job, or say in their first lines why each must be one file:\n" + "\n".join(long)


def test_the_mad_class_is_short_and_its_docstring_says_only_what_it_is():
    tree = ast.parse((ROOT / "mad" / "estimator.py").read_text(encoding="utf-8"))
    mad = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "MAD")
    assert mad.end_lineno - mad.lineno + 1 <= 400
    assert len(ast.get_docstring(mad).splitlines()) <= 80
    init = next(node for node in mad.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    assert len(init.args.args) + len(init.args.kwonlyargs) - 1 <= 12  # constructor parameters besides self
