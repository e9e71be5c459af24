"""Bingham samplers (MATH.md §10.4) against an independent importance-sampling reference.

Reference: E[z z^T] (vector) or E[V V^T] (matrix) under p ∝ exp(tr(V^T A V)) w.r.t. the uniform
law, estimated by self-normalised importance sampling from uniform (Haar) proposals — a
computation that shares no code with the samplers. Seeds are fixed, so the tests are
deterministic; tolerances are several Monte Carlo standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from fdpcore.errors import DomainError
from fdpcore.noise.bingham import (
    BinghamChains,
    acg_envelope_b,
    haar_stiefel,
    hoff_scan,
    sample_matrix_bingham,
    sample_vector_bingham,
)


def _rotated(eigenvalues: list[float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = len(eigenvalues)
    r, _ = np.linalg.qr(rng.standard_normal((q, q)))
    return r @ np.diag(eigenvalues) @ r.T


def _reference_projection(a: np.ndarray, k: int, n: int = 200_000, seed: int = 99) -> np.ndarray:
    """E[V V^T] by importance sampling with Haar proposals (independent of fdpcore)."""
    rng = np.random.default_rng(seed)
    m = a.shape[0]
    q, _ = np.linalg.qr(rng.standard_normal((n, m, k)))
    logw = np.einsum("nik,ij,njk->n", q, a, q)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    return np.einsum("n,nik,njk->ij", w, q, q)


def _mean_projection(v: np.ndarray) -> np.ndarray:
    return np.einsum("nik,njk->ij", v, v) / v.shape[0]


VECTOR_CASES = {
    "q4-anisotropic": [3.0, 1.0, 0.0, -4.0],  # a > 0, -kq <= a <= 0 and a < -kq all occur in the scan
    "q3-concentrated": [6.0, 0.0, -1.0],
    "q5-negative": [0.0, -0.5, -6.0, -8.0, -10.0],
}


@pytest.mark.parametrize("case", sorted(VECTOR_CASES))
def test_acg_rejection_matches_importance_sampling(case: str) -> None:
    a = _rotated(VECTOR_CASES[case], seed=1)
    ref = _reference_projection(a, 1)
    z = sample_vector_bingham(a, np.random.default_rng(2), size=100_000)
    assert np.allclose(np.linalg.norm(z, axis=1), 1.0)
    assert np.abs(z.T @ z / z.shape[0] - ref).max() < 0.008


def test_acg_single_draw_path_matches_stack_path_in_law() -> None:
    a = _rotated(VECTOR_CASES["q4-anisotropic"], seed=1)
    rng = np.random.default_rng(3)
    z = np.array([sample_vector_bingham(a, rng) for _ in range(2_000)])
    assert np.abs(z.T @ z / z.shape[0] - _reference_projection(a, 1)).max() < 0.045


@pytest.mark.parametrize("case", sorted(VECTOR_CASES))
def test_hoff_scan_leaves_the_law_invariant_and_converges(case: str) -> None:
    a = _rotated(VECTOR_CASES[case], seed=1)
    ref = _reference_projection(a, 1)
    rng = np.random.default_rng(4)
    n = 40_000
    stack = np.broadcast_to(a, (n, *a.shape))
    # invariance: exact draws stay exact after one scan
    z = hoff_scan(stack, sample_vector_bingham(a, rng, size=n), rng)
    assert np.abs(z.T @ z / n - ref).max() < 0.012
    # convergence from a fixed, far-away start
    z = np.tile(np.eye(a.shape[0])[-1], (n, 1))
    for _ in range(15):
        z = hoff_scan(stack, z, rng)
    assert np.abs(z.T @ z / n - ref).max() < 0.012


def test_q2_circle_draw_matches_quadrature() -> None:
    a = np.array([[1.5, 0.7], [0.7, -0.5]])

    def moment(f):  # noqa: ANN001, ANN202
        dens = lambda w: np.exp(np.array([np.cos(w), np.sin(w)]) @ a @ np.array([np.cos(w), np.sin(w)]))  # noqa: E731
        return integrate.quad(lambda w: f(w) * dens(w), 0, 2 * np.pi)[0] / integrate.quad(dens, 0, 2 * np.pi)[0]

    ref = np.array([[moment(lambda w: np.cos(w) ** 2), moment(lambda w: np.cos(w) * np.sin(w))],
                    [moment(lambda w: np.cos(w) * np.sin(w)), moment(lambda w: np.sin(w) ** 2)]])
    rng = np.random.default_rng(5)
    z = sample_vector_bingham(a, rng, size=100_000)
    assert np.abs(z.T @ z / z.shape[0] - ref).max() < 0.006
    # Hoff's constant is invalid for q = 2: the scan must fall back to the exact circle draw
    zh = hoff_scan(np.broadcast_to(a, (100_000, 2, 2)), np.tile([1.0, 0.0], (100_000, 1)), rng)
    assert np.abs(zh.T @ zh / zh.shape[0] - ref).max() < 0.006
    # both half-circles are visited (the fair sign of the angle shift)
    assert 0.45 < float(np.mean(z[:, 0] > 0)) < 0.55


@pytest.mark.parametrize("method", ["acg", "hoff"])
@pytest.mark.parametrize(("m", "k", "eigs"), [(5, 2, [4.0, 2.0, 1.0, 0.0, -3.0]), (3, 2, [2.0, 0.5, -1.0])])
def test_matrix_gibbs_matches_importance_sampling(method: str, m: int, k: int, eigs: list[float]) -> None:
    # (3, 2) makes every column conditional a circle (q = m - k + 1 = 2)
    a = _rotated(eigs, seed=7)
    ref = _reference_projection(a, k)
    v = sample_matrix_bingham(a, k, np.random.default_rng(8), n_sweeps=20, n_chains=10_000, method=method)
    assert np.allclose(np.einsum("nik,nil->nkl", v, v), np.eye(k), atol=1e-10)
    assert np.abs(_mean_projection(v) - ref).max() < 0.018


def test_matrix_gibbs_is_rotation_equivariant_and_shift_invariant() -> None:
    a = _rotated([4.0, 2.0, 1.0, 0.0, -3.0], seed=7)
    r, _ = np.linalg.qr(np.random.default_rng(10).standard_normal((5, 5)))
    base = _mean_projection(sample_matrix_bingham(a, 2, np.random.default_rng(11), n_sweeps=15, n_chains=8_000))
    rotated = _mean_projection(sample_matrix_bingham(r @ a @ r.T, 2, np.random.default_rng(12), n_sweeps=15,
                                                     n_chains=8_000))
    shifted = _mean_projection(sample_matrix_bingham(a + 7.0 * np.eye(5), 2, np.random.default_rng(13), n_sweeps=15,
                                                     n_chains=8_000))
    assert np.abs(rotated - r @ base @ r.T).max() < 0.03
    assert np.abs(shifted - base).max() < 0.03
    # a real effect is detectable at this tolerance: the flipped law differs
    flipped = _mean_projection(sample_matrix_bingham(-a, 2, np.random.default_rng(14), n_sweeps=15, n_chains=8_000))
    assert np.abs(flipped - base).max() > 0.1


def test_k1_is_one_exact_draw_without_a_chain() -> None:
    a = _rotated([5.0, 1.0, 0.0, 0.0, -2.0], seed=3)
    v = sample_matrix_bingham(a, 1, np.random.default_rng(15), n_sweeps=0, n_chains=50_000)
    assert v.shape == (50_000, 5, 1)
    assert np.abs(_mean_projection(v) - _reference_projection(a, 1)).max() < 0.01


def test_uniform_law_and_haar_start() -> None:
    v = haar_stiefel(6, 2, np.random.default_rng(16), n_chains=40_000)
    assert np.abs(_mean_projection(v) - np.eye(6) / 3).max() < 0.01
    u = sample_matrix_bingham(np.zeros((6, 6)), 2, np.random.default_rng(17), n_sweeps=3, n_chains=40_000)
    assert np.abs(_mean_projection(u) - np.eye(6) / 3).max() < 0.01


def test_frames_stay_orthonormal_over_long_runs() -> None:
    a = _rotated(list(np.linspace(20, -20, 12)), seed=5)
    chains = BinghamChains.start(a, 3, np.random.default_rng(18), n_chains=4).run(500, np.random.default_rng(19))
    q = chains.frames
    assert np.abs(np.einsum("bji,bjk->bik", q, q) - np.eye(12)).max() < 1e-12


def test_acg_envelope_parameter_solves_its_equation_and_bounds_the_target() -> None:
    rng = np.random.default_rng(20)
    lam = np.sort(rng.exponential(5.0, size=(50, 9)), axis=1)
    lt = lam[:, -1:] - lam  # shifted spectra, minimum 0
    b = acg_envelope_b(lt)
    assert np.all((b >= 1.0) & (b <= 9.0))
    assert np.allclose(np.sum(1.0 / (b[:, None] + 2 * lt), axis=1), 1.0, atol=1e-9)
    # truncated Newton (as the samplers use it) stays at or below the root, hence valid
    b3 = acg_envelope_b(lt, steps=3)
    assert np.all((b3 >= 1.0) & (b3 <= b + 1e-12)) and np.all(b3 > 0.9 * b)
    # the envelope inequality e^{-y} <= (q/b)^{q/2} e^{-(q-b)/2} (1 + 2y/b)^{-q/2} holds for all y >= 0
    y = np.linspace(0, 200, 4001)
    q = 9
    lhs = -y[None, :]
    rhs = (q / 2) * np.log(q / b[:, None]) - (q - b[:, None]) / 2 - (q / 2) * np.log1p(2 * y[None, :] / b[:, None])
    assert np.all(lhs <= rhs + 1e-12)
    # and it is tight: attained at y = (q - b)/2
    ystar = (q - b) / 2
    gap = (q / 2) * np.log(q / b) - (q - b) / 2 - (q / 2) * np.log1p(2 * ystar / b) + ystar
    assert np.allclose(gap, 0.0, atol=1e-12)


@pytest.mark.parametrize(
    ("a", "k", "match"),
    [
        (np.eye(4), 4, r"k \(4\) must be < m \(4\)"),
        (np.eye(4), 5, r"k \(5\) must be < m \(4\)"),
        (np.eye(4), 0, r"k \(0\) must be an integer >= 1"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), 1, "must be symmetric"),
        (np.full((3, 3), np.nan), 1, "only finite values"),
        (np.ones(3), 1, "must be a square matrix"),
    ],
)
def test_bad_inputs_are_rejected(a: np.ndarray, k: int, match: str) -> None:
    with pytest.raises(DomainError, match=match):
        sample_matrix_bingham(a, k, np.random.default_rng(0), n_sweeps=1)


def test_bad_method_and_sweeps_are_rejected() -> None:
    with pytest.raises(DomainError, match="method"):
        sample_matrix_bingham(np.eye(4), 2, np.random.default_rng(0), n_sweeps=1, method="metropolis")
    with pytest.raises(DomainError, match=r"n_sweeps \(-1\)"):
        sample_matrix_bingham(np.eye(4), 2, np.random.default_rng(0), n_sweeps=-1)
    with pytest.raises(DomainError, match=r"z \(shape"):
        hoff_scan(np.eye(4), np.ones(3), np.random.default_rng(0))
