"""CLI start-up: commands import only what they use (issue 8; timings in benchmarks/README.md, CLI).

Each check runs in a fresh interpreter, since this test process has long imported Prefect.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
HEAVY = ("prefect", "matplotlib", "fastapi", "openlineage", "fdp.tasks", "fdp.flows.mean_release",
         "fdp.flows.fpca_release", "fdp.flows.kde_release", "fdp.flows.scheduled")


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it sets ``out`` (a JSON-able dict), which is returned."""
    script = "import json, sys\n" + textwrap.dedent(code) + "\nprint('\\n' + json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    result: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


def _loaded(prefixes: tuple[str, ...]) -> str:
    return f"sorted(m for m in sys.modules if m.split('.')[0] in {prefixes!r} or m in {prefixes!r})"


@pytest.mark.parametrize("argv", [
    ["schema", "release-config"],
    ["budget", "show", "--json"],
    ["budget", "set", "ds", "--epsilon", "2"],
    ["audit", "list"],
    ["audit", "verify"],
], ids=lambda a: " ".join(a[:2]))
def test_ledger_and_schema_commands_do_not_import_prefect(argv: list[str], tmp_path: Path) -> None:
    ledger = [] if argv[0] == "schema" else ["--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]
    out = _fresh(f"""
        import contextlib, io
        from fdp.flows.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main({argv + ledger!r})
        out = {{"rc": rc, "heavy": {_loaded(HEAVY)}}}
    """)
    assert out == {"rc": 0, "heavy": []}


def test_loading_a_config_imports_no_flow_and_the_registry_imports_only_the_one_run() -> None:
    out = _fresh(f"""
        from fdp.flows.config import load_config
        from fdp.flows.registry import SUMMARIES
        config = load_config({str(EXAMPLE)!r})
        before = {_loaded(HEAVY)}
        flow = SUMMARIES[config.summary].flow
        after = {_loaded(("fdp.flows.mean_release", "fdp.flows.fpca_release", "fdp.flows.kde_release",
                          "fdp.flows.covariance_release", "fdp.flows.erm_release", "fdp.flows.regression_release",
                          "matplotlib"))}
        out = {{"before": before, "after": after, "flow": flow.name}}
    """)
    assert out == {"before": [], "after": ["fdp.flows.mean_release"], "flow": "mean-release"}


def test_every_registered_flow_resolves_to_its_prefect_flow() -> None:
    from prefect import Flow

    from fdp.flows.registry import SUMMARIES

    names = {key: summary.flow.name for key, summary in SUMMARIES.items()}
    assert all(isinstance(s.flow, Flow) for s in SUMMARIES.values())
    assert names == {"mean": "mean-release", "fpca": "fpca-release", "covariance": "covariance-release",
                     "fosr": "fosr-release", "kde": "kde-release", "erm": "erm-release"}


@pytest.mark.parametrize("submodule_first", [False, True])
def test_fdp_flows_mean_release_is_the_flow_whichever_import_comes_first(submodule_first: bool) -> None:
    out = _fresh(f"""
        import fdp.flows
        lazy = "prefect" not in sys.modules
        if {submodule_first!r}:
            import fdp.flows.mean_release  # binds the submodule's name on the package
        from fdp.flows import mean_release
        from prefect import Flow
        out = {{"lazy": lazy, "flow": isinstance(mean_release, Flow) and mean_release.name,
                "same": fdp.flows.mean_release is mean_release}}
    """)
    assert out == {"lazy": True, "flow": "mean-release", "same": True}


def test_task_names_resolve_on_access_and_plots_import_matplotlib_on_first_plot() -> None:
    out = _fresh(f"""
        import fdp.tasks.ledger
        import fdp.tasks._plots as plots
        first = {_loaded(("matplotlib", "fdp.tasks.mean"))}
        from fdp.tasks import clip_curves
        import numpy as np
        png = plots.curves_png(np.arange(3.0), {{"mean": np.ones(3)}}, xlabel="t", ylabel="y", title="t")
        try:
            fdp.tasks.not_a_task
            missing = None
        except AttributeError as exc:
            missing = str(exc)
        out = {{"first": first, "clip": clip_curves.name, "png": png[:4].hex(), "missing": missing,
                "mean_loaded": "fdp.tasks.mean" in sys.modules, "mpl": "matplotlib.pyplot" in sys.modules}}
    """)
    assert out == {"first": [], "clip": "clip-curves", "png": "89504e47", "mean_loaded": True, "mpl": True,
                   "missing": "module 'fdp.tasks' has no attribute 'not_a_task'"}
