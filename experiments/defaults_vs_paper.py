"""The new defaults (``tau: auto``, ``risk_prior`` tuning; issue 16) next to the papers' rules at equal total epsilon.

    .venv/bin/python -m experiments.defaults_vs_paper [--reps R] [--out DIR]

For the mean data sets of the report -- the simulation (main configuration, S-1..S-4F, n = 1000) and
the Adelaide electricity curves -- ICLP-QR at total epsilon in ``EPSILONS`` in four pipelines:

* ``paper``: [ICLP-v2]'s balanced PSS rule (``paper_balanced``), the paper's l1 sensitivity, a fixed
  public tau (the simulation design's / ``examples/electricity_mean.yaml``'s);
* ``exact PSS``: the earlier default (``exact_balanced``, exact sensitivity), same fixed tau;
* ``default tuning``: the library's default rule at run time (``DEFAULT_RULES['iclp_qr']``), same tau;
* ``new defaults``: ``tau: auto`` (a DP quantile of the record norms bought with a share of the
  same total epsilon, ``fdpcore.noise.quantiles``; drawn with OpenDP) and the default rule.

Metric: E||mu~ - mu||^2 = ||mu^ - mu||^2 + E||noise||^2 (exact over the mean's noise; ``mu`` = the
true mean mu_0 in the simulation, the unclipped sample mean for electricity, so clipping bias counts),
averaged over ``reps`` replicates (a new data set and a new tau draw each, simulation; a new tau draw
each, electricity). The value offset stays fixed (public) in all pipelines.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import _sim_mean as sim
from experiments._util import fmt, md_table, save_csv, standalone

TITLE = "New defaults against the papers' rules at equal total ε"
NAME = "defaults_vs_paper"
DEFAULT_REPS = 20
EPSILONS = (0.5, 1.0, 4.0)
N_SIM = 1000
PIPELINES = ("paper", "exact PSS", "default tuning", "new defaults")


def available() -> bool:
    """Whether the library has the issue-16 defaults (``fdpcore.noise.quantiles``)."""
    return importlib.util.find_spec("fdpcore.noise.quantiles") is not None


def _errors(curves: np.ndarray, grid, kernel: dict, target: np.ndarray, epsilon: float, tau_fixed: float,
            rng: np.random.Generator) -> dict[str, tuple[float, float, str]]:
    """(MSE, tau used, parameters) of each pipeline on one data set."""
    from fdpcore.data.preprocess import clip_l2
    from fdpcore.noise.iclp import calibrate_iclp
    from fdpcore.noise.quantiles import draw_public_choice, record_norms
    from fdpcore.privacy.tuning import DEFAULT_RULES
    from fdpcore.summaries.mean import auto_public_choices, plan_mean_release, summarise_mean

    n = curves.shape[0]
    out: dict[str, tuple[float, float, str]] = {}

    def evaluate(name: str, plan, tau: float) -> None:
        clipped, _ = clip_l2(curves, grid.weights, tau)
        z = summarise_mean(clipped, plan)
        bias2 = float(grid.norm((z @ plan.recolour - target)[None, :])[0] ** 2)
        out[name] = (bias2 + plan.expected_sq_l2_error, tau, f"eta={plan.eta:.3g}, psi={plan.psi:.3g}")

    paper = plan_mean_release(grid, kernel, n=n, tau=tau_fixed, epsilon=epsilon, tuning="paper_balanced", secure=False)
    cal = calibrate_iclp(paper.paper_sensitivity, epsilon, n_basis=paper.recolour.shape[0], secure=False)
    evaluate("paper", dataclasses.replace(paper, sensitivity=paper.paper_sensitivity, calibration=cal), tau_fixed)
    evaluate("exact PSS", plan_mean_release(grid, kernel, n=n, tau=tau_fixed, epsilon=epsilon, tuning="exact_balanced",
                                            secure=False), tau_fixed)
    evaluate("default tuning", plan_mean_release(grid, kernel, n=n, tau=tau_fixed, epsilon=epsilon,
                                                 tuning=DEFAULT_RULES["iclp_qr"], secure=False), tau_fixed)
    choices = auto_public_choices(grid, kernel, n=n, epsilon=epsilon, tau_auto=True)
    drawn = tuple(draw_public_choice(c, record_norms(curves, grid.weights)) if c.name == "tau" else c for c in choices)
    tau = float(next(c.value for c in drawn if c.name == "tau"))
    evaluate("new defaults", plan_mean_release(grid, kernel, n=n, tau=tau, epsilon=epsilon, public_choices=drawn,
                                               secure=False), tau)
    return out


def measure(reps: int, seed: int, *, epsilons=EPSILONS, n_sim: int = N_SIM, scenarios=None) -> pd.DataFrame:
    """One row per (data set, epsilon, pipeline): mean and SE of the MSE over ``reps``, mean tau."""
    import yaml

    from experiments.electricity_table2 import CONFIG, load_curves

    rows = []
    cfg = sim.CONFIGS[0]
    g = sim.grid()
    for rep in range(reps):
        rng = np.random.default_rng([seed, 5, rep])
        means = {sc: sim.true_mean(sc, cfg.nu, rng) for sc in (scenarios or sim.SCENARIOS)}
        errors = sim.sample_errors(cfg.errors, n_sim, rng)
        for sc, mu0 in means.items():
            tau_design = sim.scales(mu0)[0]
            for eps in epsilons:
                for name, (mse, tau, par) in _errors(mu0 + errors, g, sim.iclp_kernel(cfg.nu), mu0, eps, tau_design,
                                                     rng).items():
                    rows.append({"data": f"simulation {sc}", "epsilon": eps, "pipeline": name, "rep": rep, "mse": mse,
                                 "tau": tau, "parameters": par})
    from experiments import electricity_table2 as el

    _, grid, protocol = load_curves()
    ds = yaml.safe_load(CONFIG.read_text())["dataset"]
    d = pd.read_parquet(el.REPO / "examples" / ds["path"])
    wide = d.pivot(index=ds["unit_column"], columns=ds["time_column"], values=ds["value_column"]).sort_index(axis=1)
    curves = (wide.to_numpy(dtype=np.float64) - ds["value_offset"]) / ds["value_scale"]
    target = curves.mean(axis=0)
    kernel = {"name": "matern", "nu": 1.5, "rho": el.RHO}
    for rep in range(reps):
        rng = np.random.default_rng([seed, 6, rep])
        for eps in epsilons:
            for name, (mse, tau, par) in _errors(curves, grid, kernel, target, eps, protocol["tau"], rng).items():
                rows.append({"data": "electricity", "epsilon": eps, "pipeline": name, "rep": rep, "mse": mse,
                             "tau": tau, "parameters": par})
    per = pd.DataFrame(rows)
    gb = per.groupby(["data", "epsilon", "pipeline"], sort=False)
    out = gb.agg(mse=("mse", "mean"), tau=("tau", "mean"), parameters=("parameters", "first"),
                 reps=("mse", "size")).reset_index()
    out["mse_se"] = gb["mse"].agg(lambda s: float(s.std(ddof=1) / math.sqrt(s.size)) if s.size > 1 else math.nan).to_numpy()
    return out


def run(out_dir: Path, reps: int, seed: int, **kw: object) -> str:
    """The section body (or a statement that the defaults are not in the library yet)."""
    if not available():
        return ("Not run: the library has no `fdpcore.noise.quantiles` (issue 16's `tau: auto` and default tuning were not "
                "on main when this report was generated).")
    table = measure(reps, seed, **kw)  # type: ignore[arg-type]
    csv = save_csv(table, out_dir, f"{NAME}_mse.csv")
    from fdpcore.privacy.tuning import DEFAULT_RULES

    rows = []
    for (data, eps), g in table.groupby(["data", "epsilon"], sort=False):
        cells = g.set_index("pipeline")
        best = cells.mse.idxmin()
        rows.append([data, f"{eps:g}"] + [f"{fmt(float(cells.loc[p].mse), 3)} ± {fmt(float(cells.loc[p].mse_se), 2)}"
                                         + (" (best)" if p == best else "") for p in PIPELINES]
                    + [fmt(float(cells.loc["new defaults"].tau), 3), fmt(float(cells.loc["paper"].tau), 3)])
    wins = table.loc[table.groupby(["data", "epsilon"]).mse.idxmin()].pipeline.value_counts()
    doc = " ".join((__doc__ or "").split("\n\n", 2)[2].split())
    return "\n".join([
        doc, "",
        f"Default ICLP-QR rule at run time: `{DEFAULT_RULES['iclp_qr']}`. {reps} replicates per cell.", "",
        md_table(["data", "ε"] + [f"{p} MSE ± SE" for p in PIPELINES] + ["mean τ (auto)", "τ (fixed)"], rows), "",
        "Smallest MSE by pipeline over the (data, ε) cells: " + ", ".join(f"{k} {v}" for k, v in wins.items()) + ".",
        "", f"Data: [{NAME}_mse.csv]({csv}).",
    ])


def main() -> None:
    """Standalone run: ``python -m experiments.defaults_vs_paper --reps R --out DIR``."""
    standalone(NAME, run, DEFAULT_REPS, (__doc__ or TITLE).splitlines()[0])


if __name__ == "__main__":
    main()
