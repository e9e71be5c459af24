"""Weighted eigenbasis (MATH.md §1.3-1.4) and kernels (§2)."""

from __future__ import annotations

import numpy as np
import pytest

from fdpcore.basis.eigen import weighted_eigenbasis
from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.basis.kernels import decay_rate, kernel_matrix, kernel_spec
from fdpcore.errors import DomainError

KERNELS = [
    {"name": "matern", "nu": 0.5, "rho": 0.1},
    {"name": "matern", "nu": 1.5, "rho": 0.1},
    {"name": "matern", "nu": 2.5, "rho": 0.1},
    {"name": "matern", "nu": 0.8, "rho": 0.2},
    {"name": "gaussian", "length_scale": 0.1},
]
GRIDS = [midpoint_grid(60), grid_from_nodes(np.r_[0, np.sort(np.random.default_rng(0).uniform(0, 1, 50)), 1])]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: str(list(k.values())))
@pytest.mark.parametrize("grid", GRIDS, ids=["midpoint", "unequal-trapezoid"])
def test_eigenfunctions_are_w_orthonormal_and_diagonalise_cw(kernel: dict, grid) -> None:  # noqa: ANN001
    b = weighted_eigenbasis(kernel, grid)
    w = grid.weights
    np.testing.assert_allclose(b.eigenfunctions.T @ (w[:, None] * b.eigenfunctions), np.eye(b.n_basis), atol=1e-10)
    c = kernel_matrix(kernel, grid.grid_points) / b.trace_scale
    np.testing.assert_allclose(c @ (w[:, None] * b.eigenfunctions), b.eigenfunctions * b.eigenvalues, atol=1e-10)
    assert np.all(np.diff(b.eigenvalues) <= 0) and np.all(b.eigenvalues > 1e-12 * b.eigenvalues[0])
    assert b.trace == pytest.approx(1.0, abs=1e-8 * (1 + b.n_dropped))


def test_reconstruction_with_all_eigenpairs() -> None:
    grid = midpoint_grid(40)
    b = weighted_eigenbasis({"name": "matern", "nu": 0.5, "rho": 0.3}, grid)
    assert b.n_basis == 40
    f = np.sin(7 * grid.grid_points) + grid.grid_points**2
    np.testing.assert_allclose(b.reconstruct(b.coefficients(f)), f, atol=1e-10)
    assert np.sum(b.coefficients(f) ** 2) == pytest.approx(float(grid.norm(f)[0] ** 2), rel=1e-12)


def test_brownian_eigenvalues_match_theory() -> None:
    grid = grid_from_nodes(np.linspace(0, 1, 200))
    b = weighted_eigenbasis({"name": "brownian"}, grid, normalize_trace=False)
    j = np.arange(1, 6)
    np.testing.assert_allclose(b.eigenvalues[:5], ((j - 0.5) * np.pi) ** -2, rtol=2e-3)
    assert b.trace == pytest.approx(0.5, rel=1e-2)


def test_eigenbasis_is_cached_per_kernel_and_grid() -> None:
    k = {"name": "matern", "nu": 1.5, "rho": 0.1}
    assert weighted_eigenbasis(k, midpoint_grid(33)) is weighted_eigenbasis(dict(k), midpoint_grid(33))
    assert weighted_eigenbasis(k, midpoint_grid(33)) is not weighted_eigenbasis(k, midpoint_grid(34))


def test_matern_closed_forms_agree_with_bessel_form() -> None:
    s = np.linspace(0, 1, 25)
    for nu in (0.5, 1.5, 2.5):
        closed = kernel_matrix({"name": "matern", "nu": nu, "rho": 0.2}, s)
        bessel = kernel_matrix({"name": "matern", "nu": nu * (1 + 1e-12), "rho": 0.2}, s)
        np.testing.assert_allclose(closed, bessel, atol=1e-9)


def test_decay_rates() -> None:
    assert decay_rate({"name": "matern", "nu": 2.5, "rho": 0.1}) == 6.0
    assert decay_rate({"name": "brownian"}) == 2.0
    lam = weighted_eigenbasis({"name": "gaussian", "length_scale": 0.1}, midpoint_grid(200)).eigenvalues
    assert decay_rate({"name": "gaussian", "length_scale": 0.1}, lam) > 6
    with pytest.raises(DomainError, match="eigenvalues"):
        decay_rate({"name": "gaussian", "length_scale": 0.1})


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"name": "cosine"}, "kernel.name"),
        ({"name": "matern", "nu": 1.5}, "kernel.rho is required"),
        ({"name": "matern", "nu": 1.5, "rho": 0.1, "scale": 2}, "kernel.scale is not a parameter"),
        ({"name": "matern", "nu": 0.0, "rho": 0.1}, "kernel.nu"),
        ({"name": "gaussian", "length_scale": float("nan")}, "kernel.length_scale"),
        ({"nu": 1.5}, "mapping with a 'name'"),
    ],
)
def test_kernel_validation(spec: dict, match: str) -> None:
    with pytest.raises(DomainError, match=match):
        kernel_spec(spec)
