"""Issue 17: every example's guarantee text, manifest privacy block and ledger charge agree; guard tests.

* For every config in ``examples/``: the manifest's ``privacy`` block, its ``guarantee`` text, its
  ``budget_splits`` and the ledger's charge state the same epsilon/delta (and kind).
* A re-run of a published release id never reads the data: it succeeds after the data files are gone.
* No public output carries a pre-noise value: the manifests' parameter keys are on an allowlist, and two
  datasets with the same config and the same n give manifests that differ only in noisy outputs (their
  hashes) and provenance.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from flow_support import REPO, assert_claims_agree, release

from fdpcore.ledger import Ledger

EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.yaml"))
#: one example per summary for the (more expensive) two-dataset comparison
PER_SUMMARY = ["electricity_mean", "electricity_covariance", "growth_fosr", "kde_1d", "kde_2d", "erm_logistic",
               "growth_fpca"]


def _write(example: str, data_dir: Path, cfg_dir: Path) -> Path:
    cfg = yaml.safe_load((REPO / "examples" / f"{example}.yaml").read_text())
    cfg["dataset"]["path"] = str(data_dir / Path(cfg["dataset"]["path"]).name)
    cfg_dir.mkdir(parents=True, exist_ok=True)
    path = cfg_dir / f"{example}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Published:
    """Every example released once (on demand) into its own ledger, from a private copy of the data."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        shutil.copytree(REPO / "examples" / "data", self.data)
        self.configs: dict[str, Path] = {}

    def ledger(self, example: str) -> str:
        return f"sqlite:///{self.root / f'{example}.sqlite'}"  # one each: examples propose different budgets

    def out(self, example: str) -> Path:
        if example not in self.configs:
            cfg = _write(example, self.data, self.root / "cfg")
            assert release(cfg, self.root / "out" / example, self.ledger(example), f"r-{example}") == 0, example
            self.configs[example] = cfg
        return self.root / "out" / example


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    return Published(tmp_path_factory.mktemp("claims"))


def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())


#: every example; those beyond one per summary run with --runslow (each is a full `fdp release`)
ALL = [ex if ex in PER_SUMMARY else pytest.param(ex, marks=pytest.mark.slow) for ex in EXAMPLES]


@pytest.mark.parametrize("example", ALL)
def test_guarantee_text_privacy_block_and_ledger_charge_agree(published: Published, example: str) -> None:
    manifest = _manifest(published.out(example))
    assert_claims_agree(manifest, Ledger(published.ledger(example)).get(f"r-{example}"))


@pytest.mark.parametrize("example", ALL)
def test_a_rerun_of_a_published_id_never_reads_the_data(tmp_path: Path, published: Published, example: str) -> None:
    """A re-run of a published id succeeds with the data file gone, writes the same files and charges nothing."""
    first = published.out(example)
    cfg = published.configs[example]
    hidden = tmp_path / "hidden"
    shutil.move(published.data, hidden)
    try:
        led = Ledger(published.ledger(example))
        spent = led.budgets()[0].spent
        again = tmp_path / "again"
        assert release(cfg, again, led.url, f"r-{example}") == 0
        for f in sorted(first.iterdir()):
            assert (again / f.name).read_bytes() == f.read_bytes(), f.name
        assert led.budgets()[0].spent == spent and len(led.releases()) == 1  # nothing charged
    finally:
        shutil.move(hidden, published.data)


# ----------------------------------------------------------------------------- no pre-noise value in public outputs

#: Every key path (lists collapsed to []) that a manifest's ``parameters`` may hold: public inputs only.
PARAMETER_KEYS = {
    "active_set_size", "alignment", "bandwidth", "bandwidth_rule", "base_measure", "base_measure.density",
    "base_measure.form", "base_measure.prior_strength", "base_measure.prior_strength_rule", "basis",
    "basis.explained", "basis.kernel", "basis.kernel.length_scale", "basis.kernel.name",
    "basis.kernel_trace_normalized", "basis.n_basis", "basis.rule", "basis.sigma", "calibration", "centering",
    "centering.kind", "centering.mode", "centering.reference", "centering.release_id", "centering.source",
    "centering.time", "centering.value", "contribution_rule", "coordinate_columns", "covariate_bound",
    "covariate_bound_meaning", "covariates", "design_columns", "cs_upper_bound", "density", "dim", "domain", "domain_diameter",
    "estimator", "eta", "fallback_iterations", "frl_n_coefficients", "gamma", "gamma_rule", "grid", "grid.domain", "grid.points",
    "grid.rule", "grid.size", "grid.tensor", "hinge_smoothing", "intercept", "kappa", "kappa_eta", "kernel", "kernel.factors",
    "kernel.length_scale", "kernel.name", "kernel.nu", "kernel.rho", "kernel_trace_normalized", "label_bound", "label_offset",
    "lattice", "lattice_k", "lipschitz", "loss", "n_basis", "n_components", "noise_kernel", "noised_coefficients",
    "non_private", "normalisation", "outside_domain", "p", "post_processing", "privacy_unit", "psd_projection",
    "public_choices", "signal_fraction",
    "psi", "psi_formula", "psi_rule", "psi_prior", "psi_prior.candidates", "psi_prior.curvature",
    "psi_prior.residual_sd", "psi_prior.rms_error_with_bias", "psi_prior.signal_fraction", "psi_prior.signal_l2",
    "release_columns", "rho", "rkhs_sensitivity", "rkhs_sensitivity_exact_minimiser", "safe_inverse_floor",
    "safe_inverse_floor_rule", "selection", "selection.candidates", "selection.differentially_private",
    "selection.epsilon", "selection.method", "selection.n_train", "selection.n_validation", "selection.parameter",
    "selection.score_sensitivity", "selection.split", "snapping", "sup_clip", "tau", "tau_y", "time_domain",
    "tolerance", "tuning", "tuning.beta", "tuning.formula", "tuning.rule", "tuning.signal_fraction",
    "tuning.signal_fraction_formula", "value_offset",
    # FoSR: post-processing of the released design moments (tuning.fosr.t2_given_t1@1, postprocess.fosr.safe_inverse@1)
    "safe_inverse_pass_through", "safe_inverse_pass_through_note", "tuning.t2_amplification", "tuning.note",
    # FoSR: the design entries the public one-hot encoding makes zero (postprocess.fosr.structural_zeros@1)
    "structural_zeros",
    "value_scale",
    "value_units", "whitened_dimension",
}


