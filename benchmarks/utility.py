"""Utility of the default configuration against a non-private oracle (issue 16), on the shipped data.

For each data set and each epsilon in ``--epsilons`` it prints a Markdown table of the root mean squared
L2 error (source units, over ``--draws`` independent releases) of

* **default** — what a user gets without tuning anything: ``clipping: {tau: auto}`` (10 % of epsilon on
  the DP quantile of the record norms, drawn afresh for every release), the default tuning rule
  ``risk_prior`` (``fdpcore.privacy.tuning.risk_prior_iclp_qr``) for the ICLP-QR mean; the public
  ``value_offset``/``value_scale`` are those of the shipped example configs (electricity) or a public
  a-priori level (growth, below). With ``--offset-auto`` also ``value_offset: auto``. Growth twice: with nothing
  stated, and with ``tuning.signal_rms`` stated a priori from the public CDC reference (:func:`cdc_signal_rms`,
  ``tuning.risk.signal_stated@1``), as docs/summaries/mean.md tells a user of such curves to write it.
* **oracle** — NOT private, for reference only: ``tau`` = the largest record norm (no clipping bias),
  ``(eta, psi)`` the best pair on a grid (``eta`` in ``fdpcore.privacy.tuning.RISK_ETAS`` plus ``1 + 1/beta`` and
  ``1 + 2/beta``, ``psi = 10^(k/4)`` for ``k = -48..8``, up to ``risk_prior``'s largest 100), chosen by the exact expected error (squared
  shrinkage bias on these data plus the expected noise energy); its RMSE is the root of that exact expected
  error (no draws, so the ratio carries the default's sampling error only).
* the previous default (``exact_balanced``, fixed ``tau``) for comparison, where a fixed ``tau`` exists.

The error is against the non-private sample mean of the unclipped curves (the data set's own mean):
this measures what privacy costs, not sampling error. Releases use the facade's NumPy sampler
(``secure=False``: simulations only); the DP quantile is OpenDP's either way.

Covariance and FoSR: the default plans' expected noise (closed form) and the RMSE of ``--draws``
releases against the non-private estimator at ``psi -> 0`` (the plain empirical covariance / OLS),
to check that the error falls as epsilon grows.

    .venv/bin/python benchmarks/utility.py --draws 200
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from fdpcore.basis.eigen import weighted_eigenbasis
from fdpcore.basis.grids import Grid, grid_from_nodes, midpoint_grid
from fdpcore.basis.kernels import decay_rate, kernel_spec
from fdpcore.data.preprocess import clip_l2
from fdpcore.errors import PrivacyParameterError
from fdpcore.noise.quantiles import record_norms
from fdpcore.privacy.tuning import RISK_ETAS
from fdpcore.summaries.covariance import release_covariance
from fdpcore.summaries.fosr import release_fosr
from fdpcore.summaries.mean import auto_public_choices, draw_mean_release, plan_mean_release, release_mean, summarise_mean

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True)
class Data:
    """One shipped data set on its public grid, after the public rescaling ``(v - offset) / scale``."""

    name: str
    curves: np.ndarray  # n x K, rescaled
    grid: Grid
    kernel: dict[str, object]
    offset: float
    scale: float
    fixed_tau: float | None  # the example config's a-priori tau, if any
    offset_range: tuple[float, float]  # public range for value_offset: auto (source units)
    raw: np.ndarray  # n x K, source units
    signal_rms: float | None = None  # tuning.signal_rms, stated a priori (None: the default's prior scale)


def electricity() -> Data:
    """examples/electricity_mean.yaml: 508 Mondays x 48 half-hours, offset 1500 MW, scale 1000 MW, tau 1."""
    d = pd.read_parquet(ROOT / "examples/data/electricity_monday.parquet")
    raw = d.pivot(index="monday_index", columns="half_hour", values="demand_mw").to_numpy(float)
    return Data("electricity (508 x 48)", (raw - 1500.0) / 1000.0, midpoint_grid(48),
                {"name": "matern", "nu": 1.5, "rho": 0.1}, 1500.0, 1000.0, 1.0, (0.0, 5000.0), raw)


def growth() -> Data:
    """Berkeley growth: 93 children x 31 ages on the trapezoid grid of examples/growth_fosr.yaml.

    Public a-priori rescaling (no look at these data): children aged 1-18 are between about 75 and 175 cm
    tall (CDC 2000 median stature at the two ends), so the level is their midpoint 125 cm; the README rule
    for the scale: no child deviates from 125 cm by more than 60 cm at any age, so value_scale = 60 cm,
    |x(t)| <= 1 and the a-priori tau is 1 on [0, 1]. Kernel Matern 5/2 with rho 0.3 as in growth_fosr.yaml.
    """
    d = pd.read_parquet(ROOT / "examples/data/berkeley_growth.parquet")
    wide = d.pivot(index="child_id", columns="age_years", values="height_cm")
    ages = wide.columns.to_numpy(float)
    raw = wide.to_numpy(float)
    return Data("growth (93 x 31)", (raw - 125.0) / 60.0, grid_from_nodes((ages - 1.0) / 17.0, (0.0, 1.0)),
                {"name": "matern", "nu": 2.5, "rho": 0.3}, 125.0, 60.0, 1.0, (0.0, 250.0), raw)


def cdc_signal_rms(offset: float = 125.0, scale: float = 60.0) -> float:
    """``tuning.signal_rms`` for growth from public knowledge only, as docs/summaries/mean.md writes it.

    The CDC 2000 median stature at ages 1-18 (the public reference of examples/growth_fosr.yaml, not these children):
    its root-mean-square distance from ``offset`` over the ages (trapezoid), in units of ``scale``, to two decimals
    as a user would write it (0.49).
    """
    ref = yaml.safe_load((ROOT / "examples/growth_fosr.yaml").read_text())["centering"]
    t, v = np.asarray(ref["time"], float), np.asarray(ref["value"], float)
    z = ((v - offset) / scale) ** 2
    return round(math.sqrt(float(np.sum((z[1:] + z[:-1]) * np.diff(t)) / 2 / (t[-1] - t[0]))), 2)


def growth_stated() -> Data:
    """:func:`growth` with the mean's size stated a priori (``tuning.signal_rms`` = :func:`cdc_signal_rms`)."""
    g = growth()
    rms = cdc_signal_rms()
    return dataclasses.replace(g, name=f"growth (93 x 31), signal_rms {rms:g} stated a priori (CDC)", signal_rms=rms)


