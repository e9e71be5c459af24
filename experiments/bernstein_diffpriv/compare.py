"""Side-by-side check of fdp's Bernstein mechanism against R diffpriv's DPMechBernstein.

    Rscript experiments/bernstein_diffpriv/diffpriv_draws.R LIBDIR /tmp/diffpriv.csv 4000
    .venv/bin/python experiments/bernstein_diffpriv/compare.py /tmp/diffpriv.csv

Same target f(x) = sin(2 pi x1) x2 + x1^2 / 2 on [0, 1]^2, lattice k = 5 (L = 36), diffpriv
sensitivity Delta_inf = 0.1 (so fdp's l1 sensitivity is L * 0.1), epsilon = 2. Prints the largest
difference of the noise-free approximations (lattice order and basis) and, per evaluation point,
a two-sample KS test and the mean/sd of both samples (fdp: NumPy fast path and OpenDP secure path).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy import stats

from fdpcore.noise.bernstein import bernstein_basis, bernstein_lattice, bernstein_mechanism

K, D, DELTA_INF, EPS = 5, 2, 0.1, 2.0
PTS = np.array([[0.1, 0.2], [0.5, 0.5], [0.9, 0.7], [0.3, 0.95]])


def target(x: np.ndarray) -> np.ndarray:
    return np.sin(2 * np.pi * x[:, 0]) * x[:, 1] + 0.5 * x[:, 0] ** 2


def main(path: str) -> None:
    r = pd.read_csv(path).to_numpy()
    r_exact, r_draws = r[0], r[1:]
    lattice = bernstein_lattice(K, D)
    values = target(lattice)
    exact = bernstein_basis(PTS, K) @ values
    print(f"noise-free approximation, max |fdp - diffpriv| = {np.max(np.abs(exact - r_exact)):.3e}")
    l1 = DELTA_INF * lattice.shape[0]
    fast = bernstein_mechanism(values, PTS, k=K, sensitivity=l1, epsilon=EPS, draws=r_draws.shape[0], secure=False,
                               rng=np.random.default_rng(1))
    secure = bernstein_mechanism(values, PTS, k=K, sensitivity=l1, epsilon=EPS, draws=1000, secure=True)
    for j, pt in enumerate(PTS):
        ks_fast = stats.ks_2samp(fast[:, j], r_draws[:, j]).pvalue
        ks_secure = stats.ks_2samp(secure[:, j], r_draws[:, j]).pvalue
        print(f"x = {pt.tolist()}: diffpriv mean {r_draws[:, j].mean():+.4f} sd {r_draws[:, j].std():.4f} | "
              f"fdp fast mean {fast[:, j].mean():+.4f} sd {fast[:, j].std():.4f} KS p = {ks_fast:.3f} | "
              f"fdp OpenDP mean {secure[:, j].mean():+.4f} sd {secure[:, j].std():.4f} KS p = {ks_secure:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
