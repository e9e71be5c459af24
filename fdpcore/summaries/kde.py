"""Kernel density curves and surfaces from tables of points (MATH.md §8), and the point-release plan.

Points live in a public box mapped affinely onto ``[0, 1]^d`` (``d`` = 1 or 2, done by the reader
:mod:`fdpcore.io.points`). The release is a function on a public grid (1-D, or a 2-D tensor grid
with a separable kernel, MATH.md §1.6), noised on the kept eigenbasis of a public kernel in
*whitened* coordinates ``z_j = theta_j / sqrt(lambda_j)``:

* **ICLP-QR KDE** (§8.1, pure ``epsilon``-DP): points snapped to their nearest grid node
  (record-wise), estimator ``theta_j = kappa/n lambda_j^eta sum_i phi_j(x_i)`` with the spectral
  power kernel, exact grid sensitivity ``kappa/n max_{k,l} sum_j lambda_j^(eta-1/2) |phi_j(t_k) -
  phi_j(t_l)|`` (a finite maximum), Laplace noise on ``z`` (OpenDP).
* **Hall et al. GP KDE** (§8.2, ``(epsilon, delta)``-DP): the Gaussian KDE evaluated on the grid
  (no snapping), RKHS sensitivity with the exact compact-domain factor, Gaussian-process noise
  ``sigma GP(0, K)`` (OpenDP Gaussian on ``z``).

**Privacy unit.** A table may hold several points per unit. Each unit contributes the *average*
of its points' contributions (weights ``1/m_u``, :func:`unit_point_weights`); the sensitivities
are unchanged, because each is the supremum of a convex function of the pair of contributions and
averages are convex combinations, so the supremum over averages is attained at single points
(``docs/proofs/preprocess.points.unit_average@1.md``).

:class:`PointSpace`, :class:`PointPlan` and :func:`draw_point_release` are shared with
:mod:`fdpcore.summaries.erm` (RKHS ERM releases a function on the same kind of grid and noise).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fdpcore import _validate
from fdpcore._typing import AnyArray, ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import DEFAULT_RTOL, weighted_eigenbasis
from fdpcore.basis.grids import Grid
from fdpcore.basis.norms import _kept_spectrum
from fdpcore.basis.tensor import separable_kernel, tensor_eigenbasis, tensor_grid
from fdpcore.errors import DomainError, InternalError, PrivacyParameterError
from fdpcore.noise.gaussian import GaussianCalibration, calibrate_gaussian, sample_gaussian_whitened
from fdpcore.noise.iclp import (
    LaplaceCalibration,
    calibrate_iclp,
    sample_laplace_whitened,
    whitened_expected_sq_error,
)
from fdpcore.noise.quantiles import (
    PublicChoice,
    centre_candidates,
    choice_epsilon,
    choice_splits,
    dp_quantile,
    epsilon_after_choices,
    equal_parts,
    one_draw_with_auto,
    rank_equivalent,
    tau_candidates,
)

__all__ = [
    "BANDWIDTH_AUTO_FORMULA",
    "DEFAULT_BANDWIDTH_SHARE",
    "KDE_KERNELS",
    "BandwidthChoice",
    "bandwidth_candidates",
    "choose_kde_bandwidth",
    "draw_kde_quartiles",
    "kde_auto_bandwidth",
    "kde_bandwidth_choice",
    "kde_bandwidth_risk",
    "quartile_sigmas",
    "unit_mean_points",
    "PointPlan",
    "PointSpace",
    "draw_point_release",
    "hall_kde_paper_sensitivity",
    "hall_kde_sensitivity",
    "hall_kde_values",
    "kde_bandwidth",
    "kde_reference_bandwidth",
    "kde_iclp_coefficients",
    "kde_iclp_cs_sensitivity",
    "kde_iclp_paper_sensitivity",
    "kde_iclp_sensitivity",
    "kde_normaliser",
    "plan_kde_release",
    "point_space",
    "release_kde",
    "summarise_kde",
    "unit_point_weights",
]

#: Kernel families of the KDE noise kernel ``c_h(x, y) = k((x - y)/h)`` (separable in 2-D).
KDE_KERNELS = ("gaussian", "exponential")

#: Formula of ``bandwidth: auto`` (:func:`kde_bandwidth_choice`, :func:`choose_kde_bandwidth`).
BANDWIDTH_AUTO_FORMULA = "tuning.kde.bandwidth_auto@1"
#: Default share of ``privacy.epsilon`` spent on ``bandwidth: auto`` (10 %, as ``tau: auto``).
DEFAULT_BANDWIDTH_SHARE = 0.1
#: Evenly spaced public candidates of the DP quartiles on ``[0, 1]`` (spacing 1/200).
BANDWIDTH_QUANTILE_CANDIDATES = 201
#: The two quantile levels drawn per coordinate (their distance is the interquartile range).
BANDWIDTH_LEVELS = (0.25, 0.75)
#: Interquartile range of a normal distribution in standard deviations (``2 x 0.6745``).
IQR_PER_SD = 1.349
#: Public floor of each ``sigma_j``, in quartile-candidate spacings (0.01 of the unit range).
SIGMA_FLOOR_STEPS = 2
#: Public cap of each ``sigma_j``: the a-priori scale of ``normal_reference`` (1/6 of the unit range).
SIGMA_CAP = 1.0 / 6.0
#: Silverman's robust factor 0.9 / 1.06 on the normal-reference scale (:func:`quartile_sigmas`).
SIGMA_ROBUST = 0.9 / 1.06
#: Half-width of the uniform dither added to each unit's mean coordinate, in quartile-candidate spacings.
QUARTILE_DITHER_STEPS = 2
#: Candidate bandwidths per decade of the public geometric grid the risk is minimised over.
BANDWIDTH_PER_DECADE = 20


# ---------------------------------------------------------------------------------------------
# The public space: kept eigenpairs of a kernel on a 1-D grid or a 2-D tensor grid, flattened
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PointSpace:
    """Kept eigenpairs of a public kernel on a public grid, flattened over the grid nodes.

    For a 2-D tensor grid the nodes are in row-major order (index ``a K2 + b``) and the kept
    product eigenfunctions ``phi_i(s_a) phi_j(u_b)`` are the columns (MATH.md §1.6).

    Attributes:
        axes: the 1-D grid of each coordinate (one or two), all on ``[0, 1]``.
        kernel: the kernel mapping (a separable mapping in 2-D).
        eigenvalues: kept ``lambda_j`` (``J``).
        eigenfunctions: ``Phi`` (``K x J``) at the flattened nodes, W-orthonormal.
        weights: quadrature weights at the flattened nodes (``K``).
    """

    axes: tuple[Grid, ...]
    kernel: dict[str, Any]
    eigenvalues: NDArrayFloat
    eigenfunctions: NDArrayFloat
    weights: NDArrayFloat

    @property
    def dim(self) -> int:
        """Number of coordinates ``d``."""
        return len(self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of a field on the grid: ``(K,)`` or ``(K1, K2)``."""
        return tuple(g.size for g in self.axes)

    @property
    def size(self) -> int:
        """Number of nodes ``K``."""
        return int(self.weights.shape[0])

    @property
    def n_basis(self) -> int:
        """Number of kept eigenpairs ``J``."""
        return int(self.eigenvalues.shape[0])

    @property
    def nodes(self) -> NDArrayFloat:
        """The ``K x d`` node coordinates (row-major for 2-D)."""
        mesh = np.meshgrid(*(g.grid_points for g in self.axes), indexing="ij")
        return np.column_stack([m.ravel() for m in mesh])

    @property
    def recolour(self) -> NDArrayFloat:
        """``R = diag(sqrt(lambda)) Phi^T`` (``J x K``): whitened coordinates to grid values."""
        return np.sqrt(self.eigenvalues)[:, None] * self.eigenfunctions.T

    def coefficients(self, values: ArrayLike) -> NDArrayFloat:
        """``theta = Phi^T W f`` for grid values ``f`` (``(..., K)`` -> ``(..., J)``)."""
        return (np.asarray(values, dtype=np.float64) * self.weights) @ self.eigenfunctions

    def snap(self, points: ArrayLike) -> AnyArray:
        """Index of the nearest grid node of each point (record-wise, privacy-neutral; MATH.md §1.7, §8.1).

        >>> from fdpcore.basis.grids import midpoint_grid
        >>> point_space({"name": "gaussian", "length_scale": 0.2}, [midpoint_grid(4)]).snap([[0.0], [0.3], [1.0]]).tolist()
        [0, 1, 3]
        """
        x = _unit_points(points, self.dim)
        flat = np.zeros(x.shape[0], dtype=np.int64)
        for axis, g in enumerate(self.axes):  # d <= 2 axes, each vectorised over points
            t = g.grid_points
            idx = np.searchsorted((t[1:] + t[:-1]) / 2.0, x[:, axis], side="left")
            flat = flat * g.size + idx
        return flat