def _sq_err(values: np.ndarray, target: np.ndarray, grid: Grid) -> np.ndarray:
    return np.asarray(grid.norm(values - target[None, :]) ** 2)


def oracle_choice(data: Data, epsilon: float) -> tuple[float, float, float]:
    """(eta, psi, expected squared error) of the non-private oracle at tau = max norm (scaled units)."""
    x, grid = data.curves, data.grid
    n = x.shape[0]
    tau = float(record_norms(x, grid.weights).max()) * (1 + 1e-12)
    xbar = x.mean(axis=0)
    spec = kernel_spec(data.kernel)
    basis = weighted_eigenbasis(spec, grid)
    beta = decay_rate(spec, basis.eigenvalues)
    lam = basis.eigenvalues
    theta = basis.coefficients(x).mean(axis=0)
    best = (math.inf, 0.0, 0.0)
    for eta in sorted({*RISK_ETAS, 1 + 1 / beta, 1 + 2 / beta}):
        for k in range(-48, 9):  # psi up to 100, as risk_prior's own grid (trial V: guns' best sat at 1)
            psi = 10.0 ** (k / 4)
            plan = plan_mean_release(grid, data.kernel, n=n, tau=tau, epsilon=epsilon, eta=eta, psi=psi, secure=False)
            est = basis.reconstruct(theta * lam**eta / (lam**eta + psi))
            err = float(grid.norm((est - xbar)[None, :])[0] ** 2) + plan.expected_sq_l2_error
            if err < best[0]:
                best = (err, eta, psi)
    return best[1], best[2], best[0]


def offset_only_rmse(data: Data) -> float:
    """The error of releasing the constant ``value_offset`` (source units): the floor any useful release must beat."""
    return float(data.grid.norm(data.curves.mean(axis=0)[None, :])[0]) * data.scale