def _paths(node: Any, prefix: str = "") -> set[str]:
    if isinstance(node, dict):
        out = set()
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            out |= {key} | _paths(v, key)
        return out
    return set()


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(node, list):
        out = {}
        for i, v in enumerate(node):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: node}


@pytest.mark.parametrize("example", ALL)
def test_manifest_parameter_keys_are_on_the_allowlist(published: Published, example: str) -> None:
    """A new parameter key must be added here deliberately: it is published, so it must be a public input."""
    keys = _paths(_manifest(published.out(example))["parameters"])
    assert sorted(keys - PARAMETER_KEYS) == []


def _shrunk_copy(example: str, src: Path, dest: Path) -> None:
    """The example's data with every measured value pulled 10% toward a public centre: same units, same n."""
    cfg = yaml.safe_load((REPO / "examples" / f"{example}.yaml").read_text())
    ds = cfg["dataset"]
    name = Path(ds["path"]).name
    frame = pd.read_parquet(src / name)
    if "value_column" in ds:
        c = float(ds.get("value_offset", 0.0))
        frame[ds["value_column"]] = c + 0.9 * (frame[ds["value_column"]] - c)
    for col, (a, b) in zip(ds.get("coordinate_columns", []), ds.get("domain", []), strict=False):
        mid = (a + b) / 2
        frame[col] = mid + 0.9 * (frame[col] - mid)
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != name:
            shutil.copy(f, dest / f.name)
    frame.to_parquet(dest / name)


#: manifest fields that may differ between two datasets of the same n: hashes of the noisy files, provenance,
#: FoSR's noised design moments T1 (a private output published in the manifest), and the commitment to each
#: ledger's audit chain (a random ledger id and hashes of ledger events)
NOISY = ("outputs", "provenance", "design_moments", "audit_commitment")
#: flattened manifest fields computed from released values only (post-processing of the noisy T1~ and curves): FoSR's
#: safe-inverse pass-through and each coefficient's stated noise and released size (accuracy.fosr.coefficient_noise@1)
FROM_RELEASED = ("parameters.safe_inverse_pass_through", "noise.coefficients")


@pytest.mark.parametrize(
    "example", [ex if ex == "electricity_mean" else pytest.param(ex, marks=pytest.mark.slow) for ex in PER_SUMMARY])
def test_two_datasets_with_the_same_config_and_n_differ_only_in_noisy_values(tmp_path: Path, example: str) -> None:
    """issue 17 guard: a pre-noise value (estimate, whitened coefficients, T1/T2, surface) in any manifest field
    would differ between the two datasets; only the noisy files' hashes and the provenance may."""
    manifests = []
    for tag in ("a", "b"):
        data = tmp_path / f"data-{tag}"
        if tag == "a":
            shutil.copytree(REPO / "examples" / "data", data)
        else:
            _shrunk_copy(example, REPO / "examples" / "data", data)
        cfg = _write(example, data, tmp_path / f"cfg-{tag}")
        ledger = f"sqlite:///{tmp_path / f'{tag}.sqlite'}"
        assert release(cfg, tmp_path / f"out-{tag}", ledger, "same-id") == 0
        manifests.append(_manifest(tmp_path / f"out-{tag}"))
    a, b = ({k: v for k, v in _flat({k: v for k, v in m.items() if k not in NOISY}).items()
             if not k.startswith(FROM_RELEASED)} for m in manifests)
    assert a.keys() == b.keys()  # the noise band (a Monte Carlo of the noise law, public seed) is equal too
    differing = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert differing == {}
    assert manifests[0]["n"] == manifests[1]["n"]
    assert manifests[0]["outputs"] != manifests[1]["outputs"]  # the noisy files themselves differ


def test_a_data_error_names_its_row_on_the_terminal_only_before_any_flow_runs(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 17: a non-finite point makes the release stop (exit 2, nothing charged); the curator's terminal names the
    row. The data are read before Prefect starts, so no flow run, log or state message — what the UI shows — exists
    (a streaming engine's own pass, which runs inside the flow, redacts the row: test_bad_inputs, dask)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    frame = pd.read_parquet(REPO / "examples" / "data" / "kde_points_1d.parquet")
    frame.loc[1233, "score"] = float("nan")
    data = tmp_path / "data"
    data.mkdir()
    frame.to_parquet(data / "kde_points_1d.parquet", index=False)
    cfg = _write("kde_1d", data, tmp_path / "cfg")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "out", ledger, "rows-stay-home") == 2
    err = capsys.readouterr().err
    assert "non-finite entry at row 1234" in err  # the file's data row (1-based below the header)
    assert Ledger(ledger).get("rows-stay-home") is None
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="rows-stay-home")))
    assert runs == []