def point_space(
    kernel: Mapping[str, object], axes: Sequence[Grid], *, rtol: float = DEFAULT_RTOL
) -> PointSpace:
    """The kept (unnormalised) eigenbasis of ``kernel`` on one grid or on the tensor product of two.

    The kernel is *not* trace-normalised: the KDE noise kernel is ``c_h`` itself (MATH.md §8),
    and Hall et al.'s GP is ``GP(0, K)`` with the unnormalised Gaussian ``K`` (§8.2). In 2-D a
    single 1-D mapping means the product kernel (Gaussian: Euclidean; exponential: l1 distance).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "exponential", "rho": 0.3}, [midpoint_grid(6), midpoint_grid(5)])
    >>> s.shape, s.eigenfunctions.shape[0]
    ((6, 5), 30)
    """
    grids = tuple(axes)
    if len(grids) not in (1, 2) or not all(isinstance(g, Grid) for g in grids):
        raise DomainError(f"axes ({len(grids)} grids) must be one or two fdpcore.basis.grids.Grid objects")
    for g in grids:
        if g.domain_range != (0.0, 1.0):
            raise DomainError(f"grid domain ({list(g.domain_range)}) must be [0, 1]: points are mapped onto the unit box")
    if len(grids) == 1:
        basis = weighted_eigenbasis(kernel, grids[0], normalize_trace=False, rtol=rtol)
        spec: dict[str, Any] = dict(basis.kernel.as_dict())
        lam, phi = basis.eigenvalues, basis.eigenfunctions
        weights = grids[0].weights
    else:
        tb = tensor_eigenbasis(kernel, tensor_grid(grids[0], grids[1]), normalize_trace=False, rtol=rtol)
        spec = separable_kernel(kernel).as_dict()
        lam, phi = _kept_spectrum(tb)
        weights = tb.grid.flat_weights
    return PointSpace(grids, spec, np.asarray(lam, dtype=np.float64), np.asarray(phi, dtype=np.float64),
                      np.asarray(weights, dtype=np.float64))


def _unit_points(points: ArrayLike, dim: int) -> NDArrayFloat:
    x = np.asarray(points, dtype=np.float64)
    if x.ndim == 1 and dim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != dim:
        raise DomainError(f"points (shape {x.shape}) must be an m x {dim} array")
    if not np.all(np.isfinite(x)):
        raise DomainError("points must contain only finite values")
    if np.any(x < 0.0) or np.any(x > 1.0):
        raise DomainError("points must lie in the unit box [0, 1]^d (map the public domain first)")
    return x


def unit_point_weights(unit_codes: ArrayLike) -> tuple[int, NDArrayFloat]:
    """Per-unit averaging: ``(n, w)`` with ``n`` units and weight ``w_i = 1 / m_u(i)`` for each point (formula ``preprocess.points.unit_average@1``).

    .. math:: g_u = \\frac1{m_u}\\sum_{i\\in u} g(x_i),\\qquad \\hat f = \\frac1n\\sum_u g_u

    A unit with ``m_u`` points contributes the average of their contributions, so every unit
    carries total weight 1 and ``n`` (the number of units) is the replace-one ``n``. Codes are any
    integer labels; units are the distinct codes.

    >>> n, w = unit_point_weights([7, 7, 3, 7])
    >>> n, w.tolist()
    (2, [0.3333333333333333, 0.3333333333333333, 1.0, 0.3333333333333333])
    """
    codes = np.asarray(unit_codes)
    if codes.ndim != 1 or codes.shape[0] == 0:
        raise DomainError(f"unit_codes (shape {codes.shape}) must be a non-empty 1-D array")
    _, inverse, counts = np.unique(codes, return_inverse=True, return_counts=True)
    return int(counts.shape[0]), 1.0 / counts[inverse].astype(np.float64)


# ---------------------------------------------------------------------------------------------
# ICLP-QR KDE (MATH.md §8.1)
# ---------------------------------------------------------------------------------------------


def kde_bandwidth(n: int, dim: int) -> float:
    """Privacy-safe bandwidth ``h = n^(-1/(4+d))`` on the unit-scaled domain (formula ``tuning.kde.bandwidth@1``, MATH.md §5.1, §8).

    .. math:: h = n^{-1/(4+d)}

    Depends only on the public ``n`` (replace-one adjacency) and ``d``; [ICLP-v2] prints the
    exponent with the wrong sign (MATH.md §14 item 10).

    >>> round(kde_bandwidth(2000, 1), 3), round(kde_bandwidth(2000, 2), 3)
    (0.219, 0.282)
    """
    n = _validate.positive_int("n", n)
    if dim not in (1, 2):
        raise DomainError(f"dim ({dim!r}) must be 1 or 2")
    return float(n ** (-1.0 / (4.0 + dim)))


#: Bandwidth rules by name: the paper's rate (``n_rule``) and the normal reference (``normal_reference``).
KDE_BANDWIDTH_RULES = {"n_rule": "tuning.kde.bandwidth@1", "normal_reference": "tuning.kde.normal_reference@1"}


def kde_reference_bandwidth(n: int, dim: int) -> float:
    r"""Normal-reference bandwidth on the unit-scaled domain (formula ``tuning.kde.normal_reference@1``).

    .. math:: h = c_d\,\sigma\,n^{-1/(4+d)},\qquad \sigma = 1/6,\quad c_1 = 1.06,\ c_2 = 1

    Silverman's (``d = 1``) and Scott's (``d = 2``) rules with the public prior that the points fill their
    public range like a normal distribution within +-3 standard deviations (``sigma = 1/6`` of the unit range).
    The paper's ``n^(-1/(4+d))`` (:func:`kde_bandwidth`) has the right rate but a constant about 6 times larger:
    it smooths over a fifth of the range at ``n = 2000``, a bias that no budget removes. Public inputs only (``n``,
    ``d``).

    >>> round(kde_reference_bandwidth(2000, 1), 4), round(kde_reference_bandwidth(2000, 2), 4)
    (0.0386, 0.047)
    """
    h = kde_bandwidth(n, dim)
    return float((1.06 if dim == 1 else 1.0) / 6.0 * h)


def _eta(eta: float) -> float:
    e = _validate.positive_finite("eta", eta)
    if not e > 0.5:
        raise PrivacyParameterError(f"eta ({eta!r}) must be > 0.5")
    return e


def kde_normaliser(space: PointSpace, eta: float) -> float:
    """Data-independent constant ``kappa = 1 / max_y sum_k w_k c_{h,eta}(t_k, y)`` (formula ``estimator.kde.normaliser@1``, MATH.md §8.1).

    .. math:: \\kappa = \\Big(\\max_{y\\in\\text{grid}}\\sum_k w_k\\,c_{h,\\eta}(t_k,y)\\Big)^{-1},
              \\qquad c_{h,\\eta}=\\Phi\\Lambda^\\eta\\Phi^\\top

    Every single-point bump ``kappa c_{h,eta}(., y)`` then has integral at most 1, with equality
    at the worst node, so the estimate is on the density scale for any kernel and ``eta``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "gaussian", "length_scale": 0.1}, [midpoint_grid(100)])
    >>> 0.9 < kde_normaliser(s, 1.0) * 0.1 * math.sqrt(2 * math.pi) < 1.1
    True
    """
    e = _eta(eta)
    lam, phi = space.eigenvalues, space.eigenfunctions
    mass = phi @ (lam**e * (space.weights @ phi))
    top = float(mass.max())
    if not top > 0:
        raise DomainError("the power kernel has no positive mass on this grid; choose another bandwidth or eta")
    return 1.0 / top


