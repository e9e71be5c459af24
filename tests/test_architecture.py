"""Import boundaries (STYLE.md): fdpcore never imports Prefect; math modules are pure; imports flow one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MATH_ALLOWED = {"numpy", "scipy", "opendp", "fdpcore", "__future__", "math", "functools", "dataclasses",
                "collections", "typing", "fractions", "importlib", "bisect",
                # pure standard library: id patterns (re); the keyed-hash split of dp_select, whose key comes from
                # the OS's random source and is never stored (hashlib, secrets; MATH.md §5.3)
                "re", "hashlib", "secrets"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _files(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _files("fdpcore"), ids=lambda p: str(p.relative_to(REPO)))
def test_fdpcore_never_imports_prefect_pydantic_or_project_layers(path: Path) -> None:
    bad = {n for n in _imports(path) if n.split(".")[0] in {"prefect", "pydantic"} or n.startswith("fdp.")}
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize(
    "path",
    [p for p in _files("fdpcore")
     if p.relative_to(REPO / "fdpcore").parts[0] not in {"io", "ledger"} and p.name not in {"__init__.py", "formulas.py"}],
    ids=lambda p: str(p.relative_to(REPO / "fdpcore")),
)
def test_math_modules_are_pure(path: Path) -> None:
    roots = {n.split(".")[0] for n in _imports(path)}
    roots -= {"fdpcore"}
    extra = roots - MATH_ALLOWED
    if path.name == "preprocess.py":
        extra -= {"pandas"}  # vectorised group-by for alignment; no I/O
    if path.name == "_bingham_kernels.py":
        extra -= {"numba"}  # optional compiler for the Gibbs inner loop; a NumPy fallback runs without it
    assert not extra, f"{path.name} imports {extra}"
    assert not any(n.startswith(("fdpcore.io", "fdpcore.ledger")) for n in _imports(path))


@pytest.mark.parametrize("path", _files("schemas") + _files("tasks"), ids=lambda p: str(p.relative_to(REPO)))
def test_schemas_and_tasks_never_import_flows(path: Path) -> None:
    assert not any(n.startswith("fdp.flows") for n in _imports(path))
    if path.parts[-2] == "schemas":
        assert not any(n.startswith(("prefect", "fdp.tasks")) for n in _imports(path))


@pytest.mark.parametrize("path", _files("flows"), ids=lambda p: p.name)
def test_flows_hold_no_math(path: Path) -> None:
    math_packages = ("fdpcore.basis", "fdpcore.noise", "fdpcore.summaries", "fdpcore.data", "fdpcore.privacy")
    imports = _imports(path)
    assert not {n for n in imports if n.startswith(math_packages)}, f"{path.name} imports math modules"
    assert not (imports & {"numpy", "scipy"})


def test_every_formula_lives_where_its_id_says() -> None:
    """A newcomer can find a manifest's formula from ``ls fdpcore/*/``: the id names the folder (issue 21)."""
    from fdpcore.privacy.formulas import FORMULAS, home

    wrong = {fid: f.function for fid, f in FORMULAS.items() if not f.function.startswith(home(fid) + ".")}
    assert not wrong, f"formulas outside their home (fdpcore.privacy.formulas.HOMES): {wrong}"
    assert all((REPO / f.function.rsplit(".", 1)[0].replace(".", "/")).with_suffix(".py").is_file()
               for f in FORMULAS.values())


def test_fdpcore_top_level_holds_only_subpackages_and_shared_helpers() -> None:
    modules = {p.name for p in (REPO / "fdpcore").glob("*.py")}
    assert modules <= {"__init__.py", "_typing.py", "_validate.py", "errors.py", "limits.py"}, modules
