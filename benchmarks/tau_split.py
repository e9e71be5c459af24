"""How the mean's ``tau: auto`` split and level rules compare, cell by cell (``tuning.tau.quantile_level@3``).

For the shipped electricity and growth curves and the five synthetic families of ``benchmarks/families.py``
(n = 60, 150, 600) at each epsilon, it draws ``--draws`` DP quantiles of the record norms (OpenDP, as a release
does: dithered norms, the rule's split and level) and prints the root mean of the *exact* expected squared error of
the default mean release at each drawn tau (clipping and shrinkage bias on these data plus the closed-form noise
at the epsilon the split leaves), divided by the non-private oracle's (``utility.oracle_choice``). Only the tau
draw is simulated, so the spread between rules is that of the quantile, not of the mean's noise.

Rules: ``@2`` (the split of ``choice_epsilon``), ``@3`` (``tau_epsilon``: raised up to a quarter of epsilon so the
level can reach 0.8), and with ``--grid`` the other (target level, cap) pairs that ``@3``'s constants were chosen
among. The summary lines give the geometric mean over the family cells, the largest ratio and the number of cells
above 1.3 and 1.5 x.

``--covariance`` instead runs whole covariance releases (the facade, ``tau="auto"``, default tuning) on the families
at n = 600 (epsilon 1, 2) and n = 150 (epsilon 5), ``--draws`` each with ``@2``'s split and with ``@3``'s, and prints
their relative RMSE against the non-private second moment (the release's own target). ``--fosr`` does the same
with whole FoSR releases (intercept and one +-1 covariate with an effect of a fifth of the curve, ``tau_y: auto``,
B = 1) against the non-private OLS coefficient curves. ``--landscape DATA:EPS`` prices every fixed (share, level)
pair at one cell: the best any split-and-level rule could do there in hindsight.

    .venv/bin/python benchmarks/tau_split.py --draws 200                     # 2-core VM: about 3 min
    .venv/bin/python benchmarks/tau_split.py --covariance --draws 40         # about 7 min
    .venv/bin/python benchmarks/tau_split.py --fosr --draws 40               # about 5 min
    .venv/bin/python benchmarks/tau_split.py --landscape growth:1 --draws 200  # one cell, every (share, level)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES, expected_error, family  # noqa: E402  (sibling scripts, not a package)
from utility import Data, electricity, growth, oracle_choice, table  # noqa: E402

import fdpcore.noise.quantiles as quantiles  # noqa: E402
from fdpcore.errors import PrivacyParameterError  # noqa: E402
from fdpcore.noise.quantiles import (  # noqa: E402
    choice_epsilon,
    draw_public_choice,
    quantile_rank_margin,
    record_norms,
    split_epsilon,
    tau_candidates,
    tau_choice,
    tau_epsilon,
    tau_quantile_level,
)
from fdpcore.summaries.covariance import release_covariance  # noqa: E402
from fdpcore.summaries.fosr import release_fosr  # noqa: E402
from fdpcore.summaries.mean import plan_mean_release  # noqa: E402

RANGE = (0.01, 1.0)
Split = Callable[[int, float, int], float]


def raised(target: float, cap: float) -> Split:
    """``@3``'s form with other constants: the ``@2`` split raised to reach ``target``, at most ``cap`` of epsilon."""
    def split(n: int, eps: float, count: int) -> float:
        base = choice_epsilon("tau", n, eps, 0.1, count)
        need = float(f"{quantile_rank_margin(1.0, count) / ((1.0 - target) * n):.4g}")
        return max(base, min(split_epsilon(eps, cap), need))
    return split


def rules(grid: bool) -> dict[str, Split]:
    """The rules compared: name -> split(n, epsilon, L)."""
    out: dict[str, Split] = {"@2": lambda n, e, c: choice_epsilon("tau", n, e, 0.1, c),
                             "@3": lambda n, e, c: tau_epsilon(n, e, 0.1, c)}
    if grid:
        for target in (0.7, 0.75, 0.8):
            for cap in (0.2, 0.25, 0.5):
                if (target, cap) != (0.8, 0.25):
                    out[f"{target:g}/{cap:g}"] = raised(target, cap)
    return out