def kde_iclp_coefficients(
    node_index: ArrayLike, point_weights: ArrayLike, space: PointSpace, *, eta: float, kappa: float, n: int
) -> NDArrayFloat:
    """Eigen-coefficients of the spectral ICLP-QR KDE of snapped points (formula ``estimator.kde.iclp_qr@1``).

    .. math:: \\theta_j(\\hat f)=\\frac{\\kappa}{n}\\lambda_j^{\\eta}\\sum_u\\frac1{m_u}\\sum_{i\\in u}\\phi_j(x_i)

    ``node_index`` are the snapped nodes (:meth:`PointSpace.snap`), ``point_weights`` the
    per-unit averaging weights (:func:`unit_point_weights`); the sum over points is a weighted
    histogram on the nodes.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "gaussian", "length_scale": 0.2}, [midpoint_grid(10)])
    >>> th = kde_iclp_coefficients([2, 2], [1.0, 1.0], s, eta=1.0, kappa=1.0, n=2)
    >>> bool(np.allclose(s.eigenfunctions @ th, (s.eigenfunctions * s.eigenvalues) @ s.eigenfunctions[2]))
    True
    """
    e = _eta(eta)
    n = _validate.positive_int("n", n)
    idx = np.asarray(node_index, dtype=np.int64)
    w = np.asarray(point_weights, dtype=np.float64)
    if idx.shape != w.shape or idx.ndim != 1:
        raise DomainError("node_index and point_weights must be 1-D arrays of the same length")
    if np.any(idx < 0) or np.any(idx >= space.size):
        raise DomainError(f"node_index must lie in [0, {space.size})")
    hist = np.bincount(idx, weights=w, minlength=space.size)
    return np.asarray(kappa / n * space.eigenvalues**e * (hist @ space.eigenfunctions), dtype=np.float64)