def mean_rows(data: Data, epsilons: tuple[float, ...], draws: int, offset_auto: bool, seed: int) -> list[list[str]]:
    """One row per epsilon: RMSE (source units) of default, oracle, previous default; ratios."""
    rng = np.random.default_rng(seed)
    x, grid = data.curves, data.grid
    xbar = x.mean(axis=0)
    ref = float(grid.norm(((data.raw.mean(axis=0)))[None, :])[0])  # ||mean||_W in source units
    tau_max = float(record_norms(x, grid.weights).max()) * (1 + 1e-12)
    rows = []
    for eps in epsilons:
        sq = np.empty(draws)
        taus = np.empty(draws)
        try:
            auto_public_choices(grid, data.kernel, n=x.shape[0], epsilon=eps, tau_auto=True)
            tau_mode: float | str = "auto"
        except PrivacyParameterError:  # n * epsilon too small for the DP quantile: the README's a-priori tau
            tau_mode = float(data.fixed_tau) if data.fixed_tau is not None else math.nan
        for i in range(draws):  # tau: auto is drawn afresh for every release
            r = release_mean(x, grid, epsilon=eps, tau=tau_mode, kernel=data.kernel, secure=False, rng=rng,
                             signal_rms=data.signal_rms)
            sq[i] = _sq_err(r.values, xbar, grid)[0]
            taus[i] = r.plan.tau
            kept = [c.formula_id for c in r.plan.public_choices if c.a_priori]
        eta, psi, exact_sq = oracle_choice(data, eps)
        d_rmse = math.sqrt(sq.mean()) * data.scale
        o_rmse = math.sqrt(exact_sq) * data.scale
        row = [f"{eps:g}", f"{d_rmse:.4g}", f"{d_rmse / ref:.4f}", f"{o_rmse:.4g}", f"{o_rmse / ref:.4f}",
               f"{d_rmse / o_rmse:.2f}",
               f"{np.median(taus):.3g}" + (" (a priori)" if tau_mode != "auto" else
                                           f" (auto: a priori, {kept[0]})" if kept else " (auto)"),
               f"{tau_max:.3g}", f"{eta:g}, {psi:.2g}"]
        if data.fixed_tau is not None:
            old = release_mean(x, grid, epsilon=eps, tau=data.fixed_tau, kernel=data.kernel, tuning="exact_balanced",
                               draws=draws, secure=False, rng=rng)
            row.append(f"{math.sqrt(_sq_err(old.values, xbar, grid).mean()) * data.scale / ref:.4f}")
        else:
            row.append("—")
        if offset_auto:
            row.append(f"{_offset_auto_rmse(data, eps, draws, rng) / ref:.4f}")
        rows.append(row)
    return rows


def _offset_auto_rmse(data: Data, eps: float, draws: int, rng: np.random.Generator) -> float:
    """RMSE (source units) with value_offset: auto (5 %) and tau: auto (10 %), the rest for the mean."""
    from fdpcore.noise.quantiles import draw_public_choice, record_levels

    grid = data.grid
    n = data.raw.shape[0]
    target = data.raw.mean(axis=0)
    try:
        choices = auto_public_choices(grid, data.kernel, n=n, epsilon=eps, tau_auto=True,
                                      centre_range=data.offset_range)
    except PrivacyParameterError:
        return math.nan
    levels = record_levels(data.raw, grid.weights)
    sq = np.empty(draws)
    for i in range(draws):
        centre = draw_public_choice(choices[0], levels)
        c = float(centre.value if centre.value is not None else 0.0)
        x = (data.raw - c) / data.scale
        tau_c = draw_public_choice(choices[1], record_norms(x, grid.weights))
        tau = float(tau_c.value if tau_c.value is not None else 1.0)
        plan = plan_mean_release(grid, data.kernel, n=n, tau=tau, epsilon=eps, secure=False,
                                 public_choices=(centre, tau_c))
        clipped, _ = clip_l2(x, grid.weights, tau)
        values = draw_mean_release(plan, summarise_mean(clipped, plan), rng=rng)[0] * data.scale + c
        sq[i] = float(grid.norm((values - target)[None, :])[0] ** 2)
    return math.sqrt(sq.mean())


def covariance_rows(epsilons: tuple[float, ...], draws: int, seed: int) -> list[list[str]]:
    """Electricity covariance as in examples/electricity_covariance.yaml (public centre 1500 MW, scale 1000 MW, tau_c = 0.5, PSD projection): RMSE (MW^2, weighted L2 on T x T) against the non-private second moment of the.

    unclipped centred curves, for the default rule (risk_prior) and the example's exact_free.
    """
    rng = np.random.default_rng(seed)
    data = electricity()
    y, grid = data.curves, data.grid
    target = (y.T @ y) / y.shape[0]
    ww = np.outer(grid.weights, grid.weights)
    ref = math.sqrt(float(np.sum(ww * target**2)))
    rows = []
    for eps in epsilons:
        row = [f"{eps:g}"]
        for tuning in (None, "exact_free"):
            r = release_covariance(y, grid, epsilon=eps, tau=0.5, kernel=data.kernel, tuning=tuning, draws=draws,
                                   secure=False, rng=rng)
            err = np.sum(ww[None] * (r.surfaces - target[None]) ** 2, axis=(1, 2))
            row += [f"{math.sqrt(err.mean()) * data.scale**2:.4g}", f"{math.sqrt(err.mean()) / ref:.4f}"]
        rows.append(row)
    return rows