def cell(data: Data, eps: float, splits: dict[str, Split], draws: int) -> dict[str, float]:
    """Each rule's RMSE ratio to the oracle at one (data, epsilon)."""
    norms = record_norms(data.curves, data.grid.weights)
    n, count = norms.size, len(tau_candidates(*RANGE))
    oracle = math.sqrt(oracle_choice(data, eps)[2])
    memo: dict[tuple[float, float], float] = {}

    def sq(tau: float, rest: float) -> float:
        if (tau, rest) not in memo:
            memo[(tau, rest)] = expected_error(data, rest, tau) ** 2
        return memo[(tau, rest)]

    out = {}
    for name, split in splits.items():
        try:
            e_tau = split(n, eps, count)
        except PrivacyParameterError:  # the a-priori tau, whole epsilon (every rule alike)
            out[name] = math.sqrt(sq(RANGE[1], eps)) / oracle
            continue
        provisional = tau_choice(n, e_tau, 1.0, RANGE, alpha=0.5)
        unit = plan_mean_release(data.grid, data.kernel, n=n, tau=1.0, epsilon=eps, secure=False,
                                 public_choices=(provisional,))
        alpha = tau_quantile_level(n, e_tau, count, math.sqrt(unit.expected_sq_l2_error))
        choice = tau_choice(n, e_tau, 1.0, RANGE, alpha=alpha)
        rest = round(eps - e_tau, 6)
        errs = [sq(float(draw_public_choice(choice, norms).value or RANGE[1]), rest) for _ in range(draws)]
        out[name] = math.sqrt(float(np.mean(errs))) / oracle
    return out


def landscape(spec: str, draws: int, seed: int) -> None:
    """``--landscape DATA:EPS``: the RMSE ratio of every (split share, quantile level) pair at one cell.

    What the best *fixed* pair would achieve in hindsight on these data (each pair's ``draws`` OpenDP quantile draws
    priced by the exact expected error, as :func:`cell`), next to the a-priori tau with the whole epsilon and the
    default rule: how much of a cell's gap any split-and-level rule could close.
    """
    name, eps_text = spec.split(":")
    eps = float(eps_text)
    if name in ("electricity", "growth"):
        data = electricity() if name == "electricity" else growth()
    else:
        fam, n = name.split("@")
        data = family(fam, int(n), seed)
    norms = record_norms(data.curves, data.grid.weights)
    oracle = math.sqrt(oracle_choice(data, eps)[2])
    levels = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    rows = []
    for share in (0.1, 0.15, 0.2, 0.25, 0.35, 0.5):
        e_tau = split_epsilon(eps, share)
        choice_at = {a: tau_choice(norms.size, e_tau, 1.0, RANGE, alpha=a) for a in levels}
        memo: dict[float, float] = {}
        row = [f"{share:g}"]
        for a in levels:
            taus = [float(draw_public_choice(choice_at[a], norms).value or RANGE[1]) for _ in range(draws)]
            for t in set(taus) - memo.keys():
                memo[t] = expected_error(data, round(eps - e_tau, 6), t) ** 2
            row.append(f"{math.sqrt(float(np.mean([memo[t] for t in taus]))) / oracle:.2f}")
        rows.append(row)
    default = cell(data, eps, {"@3": lambda n, e, c: tau_epsilon(n, e, 0.1, c)}, draws)["@3"]
    print(f"### {data.name}, epsilon {eps:g}: RMSE / oracle by tau split share (rows) and quantile level (columns), "
          f"{draws} draws each\n")
    print(table(["share", *(f"{a:g}" for a in levels)], rows))
    print(f"\na-priori tau = {RANGE[1]:g} with the whole epsilon: {expected_error(data, eps, RANGE[1]) / oracle:.2f}; "
          f"the default rule (@3): {default:.2f}")


def _covariance_error(data: Data, eps: float, rng: np.random.Generator, draws: int) -> float:
    """Relative RMSE of ``draws`` default covariance releases (``tau: auto``) against the second moment."""
    y, grid = data.curves, data.grid
    target = y.T @ y / y.shape[0]
    ww = np.outer(grid.weights, grid.weights)
    err = [float(np.sum(ww * (release_covariance(y, grid, epsilon=eps, tau="auto", kernel=data.kernel, secure=False,
                                                 rng=rng).surfaces[0] - target) ** 2)) for _ in range(draws)]
    return math.sqrt(float(np.mean(err)) / float(np.sum(ww * target**2)))