def kde_iclp_sensitivity(space: PointSpace, *, eta: float, kappa: float, n: int) -> tuple[float, tuple[int, int]]:
    """Exact ``1,C`` sensitivity of the snapped ICLP-QR KDE and a worst pair of nodes (formula ``sensitivity.kde.iclp_qr.exact_grid@1``).

    .. math:: \\Delta_{\\rm KDE}=\\frac{\\kappa}{n}\\max_{k,l}\\sum_{j\\in\\mathcal J}
              \\lambda_j^{\\eta-1/2}\\,|\\phi_j(t_k)-\\phi_j(t_l)|

    A replaced unit moves ``theta_j`` by ``kappa/n lambda_j^eta (phi_j(x) - phi_j(x'))`` and the
    ``1,C`` norm divides by ``sqrt(lambda_j)``; snapped points range over the nodes, so the
    supremum is this finite maximum, attained by a unit at ``t_k`` replaced by one at ``t_l``.
    Cost ``O(K^2 J)``, in blocks of rows.

    >>> from fdpcore.basis.grids import grid_from_nodes
    >>> s = point_space({"name": "gaussian", "length_scale": 0.05}, [grid_from_nodes(np.linspace(0, 1, 201))])
    >>> round(kde_iclp_sensitivity(s, eta=1.25, kappa=1.0, n=1)[0], 2)  # MATH.md §8.1: 2.60 (units kappa/n)
    2.6
    """
    e = _eta(eta)
    n = _validate.positive_int("n", n)
    k = _validate.positive_finite("kappa", kappa)
    a = space.eigenvalues ** (e - 0.5)
    phi = space.eigenfunctions
    size, n_basis = phi.shape
    block = max(1, int(4_000_000 // max(1, size * n_basis)))
    best, pair = -1.0, (0, 0)
    for start in range(0, size, block):  # public computation on the grid, blocked for memory
        rows = phi[start:start + block]
        dist = np.abs(rows[:, None, :] - phi[None, :, :]) @ a
        flat = int(np.argmax(dist))
        if dist.flat[flat] > best:
            best = float(dist.flat[flat])
            pair = (start + flat // size, flat % size)
    return k / n * best, pair


def kde_iclp_cs_sensitivity(space: PointSpace, *, eta: float, kappa: float, n: int) -> float:
    """Cauchy-Schwarz upper bound on the ICLP-QR KDE sensitivity (formula ``sensitivity.kde.iclp_qr.cs_upper@1``, MATH.md §8.1).

    .. math:: \\Delta_{\\rm KDE}\\le\\frac{2\\kappa}{n}\\sqrt{\\mathrm{tr}(C_h^{\\eta-1})}\\sqrt{\\max_k c_{h,\\eta}(t_k,t_k)}

    >>> from fdpcore.basis.grids import grid_from_nodes
    >>> s = point_space({"name": "gaussian", "length_scale": 0.05}, [grid_from_nodes(np.linspace(0, 1, 201))])
    >>> round(kde_iclp_cs_sensitivity(s, eta=1.25, kappa=1.0, n=1), 2)  # MATH.md §8.1: 4.60
    4.6
    """
    e = _eta(eta)
    n = _validate.positive_int("n", n)
    diag = (space.eigenfunctions**2) @ space.eigenvalues**e
    return float(2.0 * kappa / n * math.sqrt(float(np.sum(space.eigenvalues ** (e - 1.0)))) * math.sqrt(float(diag.max())))


def kde_iclp_paper_sensitivity(space: PointSpace, *, eta: float, kappa: float, n: int) -> float:
    """[ICLP-v2] Thm 8's printed bound, ``2 kappa M_K sqrt(tr C^(eta-1)) / n`` (formula ``sensitivity.kde.iclp_qr.paper@1``).

    .. math:: \\Delta^{\\rm paper}=\\frac{2\\kappa M_K}{n}\\sqrt{\\mathrm{tr}(C_h^{\\eta-1})},\\qquad M_K=\\max_{k,l}|c_{h,\\eta}(t_k,t_l)|

    Recorded for comparison only: its last step bounds ``sqrt(2(K(0) - K(.)))`` by ``2 M_K``
    instead of ``2 sqrt(M_K)``, so it is **not** a valid bound when ``M_K < 1`` (MATH.md §14 item 10).
    ``kappa`` replaces the paper's ``1/sqrt(det H)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "gaussian", "length_scale": 0.2}, [midpoint_grid(50)])
    >>> kde_iclp_paper_sensitivity(s, eta=1.25, kappa=1.0, n=10) > 0
    True
    """
    e = _eta(eta)
    n = _validate.positive_int("n", n)
    diag = (space.eigenfunctions**2) @ space.eigenvalues**e  # |c(s,t)| <= sqrt(c(s,s) c(t,t)): the max is on the diagonal
    return float(2.0 * kappa * float(diag.max()) / n * math.sqrt(float(np.sum(space.eigenvalues ** (e - 1.0)))))


# ---------------------------------------------------------------------------------------------
# Hall, Rinaldo & Wasserman GP KDE (MATH.md §8.2)
# ---------------------------------------------------------------------------------------------


def hall_kde_values(
    points: ArrayLike, point_weights: ArrayLike, space: PointSpace, *, bandwidth: float, n: int
) -> NDArrayFloat:
    """The Gaussian KDE on the grid nodes, units averaged (formula ``estimator.kde.hall_gaussian@1``, MATH.md §8.2).

    .. math:: f_D(x)=\\frac{1}{n(2\\pi h^2)^{d/2}}\\sum_u\\frac1{m_u}\\sum_{i\\in u}e^{-\\|x-x_i\\|^2/(2h^2)}

    No snapping. The product form of the Gaussian evaluates a 2-D surface as ``G1^T diag(w) G2``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "gaussian", "length_scale": 0.1}, [midpoint_grid(200)])
    >>> f = hall_kde_values([[0.5]], [1.0], s, bandwidth=0.1, n=1)
    >>> round(float(f @ s.weights), 4)  # integrates to 1 away from the edges
    1.0
    """
    h = _validate.positive_finite("bandwidth", bandwidth, privacy=False)
    n = _validate.positive_int("n", n)
    x = _unit_points(points, space.dim)
    w = np.asarray(point_weights, dtype=np.float64)
    if w.shape != (x.shape[0],):
        raise DomainError("point_weights must have one entry per point")
    bumps = [np.exp(-((g.grid_points[:, None] - x[None, :, axis]) ** 2) / (2.0 * h * h))
             for axis, g in enumerate(space.axes)]
    const = 1.0 / (n * (2.0 * math.pi * h * h) ** (space.dim / 2.0))
    if space.dim == 1:
        return np.asarray(const * (bumps[0] @ w), dtype=np.float64)
    return np.asarray(const * ((bumps[0] * w) @ bumps[1].T).ravel(), dtype=np.float64)


def hall_kde_sensitivity(n: int, *, bandwidth: float, dim: int, diameter: float) -> float:
    """Exact RKHS sensitivity of the Gaussian KDE on a compact domain (formula ``sensitivity.kde.hall.compact_exact@1``, MATH.md §8.2).

    .. math:: \\Delta=\\frac{\\sqrt{2(1-e^{-D^2/(2h^2)})}}{n(2\\pi h^2)^{d/2}}

    ``D`` is the domain's diameter (``1`` for ``[0, 1]``, ``sqrt 2`` for ``[0, 1]^2``); attained by
    two points at distance ``D``.

    >>> round(hall_kde_sensitivity(1, bandwidth=1.0, dim=1, diameter=1.0) * math.sqrt(2 * math.pi), 6)
    0.887096
    """
    n = _validate.positive_int("n", n)
    h = _validate.positive_finite("bandwidth", bandwidth, privacy=False)
    dd = _validate.positive_finite("diameter", diameter, privacy=False)
    return float(math.sqrt(-2.0 * math.expm1(-dd * dd / (2.0 * h * h))) / (n * (2.0 * math.pi * h * h) ** (dim / 2.0)))


def hall_kde_paper_sensitivity(n: int, *, bandwidth: float, dim: int) -> float:
    """[HRW] §4.1's bound ``sqrt 2 / (n (2 pi h^2)^(d/2))`` (formula ``sensitivity.kde.hall.paper@1``).

    .. math:: \\Delta^{\\rm paper}=\\frac{\\sqrt2}{n(2\\pi h^2)^{d/2}}

    >>> round(hall_kde_paper_sensitivity(1, bandwidth=1.0, dim=1) * math.sqrt(2 * math.pi), 6)
    1.414214
    """
    n = _validate.positive_int("n", n)
    h = _validate.positive_finite("bandwidth", bandwidth, privacy=False)
    return float(math.sqrt(2.0) / (n * (2.0 * math.pi * h * h) ** (dim / 2.0)))


# ---------------------------------------------------------------------------------------------
# The point-release plan (shared with fdpcore.summaries.erm): whitened coordinates, noise, recolouring
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PointPlan:
    """Everything that sets the noise of a KDE or ERM release; all of it is public.

    Attributes:
        summary: ``"kde"`` or ``"erm"``.
        mechanism: ``"iclp_qr"``/``"hall_gp"`` (KDE) or ``"iclp"``/``"gp"`` (ERM).
        space: the kept eigenbasis on the grid.
        n: number of privacy units (public under replace-one adjacency).
        epsilon: the guarantee of one draw.
        delta: see ``epsilon``.
        sensitivity: the sensitivity that sets the noise (l1 of ``z`` for Laplace, l2 for Gaussian).
        sensitivity_formula: its formula id.
        paper_sensitivity: the source's bound for the same setting.
        paper_formula: see ``paper_sensitivity``.
        norm: the norm of the sensitivity.
        calibration: Laplace or Gaussian calibration of the whitened noise.
        parameters: public parameters for the manifest (bandwidth, eta, kappa, psi, ...).
        formulas: every formula id the release relies on.
        public_choices: public parameters bought with part of ``epsilon`` (KDE ``bandwidth: auto``), paid first;
            the noise is calibrated with what is left (:attr:`epsilon_mechanism`).
    """

    summary: str
    mechanism: str
    space: PointSpace
    n: int
    epsilon: float
    delta: float
    sensitivity: float
    sensitivity_formula: str
    paper_sensitivity: float
    paper_formula: str
    norm: str
    calibration: LaplaceCalibration | GaussianCalibration
    parameters: dict[str, Any] = field(default_factory=dict)
    formulas: tuple[str, ...] = ()
    public_choices: tuple[PublicChoice, ...] = ()

    @property
    def epsilon_mechanism(self) -> float:
        """Epsilon of the noise itself: ``epsilon`` minus the public choices' splits."""
        return epsilon_after_choices(self.epsilon, self.public_choices) if self.public_choices else self.epsilon

    @property
    def noise(self) -> str:
        """``"gaussian"`` or ``"laplace"``."""
        return "gaussian" if isinstance(self.calibration, GaussianCalibration) else "laplace"

    @property
    def rho(self) -> float | None:
        """ZCDP ``rho`` of a Gaussian plan (plus ``epsilon^2/2`` of each pure-DP public choice), else ``None``."""
        if not isinstance(self.calibration, GaussianCalibration):
            return None
        return self.calibration.rho + sum(c.epsilon**2 / 2.0 for c in self.public_choices)

    @property
    def variance(self) -> float:
        """Variance of each whitened noise coordinate (``2 b^2`` Laplace, ``sigma^2`` Gaussian)."""
        s = self.calibration.scale
        return s * s if self.noise == "gaussian" else 2.0 * s * s

    @property
    def expected_sq_l2_error(self) -> float:
        """``E||noise||_W^2`` of one draw on the unit-scaled grid (formula ``noise.whitened.expected_sq_l2@1``)."""
        return whitened_expected_sq_error(self.space.recolour, self.space.weights, self.variance)

    @property
    def budget_splits(self) -> list[dict[str, float | str]]:
        """The named parts of the cost: the public choices, then the mechanism (they sum exactly to ``(epsilon, delta)``)."""
        return [*choice_splits(self.public_choices),
                {"name": self.summary, "epsilon": self.epsilon_mechanism, "delta": self.delta}]


def _calibrate(sensitivity: float, epsilon: float, delta: float, n_basis: int, *, gaussian: bool,
               calibration: str, secure: bool) -> LaplaceCalibration | GaussianCalibration:
    if gaussian:
        return calibrate_gaussian(sensitivity, epsilon, delta, n_basis=n_basis, calibration=calibration, secure=secure)
    if delta != 0.0:
        raise PrivacyParameterError(f"delta ({delta!r}) must be 0 for a pure-DP (Laplace) mechanism")
    return calibrate_iclp(sensitivity, epsilon, n_basis=n_basis, secure=secure)


def draw_point_release(
    plan: PointPlan, z: ArrayLike, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add the calibrated whitened noise (OpenDP when secure) and recolour to the grid: ``draws x K``.

    Each draw is a separate release costing the plan's ``(epsilon, delta)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_kde_release(midpoint_grid(20), n=10, epsilon=1.0, eta=1.25, secure=False)
    >>> draw_point_release(p, np.zeros(p.space.n_basis), draws=2, rng=np.random.default_rng(0)).shape
    (2, 20)
    """
    zz = np.asarray(z, dtype=np.float64)
    if zz.shape != (plan.space.n_basis,):
        raise DomainError(f"z (shape {zz.shape}) must have one entry per kept eigenpair ({plan.space.n_basis})")
    cal = plan.calibration
    if isinstance(cal, GaussianCalibration):
        noisy = sample_gaussian_whitened(zz, cal, draws=draws, rng=rng)
    else:
        noisy = sample_laplace_whitened(zz, cal, draws=draws, rng=rng)
    return np.asarray(noisy @ plan.space.recolour, dtype=np.float64)


def _grid_sensitivity(space: PointSpace, spec: Mapping[str, object], eta: float) -> float:
    """:func:`kde_iclp_sensitivity` of ``space`` at ``kappa = n = 1``, remembered per public space (exact, not an approximation).

    The exact sensitivity is ``kappa / n`` times this grid maximum, which depends on the grids, the kernel and
    ``eta`` only; ``bandwidth: auto`` prices many bandwidths, and repeated releases on the same grid reuse them.
    """
    return _grid_sensitivity_of(tuple(sorted(spec.items())), float(eta), tuple(space.axes))


@functools.lru_cache(maxsize=256)
def _grid_sensitivity_of(spec: tuple[tuple[str, object], ...], eta: float, axes: tuple[Grid, ...]) -> float:
    # Grid hashes and compares by its exact nodes and weights (as fdpcore.basis.eigen's cache), so equal grids share
    # one entry; point_space of the same kernel and grids is the same space.
    return kde_iclp_sensitivity(point_space(dict(spec), axes), eta=eta, kappa=1.0, n=1)[0]


# ---------------------------------------------------------------------------------------------
# KDE plan, summary and facade
# ---------------------------------------------------------------------------------------------


def plan_kde_release(
    axes: Grid | Sequence[Grid],
    *,
    n: int,
    epsilon: float,
    mechanism: str = "iclp_qr",
    kernel: str = "gaussian",
    bandwidth: float | str | None = None,
    eta: float | None = None,
    delta: float = 0.0,
    calibration: str = "analytic",
    secure: bool = True,
    public_choices: tuple[PublicChoice, ...] | None = None,
    bandwidth_share: float = DEFAULT_BANDWIDTH_SHARE,
) -> PointPlan:
    """Fix the noise of a KDE release from public inputs only (MATH.md §8).

    Args:
        axes: the grid on ``[0, 1]`` (1-D) or the two axis grids of a tensor grid (2-D).
        n: number of privacy units (public).
        epsilon: the guarantee (``delta = 0`` for ``iclp_qr``, ``> 0`` for ``hall_gp``).
        delta: see ``epsilon``.
        mechanism: ``"iclp_qr"`` (§8.1) or ``"hall_gp"`` (§8.2, Gaussian kernel only).
        kernel: ``"gaussian"`` or ``"exponential"`` (length scale = bandwidth; separable in 2-D).
        bandwidth: ``h`` on the unit-scaled domain, or a rule of :data:`KDE_BANDWIDTH_RULES`: ``"n_rule"``
            (:func:`kde_bandwidth`, the paper's; also ``None``) or ``"normal_reference"`` (:func:`kde_reference_bandwidth`);
            or ``"auto"``: bought with part of ``epsilon`` (``tuning.kde.bandwidth_auto@1``). Its choice is
            ``public_choices`` (one :class:`BandwidthChoice`; default :func:`kde_bandwidth_choice` with
            ``bandwidth_share``): undrawn, the plan is priced at the ``normal_reference`` bandwidth (its cost and
            splits do not depend on ``h``); drawn (:func:`choose_kde_bandwidth`), at the released bandwidth. The
            noise is calibrated with ``epsilon`` minus the split; ``epsilon`` stays the release's total.
        eta: the power of ICLP-QR (required for ``iclp_qr``, unused for ``hall_gp``).
        calibration: ``"analytic"`` or ``"classical"`` Gaussian calibration (``hall_gp``).
        secure: OpenDP samplers (``False``: NumPy, simulations only).
        public_choices: with ``bandwidth="auto"``: its :class:`BandwidthChoice`, undrawn or drawn (see ``bandwidth``).
        bandwidth_share: with ``bandwidth="auto"`` and no ``public_choices``: the share of ``epsilon`` it buys with.

    Privacy assumptions: the domain, grid, kernel, bandwidth (or the rule), ``eta`` and ``n`` are
    public and fixed before seeing the data; one unit's points are averaged (:func:`unit_point_weights`).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_kde_release(midpoint_grid(50), n=400, epsilon=1.0, eta=1.25, secure=False)
    >>> p.sensitivity_formula, round(p.parameters["bandwidth"], 4)
    ('sensitivity.kde.iclp_qr.exact_grid@1', 0.3017)
    """
    grids = (axes,) if isinstance(axes, Grid) else tuple(axes)
    dim = len(grids)
    n = _validate.positive_int("n", n)
    eps = _validate.positive_finite("epsilon", epsilon)
    dl = _validate.delta_value(delta)
    if kernel not in KDE_KERNELS:
        raise DomainError(f"kernel ({kernel!r}) must be one of {list(KDE_KERNELS)}")
    choices: tuple[PublicChoice, ...] = ()
    if bandwidth == "auto":
        choices = (kde_bandwidth_choice(grids, n, eps, bandwidth_share),) if public_choices is None else tuple(public_choices)
        if len(choices) != 1 or not isinstance(choices[0], BandwidthChoice):
            raise DomainError("bandwidth 'auto' needs exactly one BandwidthChoice in public_choices")
        chosen = choices[0]
        h = kde_reference_bandwidth(n, dim) if chosen.value is None else float(chosen.value)
        rule_id: str | None = chosen.formula_id
        eps_noise = epsilon_after_choices(eps, choices)
    else:
        if public_choices:
            raise DomainError("public_choices apply to bandwidth 'auto' only")
        rule = "n_rule" if bandwidth is None else bandwidth if isinstance(bandwidth, str) else None
        if rule is not None and rule not in KDE_BANDWIDTH_RULES:
            raise DomainError(f"bandwidth ({bandwidth!r}) must be a positive number, 'auto' or one of "
                              f"{sorted(KDE_BANDWIDTH_RULES)}")
        h = (kde_bandwidth(n, dim) if rule == "n_rule" else kde_reference_bandwidth(n, dim) if rule is not None
             else _validate.positive_finite("bandwidth", float(bandwidth), privacy=False))  # type: ignore[arg-type]
        rule_id = None if rule is None else KDE_BANDWIDTH_RULES[rule]
        eps_noise = eps
    spec: dict[str, object] = {"name": "gaussian", "length_scale": h} if kernel == "gaussian" else {"name": "exponential", "rho": h}
    space = point_space(spec, grids)
    grid_ids = ["grid.midpoint@1" if g.rule == "midpoint" else "grid.trapezoid@1" for g in grids]
    common = {*grid_ids, "eigen.weighted_kl@1", "preprocess.points.unit_average@1", "noise.whitened.expected_sq_l2@1",
              *(("eigen.tensor_kron@1",) if dim == 2 else ()), *((rule_id,) if rule_id else ()),
              *(("accounting.pure.sequential@1",) if any(not c.a_priori for c in choices) else ())}
    params: dict[str, Any] = {"bandwidth": h, "bandwidth_rule": rule_id or "fixed",
                              "kernel": space.kernel, "dim": dim}
    if mechanism == "iclp_qr":
        if eta is None:
            raise PrivacyParameterError("eta (None) must be given for mechanism 'iclp_qr'")
        e = _eta(eta)
        kappa = kde_normaliser(space, e)
        sens = kappa / n * _grid_sensitivity(space, spec, e)
        paper = kde_iclp_paper_sensitivity(space, eta=e, kappa=kappa, n=n)
        cal = _calibrate(sens, eps_noise, dl, space.n_basis, gaussian=False, calibration=calibration, secure=secure)
        params.update(eta=e, kappa=kappa, snapping="each point to its nearest grid node (record-wise)",
                      cs_upper_bound=kde_iclp_cs_sensitivity(space, eta=e, kappa=kappa, n=n))
        ids = {"estimator.kde.iclp_qr@1", "estimator.kde.normaliser@1", "sensitivity.kde.iclp_qr.exact_grid@1",
               "sensitivity.kde.iclp_qr.paper@1", "sensitivity.kde.iclp_qr.cs_upper@1", "calibration.iclp.laplace_whitened@1",
               "kernel.power_spectral@1"}
        return PointPlan("kde", "iclp_qr", space, n, eps, dl, sens, "sensitivity.kde.iclp_qr.exact_grid@1", paper,
                         "sensitivity.kde.iclp_qr.paper@1", "1,C", cal, params, tuple(sorted(common | ids)), choices)
    if mechanism == "hall_gp":
        if kernel != "gaussian":
            raise DomainError(f"kernel ({kernel!r}) must be 'gaussian' for mechanism 'hall_gp' (MATH.md §8.2)")
        if eta is not None:
            raise DomainError("eta is a parameter of mechanism 'iclp_qr' only")
        if dl == 0.0:
            raise PrivacyParameterError("delta (0.0) must be > 0 for mechanism 'hall_gp' (Gaussian noise)")
        diameter = math.sqrt(dim)
        sens = hall_kde_sensitivity(n, bandwidth=h, dim=dim, diameter=diameter)
        paper = hall_kde_paper_sensitivity(n, bandwidth=h, dim=dim)
        cal = _calibrate(sens, eps_noise, dl, space.n_basis, gaussian=True, calibration=calibration, secure=secure)
        params.update(domain_diameter=diameter, calibration=calibration, rho=cal.rho if isinstance(cal, GaussianCalibration) else None)
        ids = {"estimator.kde.hall_gaussian@1", "sensitivity.kde.hall.compact_exact@1", "sensitivity.kde.hall.paper@1",
               f"calibration.gaussian.{calibration}@1"}
        return PointPlan("kde", "hall_gp", space, n, eps, dl, sens, "sensitivity.kde.hall.compact_exact@1", paper,
                         "sensitivity.kde.hall.paper@1", "RKHS (Cameron-Martin of K)", cal, params, tuple(sorted(common | ids)),
                         choices)
    raise DomainError(f"mechanism ({mechanism!r}) must be 'iclp_qr' or 'hall_gp'")


def summarise_kde(points: ArrayLike, unit_codes: ArrayLike, plan: PointPlan) -> NDArrayFloat:
    """Pre-noise whitened coordinates ``z_j = theta_j / sqrt(lambda_j)`` of the plan's KDE (never publish them).

    ``points`` are in the unit box (``m x d``); ``unit_codes`` give each point's privacy unit.
    For ``hall_gp`` the grid values are projected onto the kept span (MATH.md §1.4; this cannot
    increase the Cameron-Martin norm of a difference).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_kde_release(midpoint_grid(20), n=2, epsilon=1.0, eta=1.25, secure=False)
    >>> summarise_kde([[0.2], [0.8], [0.5]], [0, 1, 1], p).shape == (p.space.n_basis,)
    True
    """
    space = plan.space
    n, w = unit_point_weights(unit_codes)
    x = _unit_points(points, space.dim)
    if x.shape[0] != w.shape[0]:
        raise DomainError("points and unit_codes must have the same length")
    if n != plan.n:
        raise DomainError(f"the table has {n} privacy units but the plan is for n = {plan.n}")
    if plan.mechanism == "iclp_qr":
        theta = kde_iclp_coefficients(space.snap(x), w, space, eta=plan.parameters["eta"],
                                      kappa=plan.parameters["kappa"], n=n)
    elif plan.mechanism == "hall_gp":
        theta = space.coefficients(hall_kde_values(x, w, space, bandwidth=plan.parameters["bandwidth"], n=n))
    else:  # pragma: no cover - plans are built by plan_kde_release
        raise InternalError(f"not a KDE plan: {plan.mechanism!r}")
    return np.asarray(theta / np.sqrt(space.eigenvalues), dtype=np.float64)


def release_kde(
    points: ArrayLike,
    unit_codes: ArrayLike | None = None,
    *,
    axes: Grid | Sequence[Grid],
    epsilon: float,
    mechanism: str = "iclp_qr",
    kernel: str = "gaussian",
    bandwidth: float | str | None = None,
    eta: float | None = None,
    delta: float = 0.0,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
    bandwidth_share: float = DEFAULT_BANDWIDTH_SHARE,
) -> tuple[NDArrayFloat, PointPlan]:
    """Release private density curves/surfaces of points in ``[0, 1]^d`` (the Python facade).

    Returns ``(values, plan)``: ``values`` is ``draws x K`` on the flattened grid. ``unit_codes``
    defaults to one unit per point.

    ``bandwidth="auto"`` (``tuning.kde.bandwidth_auto@1``) buys the bandwidth with ``bandwidth_share`` of ``epsilon``
    (raised to the quartiles' reliability floor; the public ``normal_reference`` for free when ``n * epsilon`` is
    too small): the plan is checked and priced from public inputs first, then the DP quartiles are drawn (OpenDP,
    whatever ``secure`` says: ``secure`` is the release noise's sampler) and the release uses the bandwidth they
    give. ``plan.budget_splits`` are ``bandwidth`` then ``kde``, summing exactly to ``epsilon``; ``plan.epsilon`` is
    the whole cost. ``draws`` must be 1 with ``"auto"`` (each draw would be a release buying its own bandwidth).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> rng = np.random.default_rng(0)
    >>> v, p = release_kde(rng.uniform(size=(500, 1)), axes=midpoint_grid(40), epsilon=1.0, eta=1.25,
    ...                    secure=False, rng=rng)
    >>> v.shape, p.n
    ((1, 40), 500)
    """
    x = np.asarray(points, dtype=np.float64)
    codes = np.arange(x.shape[0]) if unit_codes is None else unit_codes
    n, _ = unit_point_weights(codes)
    if bandwidth == "auto":
        one_draw_with_auto(draws, "bandwidth")
        grids = (axes,) if isinstance(axes, Grid) else tuple(axes)
        choice = kde_bandwidth_choice(grids, n, epsilon, bandwidth_share)
        # every public parameter checked and the split priced before any data is read
        plan_kde_release(grids, n=n, epsilon=epsilon, mechanism=mechanism, kernel=kernel, bandwidth="auto", eta=eta,
                         delta=delta, secure=secure, public_choices=(choice,))
        drawn = choose_kde_bandwidth(choice, _unit_points(x, len(grids)), codes, grids, epsilon=epsilon,
                                     mechanism=mechanism, kernel=kernel, eta=eta, delta=delta, secure=secure)
        plan = plan_kde_release(grids, n=n, epsilon=epsilon, mechanism=mechanism, kernel=kernel, bandwidth="auto",
                                eta=eta, delta=delta, secure=secure, public_choices=(drawn,))
    else:
        plan = plan_kde_release(axes, n=n, epsilon=epsilon, mechanism=mechanism, kernel=kernel, bandwidth=bandwidth,
                                eta=eta, delta=delta, secure=secure)
    return draw_point_release(plan, summarise_kde(x, codes, plan), draws=draws, rng=rng), plan


# ---------------------------------------------------------------------------------------------
# bandwidth: auto (formula tuning.kde.bandwidth_auto@1): a bandwidth bought with a named share of epsilon
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BandwidthChoice(PublicChoice):
    """``bandwidth: auto``: the split, the public candidate bandwidths and, after the draw, what was released.

    ``epsilon`` is the whole split (``2 d`` DP quantiles of ``quantile_epsilon`` each, sequential composition);
    ``alpha`` is the lower quantile level (the upper is ``1 - alpha``); ``candidates`` are the candidate bandwidths.
    Drawn: ``value`` is the bandwidth, ``quartiles`` the DP quartiles of each coordinate and ``sigmas`` the scales
    they give (all DP outputs, published). ``epsilon == 0``: nothing bought (``n * epsilon`` too small), the
    bandwidth is the public ``normal_reference`` rule.
    """

    quantile_epsilon: float = 0.0
    quartiles: tuple[tuple[float, float], ...] | None = None
    sigmas: tuple[float, ...] | None = None

    def as_manifest(self) -> dict[str, object]:
        """The manifest record of this choice (public: parameters and the private outputs)."""
        if self.a_priori:
            return self.record(mechanism="none: n * epsilon is too small for the DP quartiles, so the bandwidth is the "
                                         "public normal_reference rule of n and d (a priori; no data read, nothing charged)")
        return self.record(
            quantile_levels=[self.alpha, 1.0 - self.alpha], quantile_epsilon=self.quantile_epsilon,
            quantile_candidates={"first": 0.0, "last": 1.0, "count": BANDWIDTH_QUANTILE_CANDIDATES},
            quartiles=None if self.quartiles is None else [list(q) for q in self.quartiles],
            sigmas=None if self.sigmas is None else list(self.sigmas),
            candidates={"first": self.candidates[0], "last": self.candidates[-1], "count": len(self.candidates)},
            mechanism="opendp.measurements.make_private_quantile (exponential mechanism, known n) at levels 1/4 and "
                      "3/4 of each coordinate of the units' mean points (each plus an independent uniform dither "
                      f"of +-{QUARTILE_DITHER_STEPS} candidate steps, never stored), quantile_epsilon each "
                      "(sequential composition); the bandwidth minimises a public prior risk of the quartiles "
                      "(post-processing)",
        )


def bandwidth_candidates(axes: Sequence[Grid], n: int) -> tuple[float, ...]:
    """The public candidate bandwidths of ``bandwidth: auto``: a geometric grid from the grid spacing to the paper's rule.

    From the widest node spacing of the axes (a narrower bandwidth smooths nothing the grid can show) up to
    :func:`kde_bandwidth` (``n^(-1/(4+d))``, the widest rule), :data:`BANDWIDTH_PER_DECADE` per decade; the lower end
    is at most half the upper. Public inputs only.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> c = bandwidth_candidates([midpoint_grid(100)], 2000)
    >>> round(c[0], 4), round(c[-1], 4), len(c)
    (0.01, 0.2187, 28)
    """
    grids = tuple(axes)
    hi = kde_bandwidth(n, len(grids))
    lo = min(max(float(np.max(np.diff(g.grid_points))) if g.size > 1 else 1.0 for g in grids), hi / 2.0)
    return tau_candidates(lo, hi, BANDWIDTH_PER_DECADE)


def kde_bandwidth_choice(axes: Grid | Sequence[Grid], n: int, epsilon: float,
                         share: float = DEFAULT_BANDWIDTH_SHARE) -> BandwidthChoice:
    """``bandwidth: auto``, not yet drawn: its split and candidates, from public inputs only (``tuning.kde.bandwidth_auto@1``).

    The split is :func:`~fdpcore.noise.quantiles.choice_epsilon` of ``share`` with the reliability floor of one DP
    median on ``floor(n / (4 d))`` units: each of the ``2 d`` quartiles gets an equal part
    (:func:`~fdpcore.noise.quantiles.equal_parts`) and targets rank ``n / 4``, so its rank margin must fit below
    ``n / 4`` at a ``2 d``-th of the split — the median's floor with ``n`` replaced by ``n / (4 d)``. When that is
    refused (``n * epsilon`` too small) the choice is the public ``normal_reference`` bandwidth
    (:func:`kde_reference_bandwidth`) and costs nothing, as ``tau: auto`` falls back to its a-priori radius.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> c = kde_bandwidth_choice(midpoint_grid(100), 2000, 1.0)
    >>> c.epsilon, c.quantile_epsilon, c.a_priori
    (0.1328, 0.0664, False)
    >>> kde_bandwidth_choice(midpoint_grid(100), 200, 1.0).a_priori  # n * epsilon too small: normal_reference, free
    True
    """
    grids = (axes,) if isinstance(axes, Grid) else tuple(axes)
    dim = len(grids)
    n = _validate.positive_int("n", n)
    eps = _validate.positive_finite("epsilon", epsilon)
    if not 0.0 < share < 1.0:
        raise DomainError(f"bandwidth_share ({share!r}) must be in (0, 1)")
    parts = 2 * dim
    try:
        if n // (2 * parts) < 2:
            raise PrivacyParameterError("too few units for the DP quartiles")
        e_bw = choice_epsilon("bandwidth", n // (2 * parts), eps, share, BANDWIDTH_QUANTILE_CANDIDATES)
    except PrivacyParameterError:  # n * epsilon too small for the quartiles: the public normal reference, for free
        h = kde_reference_bandwidth(n, dim)
        return BandwidthChoice("bandwidth", 0.0, KDE_BANDWIDTH_RULES["normal_reference"], BANDWIDTH_LEVELS[0], (h,))
    return BandwidthChoice("bandwidth", e_bw, BANDWIDTH_AUTO_FORMULA, BANDWIDTH_LEVELS[0],
                           bandwidth_candidates(grids, n), quantile_epsilon=equal_parts(e_bw, parts))


def unit_mean_points(points: ArrayLike, unit_codes: ArrayLike) -> NDArrayFloat:
    """Each privacy unit's mean point on the unit box (``n x d``; pre-noise, never publish).

    A unit's rows are averaged (weights ``1/m_u``, :func:`unit_point_weights`), so each unit gives one value per
    coordinate and a unit with many rows counts once.

    >>> unit_mean_points([[0.2], [0.4], [0.9]], [5, 5, 1]).tolist()
    [[0.9], [0.30000000000000004]]
    """
    codes = np.asarray(unit_codes)
    x = np.asarray(points, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    if codes.shape != (x.shape[0],):
        raise DomainError("points and unit_codes must have the same length")
    _, inverse, counts = np.unique(codes, return_inverse=True, return_counts=True)
    sums = np.zeros((counts.shape[0], x.shape[1]))
    np.add.at(sums, inverse, x)
    return np.asarray(sums / counts[:, None], dtype=np.float64)


def _kernel_moments(mechanism: str, kernel: str, eta: float | None) -> tuple[float, float]:
    """``(mu_2, R_1)`` of the estimator's effective smoothing kernel per coordinate, in units of ``h`` (MATH.md §8).

    ICLP-QR smooths with the power kernel ``c_h^eta``: for the Gaussian ``exp(-x^2/(2h^2))`` its Fourier symbol
    ``exp(-h^2 w^2/2)`` to the power ``eta`` is a Gaussian of variance ``eta h^2`` (``mu_2 = eta``,
    ``R = 1/(2 sqrt(pi eta))``); for the exponential ``exp(-|x|/h)``, ``(1 + h^2 w^2)^(-eta)`` has variance
    ``2 eta h^2`` and ``R = Gamma(2 eta - 1/2) / (2 sqrt(pi) Gamma(2 eta))``. Hall et al.'s GP KDE is the Gaussian
    KDE itself (``eta = 1``). Public inputs only.
    """
    e = 1.0 if mechanism == "hall_gp" else _eta(1.0 if eta is None else eta)
    if kernel == "gaussian":
        return e, 1.0 / (2.0 * math.sqrt(math.pi * e))
    return 2.0 * e, math.exp(math.lgamma(2.0 * e - 0.5) - math.lgamma(2.0 * e)) / (2.0 * math.sqrt(math.pi))


def kde_bandwidth_risk(h: float, sigmas: Sequence[float], n: int, noise_sq: float, *, mechanism: str = "iclp_qr",
                       kernel: str = "gaussian", eta: float | None = 1.25) -> float:
    r"""The prior risk ``bandwidth: auto`` minimises: normal-reference AMISE plus the release's noise energy (``tuning.kde.bandwidth_auto@1``).

    .. math:: R(h)=\frac{\mu_2^2h^4}{4}\int(\operatorname{tr}\nabla^2 f_\sigma)^2
              +\frac{R_1^d}{n h^d}+E\|\text{noise}_h\|_W^2,\qquad
              \int(\operatorname{tr}\nabla^2 f_\sigma)^2=\frac{2\,\mathrm{tr}\,\Sigma^{-2}+(\mathrm{tr}\,\Sigma^{-1})^2}
              {2^{d+2}\pi^{d/2}\prod_j\sigma_j}

    ``f_sigma`` is the normal density with independent coordinates of standard deviations ``sigmas`` (MATH.md §5.1's
    normal reference, with scales bought instead of assumed), ``(mu_2, R_1)`` the second moment and roughness of the
    estimator's smoothing kernel per coordinate (:func:`_kernel_moments`), ``noise_sq`` the release's exact
    ``E||noise||_W^2`` at ``h`` (:attr:`PointPlan.expected_sq_l2_error`, MATH.md §8). Public inputs and DP outputs only.

    >>> round(kde_bandwidth_risk(0.05, [0.1], 1000, 0.0, kernel="gaussian", eta=1.0), 5)  # bias^2 0.03306 + variance 0.00564
    0.0387
    """
    s = np.asarray(sigmas, dtype=np.float64)
    d = int(s.shape[0])
    mu2, r1 = _kernel_moments(mechanism, kernel, eta)
    roughness = (2.0 * np.sum(s**-4) + np.sum(s**-2) ** 2) / (2.0 ** (d + 2) * math.pi ** (d / 2.0) * float(np.prod(s)))
    return float(mu2 * mu2 * h**4 / 4.0 * roughness + r1**d / (n * h**d) + noise_sq)


def kde_auto_bandwidth(sigmas: Sequence[float], n: int, candidates: Sequence[float],
                       noise_sq: Callable[[float], float], *, mechanism: str = "iclp_qr", kernel: str = "gaussian",
                       eta: float | None = 1.25) -> float:
    """The candidate bandwidth of least :func:`kde_bandwidth_risk` (the smallest on ties); deterministic post-processing.

    ``noise_sq(h)`` is the release's ``E||noise||_W^2`` at ``h`` with the epsilon left after the split (public).

    >>> cands = tau_candidates(0.01, 0.3, 10)
    >>> round(kde_auto_bandwidth([0.05], 2000, cands, lambda h: 0.0, eta=1.0), 4)  # Silverman's 1.06 x 0.05 x 2000^-0.2 = 0.0116
    0.0126
    """
    risks = [kde_bandwidth_risk(float(h), sigmas, n, float(noise_sq(float(h))), mechanism=mechanism, kernel=kernel,
                                eta=eta) for h in candidates]
    return float(candidates[int(np.argmin(risks))])


def draw_kde_quartiles(choice: BandwidthChoice, unit_means: ArrayLike) -> tuple[tuple[float, float], ...]:
    """The ``2 d`` DP quartiles of ``bandwidth: auto`` (noise draws: the ledger charge must be final first).

    Per coordinate ``j``: OpenDP's DP quantile (:func:`~fdpcore.noise.quantiles.dp_quantile`) at levels 1/4 and 3/4 of
    the units' mean coordinates, each plus an independent ``Uniform(-2s, 2s)`` dither (``s = 1/200``, the candidate
    spacing; fresh OS entropy, never stored), over 201 evenly spaced candidates on ``[0, 1]``, at
    ``choice.quantile_epsilon`` each. One value per unit, so a replaced unit changes one entry of each input.
    """
    if choice.a_priori or choice.quantile_epsilon <= 0.0:
        raise DomainError("an a-priori bandwidth choice draws no quartiles")
    x = np.asarray(unit_means, dtype=np.float64)
    cands = centre_candidates(0.0, 1.0, BANDWIDTH_QUANTILE_CANDIDATES)
    half = QUARTILE_DITHER_STEPS * (cands[1] - cands[0])
    out = []
    for j in range(x.shape[1]):
        col = []
        for level in (choice.alpha, 1.0 - choice.alpha):
            dithered = x[:, j] + np.random.default_rng().uniform(-half, half, x.shape[0])
            col.append(dp_quantile(rank_equivalent(dithered, cands), cands, alpha=level, epsilon=choice.quantile_epsilon))
        out.append((col[0], col[1]))
    return tuple(out)


def quartile_sigmas(quartiles: Sequence[tuple[float, float]]) -> tuple[float, ...]:
    """``sigma_j = (0.9 / 1.06) min(max(IQR_j / 1.349, 2 / 200), 1/6)`` from the DP quartiles (post-processing).

    Silverman's robust rule of thumb (*Density Estimation*, 1986, eq. 3.31: ``h = 0.9 min(sd, IQR / 1.34) n^(-1/5)``)
    with the a-priori scale of ``normal_reference`` (the public box holds the points within +-3 sd: 1/6) in place of
    the sample sd: an interquartile range wider than a normal of that scale means the points are not normal-shaped
    (several modes, or flat), where a normal reference of the wider scale oversmooths; and the factor 0.9 / 1.06 of
    his rule, which keeps a bimodal density from being smoothed into one mode at little cost for a normal one. So
    ``bandwidth: auto`` only narrows the normal reference's scale. The floor (0.01 before the factor) keeps ``h`` away from 0 when the
    points sit inside a few candidates.

    >>> tuple(round(s, 4) for s in quartile_sigmas([(0.4, 0.6), (0.5, 0.5), (0.2, 0.8)]))
    (0.1259, 0.0085, 0.1415)
    """
    floor = SIGMA_FLOOR_STEPS / (BANDWIDTH_QUANTILE_CANDIDATES - 1)
    return tuple(SIGMA_ROBUST * min(max((hi - lo) / IQR_PER_SD, floor), SIGMA_CAP) for lo, hi in quartiles)


def choose_kde_bandwidth(
    choice: BandwidthChoice, points: ArrayLike, unit_codes: ArrayLike, axes: Grid | Sequence[Grid], *,
    epsilon: float, mechanism: str = "iclp_qr", kernel: str = "gaussian", eta: float | None = None,
    delta: float = 0.0, calibration: str = "analytic", secure: bool = True,
) -> BandwidthChoice:
    """Draw ``bandwidth: auto`` (``tuning.kde.bandwidth_auto@1``): DP quartiles, then the public risk minimiser.

    A noise draw (the ledger charge must be final first). The quartiles of the units' mean points
    (:func:`unit_mean_points`, :func:`draw_kde_quartiles`) give ``sigma_j`` (:func:`quartile_sigmas`); the bandwidth
    is :func:`kde_auto_bandwidth` over ``choice.candidates`` with the noise of :func:`plan_kde_release` at each
    candidate and the epsilon left after the split (``epsilon`` is the release's total). Only the DP quartiles and
    public inputs enter the bandwidth. An a-priori choice returns its public bandwidth and reads nothing.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> x = np.random.default_rng(0).normal(0.5, 0.05, (4000, 1)).clip(0, 1)
    >>> c = kde_bandwidth_choice(midpoint_grid(100), 4000, 2.0)
    >>> d = choose_kde_bandwidth(c, x, np.arange(4000), midpoint_grid(100), epsilon=2.0, eta=1.25, secure=False)
    >>> d.value in c.candidates and d.value < kde_reference_bandwidth(4000, 1), 0.03 < d.sigmas[0] < 0.08
    (True, True)
    """
    if choice.value is not None:
        raise DomainError("the bandwidth choice was already drawn")
    if choice.a_priori:
        return dataclasses.replace(choice, value=choice.candidates[-1])
    grids = (axes,) if isinstance(axes, Grid) else tuple(axes)
    means = unit_mean_points(points, unit_codes)
    n = int(means.shape[0])
    if means.shape[1] != len(grids):
        raise DomainError(f"points (dimension {means.shape[1]}) must have one coordinate per axis ({len(grids)})")
    quartiles = draw_kde_quartiles(choice, means)
    sigmas = quartile_sigmas(quartiles)
    rest = epsilon_after_choices(epsilon, (choice,))

    def noise_sq(h: float) -> float:
        return plan_kde_release(grids, n=n, epsilon=rest, mechanism=mechanism, kernel=kernel, bandwidth=h, eta=eta,
                                delta=delta, calibration=calibration, secure=secure).expected_sq_l2_error

    h = kde_auto_bandwidth(sigmas, n, choice.candidates, noise_sq, mechanism=mechanism, kernel=kernel, eta=eta)
    return dataclasses.replace(choice, value=h, quartiles=quartiles, sigmas=sigmas)