def _growth_fosr() -> tuple[np.ndarray, np.ndarray, Grid, dict[str, object]]:
    """examples/growth_fosr.yaml: heights minus the public CDC reference, in 10 cm; sex coded +1 (M) / -1 (F)."""
    cfg = yaml.safe_load((ROOT / "examples/growth_fosr.yaml").read_text())
    d = pd.read_parquet(ROOT / "examples/data/berkeley_growth.parquet")
    wide = d.pivot(index="child_id", columns="age_years", values="height_cm")
    ages = wide.columns.to_numpy(float)
    ref = np.interp(ages, cfg["centering"]["time"], cfg["centering"]["value"])
    y = (wide.to_numpy(float) - ref[None, :]) / cfg["dataset"]["value_scale"]
    sex = d.groupby("child_id")["sex"].first().reindex(wide.index).map({"M": 1.0, "F": -1.0}).to_numpy(float)
    return y, sex[:, None], grid_from_nodes((ages - 1.0) / 17.0, (0.0, 1.0)), cfg["kernel"]


def fosr_rows(epsilons: tuple[float, ...], draws: int, seed: int) -> list[list[str]]:
    """Growth FoSR as in examples/growth_fosr.yaml (tau_Y = 1, B = 1, intercept): RMSE (cm, sum over the two coefficient curves of the weighted L2 error) against the non-private OLS of the unclipped data, default rule."""
    rng = np.random.default_rng(seed)
    y, z, grid, kernel = _growth_fosr()
    x = np.hstack([np.ones_like(z), z])
    beta = np.linalg.solve(x.T @ x, x.T @ y)
    ref = math.sqrt(float(np.sum(grid.norm(beta) ** 2)))
    rows = []
    for eps in epsilons:
        r = release_fosr(y, z, grid, epsilon=eps, tau_y=1.0, bound=1.0, kernel=kernel, draws=draws, secure=False,
                         rng=rng)
        err = np.sum((r.coefficients - beta[None]) ** 2 * grid.weights[None, None, :], axis=(1, 2))
        rows.append([f"{eps:g}", f"{math.sqrt(err.mean()) * 10:.4g}", f"{math.sqrt(err.mean()) / ref:.4f}",
                     f"{r.plan.eta:g}, {r.plan.psi:.2g}", f"{r.plan.gamma:g}"])
    return rows


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--offset-auto", action="store_true", help="also value_offset: auto (5 %) + tau: auto")
    ap.add_argument("--seed", type=int, default=20261123, help="NumPy seed of the simulation sampler")
    args = ap.parse_args()
    eps = tuple(args.epsilons)
    start = time.time()
    for data in (electricity(), growth(), growth_stated()):
        headers = ["ε", "default RMSE", "default rel.", "oracle RMSE", "oracle rel.", "default / oracle",
                   "median τ", "oracle τ (max norm)", "oracle η, ψ", "old default rel."]
        if args.offset_auto:
            headers.append("offset auto rel.")
        print(f"\n### Mean — {data.name}, {args.draws} draws\n")
        print(table(headers, mean_rows(data, eps, args.draws, args.offset_auto, args.seed)))
        print(f"\nPublishing value_offset alone (no data, no budget): RMSE {offset_only_rmse(data):.4g}")
    print(f"\n### Covariance — electricity (508 x 48), tau_c = 0.5 a priori, {args.draws} draws\n")
    print(table(["ε", "default RMSE (MW²)", "default rel.", "exact_free RMSE (MW²)", "exact_free rel."],
                covariance_rows(eps, args.draws, args.seed)))
    print(f"\n### FoSR — growth (93 x 31, height ~ 1 + sex), tau_Y = 1 a priori, {args.draws} draws\n")
    print(table(["ε", "default RMSE (cm)", "default rel.", "η, ψ", "γ"], fosr_rows(eps, args.draws, args.seed)))
    print(f"\n({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