def _fosr_error(data: Data, eps: float, rng: np.random.Generator, draws: int) -> float:
    """Relative RMSE of ``draws`` default FoSR releases (``tau_y: auto``, intercept + one +-1 covariate, B = 1).

    The covariate ``s_i`` is +1 for every other record; the response is the family's curve times ``1 + 0.2 s_i``
    (an effect of a fifth of the curve). Error: the two coefficient curves against the non-private OLS.
    """
    s = np.where(np.arange(data.curves.shape[0]) % 2 == 0, 1.0, -1.0)[:, None]
    y = np.clip(data.curves * (1.0 + 0.2 * s), -1.0, 1.0)
    x = np.hstack([np.ones_like(s), s])
    beta = np.linalg.solve(x.T @ x, x.T @ y)
    w = data.grid.weights
    err = [float(np.sum((release_fosr(y, s, data.grid, epsilon=eps, tau_y="auto", bound=1.0, kernel=data.kernel,
                                      secure=False, rng=rng).coefficients[0] - beta) ** 2 * w))
           for _ in range(draws)]
    return math.sqrt(float(np.mean(err)) / float(np.sum(beta**2 * w)))


def whole(summary: str, draws: int, seed: int) -> None:
    """Whole covariance or FoSR releases with @2's split and with @3's (module docstring)."""
    rng = np.random.default_rng()
    error = {"covariance": _covariance_error, "fosr": _fosr_error}[summary]
    raised = quantiles.tau_epsilon
    rows = []
    try:
        for name in FAMILIES:
            for n, epsilons in ((600, (1.0, 2.0)), (150, (5.0,))):
                data = family(name, n, seed)
                for eps in epsilons:
                    rel = []
                    for split in (lambda n_, e, sh, c: choice_epsilon("tau", n_, e, sh, c), raised):
                        quantiles.tau_epsilon = split  # summary_tau_choice reads the module's tau_epsilon
                        rel.append(error(data, eps, rng, draws))
                    rows.append([data.name, f"{eps:g}", f"{rel[0]:.3f}", f"{rel[1]:.3f}", f"{rel[1] / rel[0]:.2f}"])
    finally:
        quantiles.tau_epsilon = raised
    print(f"### {summary.capitalize()} relative RMSE by tau split rule, {draws} releases per cell\n")
    print(table(["data", "ε", "@2", "@3", "@3 / @2"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--n", type=int, nargs="+", default=[60, 150, 600])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0, 10.0])
    ap.add_argument("--seed", type=int, default=20261125, help="seed of the synthetic families (not of the draws)")
    ap.add_argument("--grid", action="store_true", help="also the (target level, cap) pairs @3's constants were chosen among")
    ap.add_argument("--covariance", action="store_true", help="whole covariance releases, @2 against @3")
    ap.add_argument("--fosr", action="store_true", help="whole FoSR releases (one +-1 covariate), @2 against @3")
    ap.add_argument("--landscape", metavar="DATA:EPS",
                    help="every (share, level) pair at one cell: electricity, growth or FAMILY@N, e.g. growth:1")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.landscape:
        landscape(args.landscape, args.draws, args.seed)
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        return
    if args.covariance or args.fosr:
        whole("covariance" if args.covariance else "fosr", args.draws, args.seed)
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        return
    splits = rules(args.grid)
    sets = [electricity(), growth()] + [family(f, n, args.seed) for f in FAMILIES for n in args.n]
    rows: list[list[str]] = []
    family_ratios: dict[str, list[float]] = {name: [] for name in splits}
    for i, data in enumerate(sets):
        for eps in args.epsilons:
            r = cell(data, eps, splits, args.draws)
            rows.append([data.name, f"{eps:g}", *(f"{r[k]:.2f}" for k in splits)])
            if i >= 2:  # the synthetic families
                for k in splits:
                    family_ratios[k].append(r[k])
    print(f"### Mean RMSE / oracle by tau split rule, {args.draws} quantile draws per cell\n")
    print(table(["data", "ε", *splits], rows))
    print("\n### Over the family cells\n")
    summary = []
    for k, v in family_ratios.items():
        a = np.asarray(v)
        summary.append([k, f"{np.exp(np.log(a).mean()):.3f}", f"{a.max():.2f}", str(int((a > 1.3).sum())),
                        str(int((a > 1.5).sum())), str(a.size)])
    print(table(["rule", "geometric mean", "max", "cells > 1.3", "cells > 1.5", "cells"], summary))
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
