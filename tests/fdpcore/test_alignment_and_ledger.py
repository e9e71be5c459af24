"""Record-wise preprocessing properties and ledger semantics (atomic charge, exact sums, concurrency)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import midpoint_grid
from fdpcore.data.preprocess import align_long, clip_l2
from fdpcore.errors import BudgetExceededError, LedgerError, ReleaseConflictError
from fdpcore.ledger import Ledger

GRID = midpoint_grid(8)


def _frame(rng: np.random.Generator, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    units, times, values = [], [], []
    for u in range(n_units):
        k = int(rng.integers(1, 7))
        t = rng.uniform(-0.1, 1.1, size=k)
        if rng.uniform() < 0.7:
            t = np.r_[t, 0.0, 1.0]
        units += [u] * t.size
        times += list(t)
        values += list(rng.normal(size=t.size) * 10.0 ** rng.integers(-3, 3))
    return np.array(units), np.array(times), np.array(values)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_units=st.integers(2, 12))
def test_alignment_is_record_wise(seed: int, n_units: int) -> None:
    rng = np.random.default_rng(seed)
    u, t, v = _frame(rng, n_units)
    base = align_long(u, t, v, GRID)
    victim = int(rng.integers(n_units))
    keep = u != victim
    nt = rng.uniform(0, 1, size=4)
    u2 = np.r_[u[keep], [victim] * 6]
    t2 = np.r_[t[keep], nt, 0.0, 1.0]
    v2 = np.r_[v[keep], rng.normal(size=6)]
    order = rng.permutation(u2.size)  # row order must not matter
    changed = align_long(u2[order], t2[order], v2[order], GRID)
    others = np.arange(n_units) != victim
    np.testing.assert_allclose(changed.data_matrix[others], base.data_matrix[others], rtol=1e-12, atol=1e-12)
    assert changed.n_samples == base.n_samples == n_units


def test_alignment_rules_by_example() -> None:
    u = np.array(["a", "a", "a", "a", "b", "c", "c", "d", "d"])
    t = np.array([1.0, 0.0, 1.0, np.nan, 0.5, 0.3, 1.0, 0.0, 1.0])
    v = np.array([2.0, 0.0, 4.0, 5.0, 1.0, 1.0, 1.0, np.inf, 1.0])
    a = align_long(u, t, v, midpoint_grid(2))
    # a: duplicate t=1 averaged to 3, NaN row ignored -> line from 0 to 3
    np.testing.assert_allclose(a.data_matrix[0], [0.75, 2.25])
    # b: one observation; c: does not cover t=0.25; d: inf row leaves one observation -> zero curves
    np.testing.assert_allclose(a.data_matrix[1:], 0.0)
    assert (a.n_samples, a.n_unalignable, a.n_rows_dropped, a.n_duplicates_merged) == (4, 3, 2, 1)


@settings(max_examples=80, deadline=None)
@given(
    data=st.lists(st.lists(st.floats(-1e300, 1e300, allow_nan=False), min_size=8, max_size=8), min_size=1, max_size=6),
    tau=st.floats(1e-6, 1e6),
)
def test_clipping_bounds_norms_and_is_idempotent(data: list[list[float]], tau: float) -> None:
    x = np.array(data) / 1e10  # keep squared norms finite
    clipped, _ = clip_l2(x, GRID.weights, tau)
    assert np.all(GRID.norm(clipped) <= tau)
    again, n_again = clip_l2(clipped, GRID.weights, tau)
    np.testing.assert_array_equal(again, clipped)
    assert n_again == 0


# ----------------------------------------------------------------------------- ledger

KW = dict(delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
          budget_splits=[], provenance={}, internal={})


def test_exact_fraction_accounting(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.sqlite'}")
    led.ensure_dataset("ds", 0.3)
    for i in range(3):
        assert led.reserve(release_id=f"r{i}", dataset_id="ds", epsilon=0.1, **KW).charged
    with pytest.raises(BudgetExceededError, match="Requested: epsilon=1e-09"):
        led.reserve(release_id="r3", dataset_id="ds", epsilon=1e-9, **KW)
    assert led.budgets()[0].remaining[0] == 0.0


def test_release_lifecycle(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.sqlite'}")
    led.ensure_dataset("ds", 1.0)
    first = led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, **KW)
    assert first.charged and not first.published
    resumed = led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, **KW)
    assert not resumed.charged  # a stale reservation of the same id is resumed, not charged twice
    led.mark_noised("r")
    with pytest.raises(ReleaseConflictError, match="drew its noise"):
        led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, **KW)
    led.publish("r", {"manifest": {}})
    again = led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, **KW)
    assert again.published and not again.charged
    with pytest.raises(ReleaseConflictError, match="different config"):
        led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, **{**KW, "config_sha256": "1" * 64})
    with pytest.raises(LedgerError, match="no budget"):
        led.reserve(release_id="x", dataset_id="unknown", epsilon=0.1, **KW)
    assert led.budgets()[0].spent == (0.5, 0.0)
