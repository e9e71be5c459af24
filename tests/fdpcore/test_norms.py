"""Spectral power kernels and the C^s, Cameron–Martin and 1,C norms (MATH.md §1.5, §2.3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.eigen import weighted_eigenbasis
from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.basis.kernels import kernel_matrix
from fdpcore.basis.norms import cameron_martin_norm, one_c_norm, power_kernel, power_norm, power_trace
from fdpcore.basis.tensor import separable_kernel_matrix, tensor_eigenbasis, tensor_grid
from fdpcore.errors import DomainError

GRID = grid_from_nodes(np.r_[0.0, np.sort(np.random.default_rng(0).uniform(0, 1, 38)), 1.0])
FULL_RANK = [  # kernels whose grid spectrum keeps every positive eigenpair on GRID
    {"name": "exponential", "rho": 0.2},
    {"name": "matern", "nu": 1.5, "rho": 0.1},
    {"name": "brownian"},
]
ALL = [*FULL_RANK, {"name": "gaussian", "length_scale": 0.2}, {"name": "matern", "nu": 2.5, "rho": 0.3}]


def _ids(k: dict) -> str:
    return "-".join(str(v) for v in k.values())


@pytest.mark.parametrize("kernel", FULL_RANK, ids=_ids)
@pytest.mark.parametrize("normalize", [False, True])
def test_power_one_reproduces_the_kernel(kernel: dict, normalize: bool) -> None:
    b = weighted_eigenbasis(kernel, GRID, normalize_trace=normalize)
    assert b.n_dropped <= 1  # brownian: min(0, t) = 0 gives one zero eigenvalue on a grid starting at 0
    c = kernel_matrix(kernel, GRID.grid_points) / b.trace_scale
    err = np.max(np.abs(power_kernel(b, 1.0) - c)) / np.max(np.abs(c))
    assert err < 1e-13


def test_power_kernel_is_spectral_not_pointwise_and_forms_a_semigroup() -> None:
    b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.1}, GRID)
    w = GRID.weights
    c_half, c_one, c_two = (power_kernel(b, s) for s in (0.5, 1.0, 2.0))
    np.testing.assert_allclose(c_half @ (w[:, None] * c_half), c_one, atol=1e-13)  # C^(1/2) W C^(1/2) = C
    np.testing.assert_allclose(c_one @ (w[:, None] * c_one), c_two, atol=1e-13)
    # C^(0) W is the projection P_J onto the kept span, the identity here
    np.testing.assert_allclose(power_kernel(b, 0.0) * w[None, :], np.eye(GRID.size), atol=1e-10)
    # the pointwise square of the kernel is a different (stationary) object
    assert np.max(np.abs(c_two - c_one**2)) > 1e-2 * np.max(np.abs(c_two))
    assert power_trace(b, 2.0) == pytest.approx(float(np.sum(b.eigenvalues**2)), rel=1e-14)
    assert power_trace(b, 1.0) == pytest.approx(float(np.sum(w * np.diag(c_one))), rel=1e-12)


def test_tensor_power_kernel_is_the_kronecker_product() -> None:
    tg = tensor_grid(midpoint_grid(12), midpoint_grid(9))
    kernel = {"name": "exponential", "rho": 0.4}
    tb = tensor_eigenbasis(kernel, tg)
    c = separable_kernel_matrix(kernel, tg.grid_points) / tb.trace_scale
    np.testing.assert_allclose(power_kernel(tb, 1.0), c, atol=1e-13)
    c1 = power_kernel(tb.first, 0.5)
    c2 = power_kernel(tb.second, 0.5)
    np.testing.assert_allclose(power_kernel(tb, 0.5), np.kron(c1, c2), atol=1e-13)
    assert power_trace(tb, 0.5) == pytest.approx(power_trace(tb.first, 0.5) * power_trace(tb.second, 0.5), rel=1e-12)


@pytest.mark.parametrize("kernel", FULL_RANK[:2], ids=_ids)
def test_cameron_martin_norm_is_the_mahalanobis_form(kernel: dict) -> None:
    b = weighted_eigenbasis(kernel, GRID, normalize_trace=False)
    c = kernel_matrix(kernel, GRID.grid_points)
    rng = np.random.default_rng(4)
    h = rng.normal(size=(5, GRID.size))
    maha = np.einsum("ik,ik->i", h, np.linalg.solve(c, h.T).T)
    np.testing.assert_allclose(np.asarray(cameron_martin_norm(h, b)) ** 2, maha, rtol=1e-7)
    # C^{-1} = W Phi Lambda^{-1} Phi^T W
    w = GRID.weights
    inv = (w[:, None] * b.eigenfunctions / b.eigenvalues) @ (b.eigenfunctions.T * w[None, :])
    np.testing.assert_allclose(inv @ c, np.eye(GRID.size), atol=1e-7)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kernel=st.sampled_from(ALL),
    eta=st.floats(0.3, 3.0),
    sparse=st.booleans(),
    scale=st.sampled_from([1e-6, 1.0, 1e6]),
)
def test_norm_inequality_chain(seed: int, kernel: dict, eta: float, sparse: bool, scale: float) -> None:
    """||h||_C <= ||h||_{1,C} <= ||h||_{C^eta} sqrt(tr C^(eta-1)) for h in the kept span (MATH.md §1.5)."""
    b = weighted_eigenbasis(kernel, GRID)
    rng = np.random.default_rng(seed)
    theta = rng.standard_t(2, size=b.n_basis) * scale
    if sparse:  # the Cauchy-Schwarz step is tight when |theta_j| / lambda_j^{eta/2} ~ lambda_j^{(eta-1)/2}
        theta = theta * (rng.uniform(size=b.n_basis) < 0.2)
    h = b.reconstruct(theta)
    cm, oc, pw = cameron_martin_norm(h, b), one_c_norm(h, b), power_norm(h, b, eta)
    bound = pw * np.sqrt(power_trace(b, eta - 1.0))
    assert cm <= oc * (1 + 1e-9) + 1e-300
    assert oc <= bound * (1 + 1e-9) + 1e-300


def test_cauchy_schwarz_step_is_attained() -> None:
    b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.1}, GRID)
    eta = 1.7
    lam = b.eigenvalues
    h = b.reconstruct(lam ** (eta - 0.5))  # |theta_j| lambda_j^{-eta/2} proportional to lambda_j^{(eta-1)/2}
    bound = power_norm(h, b, eta) * np.sqrt(power_trace(b, eta - 1.0))
    assert one_c_norm(h, b) == pytest.approx(bound, rel=1e-9)


def test_exact_values_on_eigenfunctions() -> None:
    b = weighted_eigenbasis({"name": "exponential", "rho": 0.2}, GRID)
    for j in (0, 3, 10):
        phi = b.eigenfunctions[:, j]
        for s in (-1.0, 0.0, 1.0, 2.5):
            assert power_norm(-2.0 * phi, b, s) == pytest.approx(2.0 * b.eigenvalues[j] ** (-s / 2), rel=1e-10)
        assert one_c_norm(phi, b) == pytest.approx(b.eigenvalues[j] ** -0.5, rel=1e-10)
    assert power_norm(np.zeros(GRID.size), b, 1.0) == 0.0
    rows = np.vstack([b.eigenfunctions[:, 0], 3 * b.eigenfunctions[:, 1]])
    np.testing.assert_allclose(one_c_norm(rows, b), [b.eigenvalues[0] ** -0.5, 3 * b.eigenvalues[1] ** -0.5], rtol=1e-10)


def test_norms_are_infinite_outside_the_kept_span() -> None:
    kernel = {"name": "gaussian", "length_scale": 0.2}
    b = weighted_eigenbasis(kernel, GRID)
    assert b.n_dropped > 0
    # a vector W-orthogonal to the kept span: the residual of a random vector after P_J
    rng = np.random.default_rng(8)
    x = rng.normal(size=GRID.size)
    outside = x - b.project(x)
    assert float(GRID.norm(outside)[0]) > 1e-3
    inside = b.reconstruct(rng.normal(size=b.n_basis))
    for norm in (cameron_martin_norm, one_c_norm):
        assert norm(outside, b) == np.inf
        assert norm(inside + 1e-3 * outside, b) == np.inf
        assert np.isfinite(norm(inside, b))
        assert list(np.isfinite(norm(np.vstack([inside, outside, inside]), b))) == [True, False, True]
    assert power_norm(outside, b, -1.0) == np.inf
    # 2-D: a dropped product eigenfunction is outside the kept span
    tb = tensor_eigenbasis(kernel, tensor_grid(midpoint_grid(12), midpoint_grid(9)))
    ii, jj = np.nonzero(~tb.kept)
    assert one_c_norm(tb.eigenfunction(ii[0], jj[0]), tb) == np.inf
    assert one_c_norm(tb.eigenfunction(0, 1), tb) == pytest.approx(tb.eigenvalues[0, 1] ** -0.5, rel=1e-9)


def test_tensor_norms_agree_with_flat_brute_force() -> None:
    tg = tensor_grid(midpoint_grid(12), grid_from_nodes(np.linspace(0, 1, 9)))
    kernel = {"name": "exponential", "rho": 0.4}
    tb = tensor_eigenbasis(kernel, tg, normalize_trace=False)
    c = separable_kernel_matrix(kernel, tg.grid_points)
    f = np.random.default_rng(9).normal(size=(3, *tg.shape))
    flat = tg.flatten(f)
    maha = np.einsum("ik,ik->i", flat, np.linalg.solve(c, flat.T).T)
    np.testing.assert_allclose(np.asarray(cameron_martin_norm(f, tb)) ** 2, maha, rtol=1e-7)
    assert isinstance(one_c_norm(f[0], tb), float)


def test_rejections() -> None:
    b = weighted_eigenbasis({"name": "exponential", "rho": 0.2}, GRID)
    with pytest.raises(DomainError, match="columns"):
        one_c_norm(np.ones(3), b)
    with pytest.raises(DomainError, match="finite"):
        cameron_martin_norm(np.full(GRID.size, np.inf), b)
    with pytest.raises(DomainError, match="s"):
        power_norm(np.ones(GRID.size), b, float("nan"))
    with pytest.raises(DomainError, match="s"):
        power_kernel(b, "x")  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="span_rtol"):
        one_c_norm(np.ones(GRID.size), b, span_rtol=2.0)
    with pytest.raises(DomainError, match="Eigenbasis"):
        one_c_norm(np.ones(GRID.size), "basis")  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="Eigenbasis"):
        power_trace("basis", 1.0)  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="Eigenbasis"):
        power_kernel("basis", 1.0)  # type: ignore[arg-type]
