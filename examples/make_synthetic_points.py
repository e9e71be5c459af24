"""Generate the synthetic point tables of the KDE and ERM examples (fixed seed; run from anywhere).

    python examples/make_synthetic_points.py

Writes into ``examples/data/``:

* ``kde_points_1d.parquet`` — 2,000 people (``person_id``), each with 1 to 4 visits (``visit``);
  ``score`` in the public domain [0, 10] from the [ICLP] §6.2 mixture
  0.6 N(3, 1) + 0.4 N(7, 1) truncated to [0, 10] (MATH.md §13.2 on a x10 scale). A person's visits
  are independent draws from the mixture.
* ``kde_points_2d.parquet`` — 2,000 households (``household_id``), one point (``x1``, ``x2``) each, from
  0.6 N((-3, -3), S) + 0.4 N((3, 2), S), S = [[1, 0.5], [0.5, 1]], truncated to [-5, 5]^2 (MATH.md §13.2).
* ``erm_points.parquet`` — 1,000 customers (``customer_id``), 1 to 3 rows each, covariates ``x1`` and
  ``x2`` uniform on [0, 10]; ``response = sin(2 pi x1 / 10) + N(0, 0.3^2)`` (kernel ridge example) and
  ``label`` in {-1, +1} with P(label = +1) = logistic(4 sin(2 pi x1 / 10) + 2 cos(2 pi x2 / 10))
  (logistic / SVM examples).

The seed is fixed (20240601) so the files are reproducible; they describe no real person.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20240601
OUT = Path(__file__).resolve().parent / "data"


def _truncated(rng: np.random.Generator, draw, accept, size: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = np.empty((0,) + draw(rng, 1).shape[1:])
    while out.shape[0] < size:  # rejection sampling, vectorised per batch
        batch = draw(rng, 2 * size)
        out = np.concatenate([out, batch[accept(batch)]])
    return out[:size]


def kde_1d(rng: np.random.Generator) -> pd.DataFrame:
    visits = rng.integers(1, 5, size=2000)
    person = np.repeat(np.arange(2000), visits)

    def draw(r: np.random.Generator, m: int) -> np.ndarray:
        comp = r.uniform(size=m) < 0.6
        return np.where(comp, r.normal(3.0, 1.0, m), r.normal(7.0, 1.0, m))

    score = _truncated(rng, draw, lambda x: (x >= 0) & (x <= 10), person.shape[0])
    visit = np.concatenate([np.arange(1, v + 1) for v in visits])
    return pd.DataFrame({"person_id": [f"P{i:04d}" for i in person], "visit": visit, "score": score})


def kde_2d(rng: np.random.Generator) -> pd.DataFrame:
    cov = np.array([[1.0, 0.5], [0.5, 1.0]])

    def draw(r: np.random.Generator, m: int) -> np.ndarray:
        comp = (r.uniform(size=m) < 0.6)[:, None]
        return np.where(comp, r.multivariate_normal([-3.0, -3.0], cov, m), r.multivariate_normal([3.0, 2.0], cov, m))

    xy = _truncated(rng, draw, lambda x: np.all(np.abs(x) <= 5, axis=1), 2000)
    return pd.DataFrame({"household_id": [f"H{i:04d}" for i in range(2000)], "x1": xy[:, 0], "x2": xy[:, 1]})


def erm(rng: np.random.Generator) -> pd.DataFrame:
    rows = rng.integers(1, 4, size=1000)
    cust = np.repeat(np.arange(1000), rows)
    m = cust.shape[0]
    x1, x2 = rng.uniform(0, 10, m), rng.uniform(0, 10, m)
    response = np.sin(2 * np.pi * x1 / 10) + rng.normal(0, 0.3, m)
    p = 1 / (1 + np.exp(-(4 * np.sin(2 * np.pi * x1 / 10) + 2 * np.cos(2 * np.pi * x2 / 10))))
    label = np.where(rng.uniform(size=m) < p, 1, -1)
    return pd.DataFrame({"customer_id": [f"C{i:04d}" for i in cust], "x1": x1, "x2": x2, "response": response,
                         "label": label})


def main() -> None:
    rng = np.random.default_rng(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    kde_1d(rng).to_parquet(OUT / "kde_points_1d.parquet", index=False)
    kde_2d(rng).to_parquet(OUT / "kde_points_2d.parquet", index=False)
    erm(rng).to_parquet(OUT / "erm_points.parquet", index=False)


if __name__ == "__main__":
    main()
