"""Private functional PCA by the exponential mechanism ([AKRS]; MATH.md §10).

The released object is the span of ``k`` functional principal components. Curves are
clipped to ``||X_i||_W <= tau`` and represented by their coefficients ``X`` (n x m) on
``m`` public, W-orthonormal basis functions: the leading eigenfunctions of a public
kernel ``Sigma`` (a Gaussian kernel whose length scale is set, from the grid alone, so
that ``m`` eigenvalues carry a given share of the trace; MATH.md §13.6).

Mechanism (the paper's matrix-Bingham form, MATH.md §10.3): with respect to Haar measure
on the Stiefel manifold, ``p(V) ∝ etr(V^T A V)`` with
``A = eps/(2 tau^2) X^T X - c Sigma^{-1}``. It is the exponential mechanism for the utility
``sum_i ||P X_i||^2`` (sensitivity ``tau^2``, exact) with the data-independent Bingham base
measure ``∝ etr(-c V^T Sigma^{-1} V)``, hence exactly eps-DP for every public ``c >= 0``
(the paper uses ``c = eps/2``). For ``k = 1`` it is sampled exactly.

For ``k > 1`` the default (``sampler="deflation"``) releases ``k`` components one after the
other: component ``j`` is an exact draw of the ``k = 1`` mechanism with ``eps/k`` (and ``c/k``)
restricted to the orthogonal complement of the components already released
(:func:`fpca_deflation_parameter`; the projection onto that public complement is a contraction,
so each step's utility keeps sensitivity ``tau^2``, ``sensitivity.fpca.deflated_energy@1``); the
``k`` pure-DP steps compose to ``eps`` exactly. The matrix-Bingham Gibbs chain of
:mod:`fdpcore.noise.bingham` (``sampler="gibbs"``) has no certified bound on its distance from the
target, so it carries **no** DP guarantee: it is available to methodologists only, with
``non_private=True`` (MATH.md §10.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import weighted_eigenbasis
from fdpcore.basis.grids import Grid
from fdpcore.basis.kernels import KernelSpec, kernel_spec
from fdpcore.data.preprocess import clip_l2
from fdpcore.errors import DomainError
from fdpcore.noise.bingham import BinghamChains, sample_matrix_bingham, sample_vector_bingham
from fdpcore.noise.quantiles import (
    DEFAULT_TAU_SHARE,
    PaysChoicesFirst,
    PublicChoice,
    choice_formulas,
    epsilon_after_choices,
    plan_with_tau,
)

__all__ = [
    "FpcaBasis",
    "FpcaPlan",
    "FpcaRelease",
    "GibbsDiagnostic",
    "FPCA_SAMPLERS",
    "draw_fpca_components",
    "fpca_basis",
    "fpca_bingham_parameter",
    "fpca_coefficients",
    "fpca_deflated_sensitivity",
    "fpca_deflation_parameter",
    "fpca_energy_shortfall",
    "fpca_gram",
    "fpca_sensitivity",
    "gaussian_length_scale",
    "gibbs_diagnostic",
    "plan_fpca_release",
    "projection_distance",
    "reference_on_grid",
    "release_fpca",
    "top_components",
    "variance_ratio",
    "variance_ratio_paper",
]

#: Burn-in of [AKRS] (after Chaudhuri et al. 2013), used for the Gibbs chain when none is given.
DEFAULT_BURN_IN = 20_000
#: ``deflation``: k exact draws on deflated subspaces, pure eps-DP (default); ``gibbs``: the matrix-Bingham
#: chain of [AKRS], no certified guarantee (``non_private=True`` only).
FPCA_SAMPLERS = ("deflation", "gibbs")


@dataclass(frozen=True, eq=False)
class FpcaBasis:
    """Public FPCA basis: ``m`` leading W-orthonormal eigenfunctions of ``Sigma`` and their eigenvalues.

    Attributes:
        functions: ``B`` (K x m), ``B^T W B = I``.
        sigma: eigenvalues ``Sigma_jj`` (decreasing); ``Sigma`` is diagonal on this basis.
        kernel: the kernel ``Sigma`` (trace-normalised on the grid, MATH.md §2.4).
        explained: share of the kernel's trace carried by the ``m`` eigenvalues.
        grid: the grid.
    """

    functions: NDArrayFloat
    sigma: NDArrayFloat
    kernel: KernelSpec
    explained: float
    grid: Grid

    @property
    def n_basis(self) -> int:
        """Number of basis functions ``m``."""
        return int(self.sigma.shape[0])


def fpca_basis(grid: Grid, kernel: dict[str, object] | KernelSpec, n_basis: int) -> FpcaBasis:
    """The ``m`` leading eigenfunctions of a public kernel on ``grid`` (MATH.md §10.3).

    Data-independent: depends on the grid, the kernel and ``m`` only.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = fpca_basis(midpoint_grid(30), {"name": "gaussian", "length_scale": 0.2}, 5)
    >>> b.functions.shape, bool(np.allclose(b.functions.T * b.grid.weights @ b.functions, np.eye(5)))
    ((30, 5), True)
    """
    m = _validate.positive_int("n_basis", n_basis)
    spec = kernel_spec(kernel)
    eb = weighted_eigenbasis(spec, grid, normalize_trace=True)
    if m > eb.n_basis:
        raise DomainError(f"n_basis ({m}) must be <= the number of kept eigenpairs of the kernel on this grid ({eb.n_basis})")
    sigma = eb.eigenvalues[:m].copy()
    functions = eb.eigenfunctions[:, :m].copy()
    return FpcaBasis(functions, sigma, spec, float(sigma.sum() / eb.eigenvalues.sum()), grid)


def gaussian_length_scale(grid: Grid, n_basis: int, explained: float = 0.99) -> float:
    """Smallest Gaussian-kernel length scale whose ``m`` leading eigenvalues carry ``explained`` of the trace.

    [AKRS] §6 set the smoothness of ``Sigma`` "so that m eigenvalues explain more than 99%
    of the trace"; the explained share increases with the length scale, so the least smooth
    kernel meeting the target is found by bisection on ``log(length_scale)``. The rule uses
    the grid only (MATH.md §12.3: the basis and ``Sigma`` are fixed a priori).

    .. math:: \\ell^* = \\min\\Big\\{\\ell:\\ \\textstyle\\sum_{j\\le m}\\lambda_j(\\ell)\\big/\\sum_j\\lambda_j(\\ell)\\ge r\\Big\\}

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> round(gaussian_length_scale(midpoint_grid(40), 5), 3)
    0.196
    """
    m = _validate.positive_int("n_basis", n_basis)
    r = float(explained)
    if not (0.0 < r < 1.0):
        raise DomainError(f"explained ({explained!r}) must be in (0, 1)")
    width = grid.domain_range[1] - grid.domain_range[0]

    def share(ell: float) -> float:
        lam = weighted_eigenbasis({"name": "gaussian", "length_scale": ell}, grid).eigenvalues
        return float(lam[:m].sum() / lam.sum())

    lo, hi = 1e-3 * width, 10.0 * width
    if share(hi) < r:
        raise DomainError(f"explained ({r}) cannot be reached with n_basis ({m}) on this grid")
    if share(lo) >= r:
        return lo
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if share(mid) >= r:
            hi = mid
        else:
            lo = mid
    return hi


def reference_on_grid(
    time: ArrayLike,
    value: ArrayLike,
    grid: Grid,
    *,
    time_domain: tuple[float, float],
    value_offset: float = 0.0,
    value_scale: float = 1.0,
) -> NDArrayFloat:
    """A public reference curve at the grid nodes, in the release's rescaled units (MATH.md §10.2, §1.7).

    Times map affinely from ``time_domain`` onto the grid domain, values by
    ``(v - offset) / scale``, then linear interpolation onto the nodes. Subtracting it from
    every record is public centring: record-wise and data-independent, so the ``tau^2``
    sensitivity is unchanged (centring by the sample mean would break it).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> reference_on_grid([0.0, 10.0], [100.0, 200.0], midpoint_grid(2), time_domain=(0.0, 10.0),
    ...                   value_offset=100.0, value_scale=10.0).tolist()
    [2.5, 7.5]
    """
    t = np.asarray(time, dtype=np.float64)
    v = np.asarray(value, dtype=np.float64)
    if t.ndim != 1 or t.shape != v.shape or t.size < 2 or not np.all(np.isfinite(t)) or not np.all(np.isfinite(v)):
        raise DomainError(f"reference curve (shapes {t.shape}, {v.shape}) must be two finite 1-D arrays of equal length >= 2")
    if not np.all(np.diff(t) > 0):
        raise DomainError("reference curve times must be strictly increasing")
    a, b = float(time_domain[0]), float(time_domain[1])
    c, d = grid.domain_range
    mapped = c + (t - a) * ((d - c) / (b - a))
    if mapped[0] > grid.grid_points[0] + 1e-12 or mapped[-1] < grid.grid_points[-1] - 1e-12:
        first, last = (float(a + (g - c) * (b - a) / (d - c)) for g in (grid.grid_points[0], grid.grid_points[-1]))
        raise DomainError(f"reference curve times ([{float(t[0]):g}, {float(t[-1]):g}]) must cover every grid node: "
                          f"from at most {first:g} to at least {last:g} in source time units")
    scale = _validate.positive_finite("value_scale", value_scale, privacy=False)
    out: NDArrayFloat = (np.interp(grid.grid_points, mapped, v) - float(value_offset)) / scale
    return out


def fpca_coefficients(curves: ArrayLike, basis: FpcaBasis) -> NDArrayFloat:
    """``X_ij = <X_i, b_j>_W`` (n x m); each row has norm ``<= ||X_i||_W`` by Bessel's inequality.

    Examples:
        >>> from fdpcore.basis.grids import midpoint_grid
        >>> b = fpca_basis(midpoint_grid(30), {"name": "gaussian", "length_scale": 0.2}, 3)
        >>> (fpca_coefficients(b.functions.T, b).round(12) + 0.0).tolist()[0]  # + 0.0: no signed zeros
        [1.0, 0.0, 0.0]
    """
    x = _validate.finite_matrix("curves", curves, ncols=basis.grid.size)
    out: NDArrayFloat = (x * basis.grid.weights) @ basis.functions
    return out


def fpca_gram(curves: ArrayLike, basis: FpcaBasis, tau: float) -> NDArrayFloat:
    """``X^T X`` of the clipped curves' coefficients (pre-noise; never published or logged).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = fpca_basis(midpoint_grid(30), {"name": "gaussian", "length_scale": 0.2}, 2)
    >>> fpca_gram(3.0 * b.functions.T[:1], b, tau=1.0).round(12).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    clipped, _ = clip_l2(curves, basis.grid.weights, tau)
    x = fpca_coefficients(clipped, basis)
    out: NDArrayFloat = x.T @ x
    return out


def fpca_sensitivity(tau: float) -> float:
    """Sensitivity of the utility ``xi_D(P) = sum_i ||P X_i||^2`` under replace-one: ``tau^2`` [EXACT] (MATH.md §10.2).

    Both ``||P X_1||^2`` and ``||P X_1'||^2`` lie in ``[0, tau^2]``; the bound is attained with
    ``X_1`` in the range of ``P`` and ``X_1'`` orthogonal to it, both of norm ``tau``.

    .. math:: \\Delta_\\xi=\\sup_{D\\sim D'}\\sup_P|\\xi_D(P)-\\xi_{D'}(P)|=\\tau^2

    >>> fpca_sensitivity(0.5)
    0.25
    """
    t = _validate.positive_finite("tau", tau)
    return t * t


def fpca_bingham_parameter(
    gram: ArrayLike, sigma: ArrayLike, *, epsilon: float, tau: float, prior_strength: float | None = None
) -> NDArrayFloat:
    """The matrix ``A`` of the exponential mechanism ``p(V) ∝ etr(V^T A V)`` (MATH.md §10.3).

    .. math:: A=\\frac{\\epsilon}{2\\Delta_\\xi}\\mathbf X^\\top\\mathbf X-c\\,\\Sigma^{-1},
              \\qquad \\Delta_\\xi=\\tau^2,\\quad c=\\epsilon/2\\ \\text{([AKRS]) unless given}

    The first term is the exponential mechanism's ``eps/(2 Delta) * utility``
    (``tr(V^T X^T X V) = sum_i ||P X_i||^2``); the second is the data-independent Bingham
    base measure. For any public ``c >= 0`` the density ratio between neighbours is at most
    ``e^{eps/2} e^{eps/2}``.

    Args:
        gram: ``X^T X`` (m x m) of clipped coefficients.
        sigma: eigenvalues of ``Sigma`` on the basis (``Sigma`` diagonal), all ``> 0``.
        epsilon: privacy parameter.
        tau: clipping radius.
        prior_strength: ``c``; ``None`` uses the paper's ``eps/2``.

    Privacy assumptions:
        ``tau``, the basis, ``Sigma`` and ``c`` are public; ``n`` is public (replace-one).

    >>> fpca_bingham_parameter(np.eye(2), [1.0, 0.5], epsilon=2.0, tau=1.0).tolist()
    [[0.0, 0.0], [0.0, -1.0]]
    """
    eps = _validate.positive_finite("epsilon", epsilon)
    delta_xi = fpca_sensitivity(tau)
    s = np.asarray(sigma, dtype=np.float64)
    g = np.asarray(gram, dtype=np.float64)
    if s.ndim != 1 or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise DomainError("sigma must be a 1-D array of finite eigenvalues > 0 (Sigma positive definite)")
    if g.shape != (s.size, s.size) or not np.all(np.isfinite(g)):
        raise DomainError(f"gram (shape {g.shape}) must be a finite ({s.size}, {s.size}) matrix")
    c = eps / 2.0 if prior_strength is None else float(prior_strength)
    if not (math.isfinite(c) and c >= 0):
        raise DomainError(f"prior_strength ({prior_strength!r}) must be finite and >= 0")
    a = (eps / (2.0 * delta_xi)) * (g + g.T) / 2.0
    a[np.diag_indices(s.size)] -= c / s
    return a


def fpca_deflated_sensitivity(tau: float) -> float:
    """Sensitivity of a deflation step's utility ``sum_i <v, X_i>^2``, ``v`` a unit vector of the complement ``Q`` of the released components: ``tau^2`` [EXACT] (formula ``sensitivity.fpca.deflated_energy@1``).

    ``<Q z, x> = <z, Q^T x>`` and ``||Q^T x|| <= ||x|| <= tau`` (projection onto a public subspace is a
    contraction), so each record's term lies in ``[0, tau^2]``; attained by a record of norm ``tau``
    in the complement replaced by one orthogonal to it (MATH.md §10.2).

    .. math:: \\Delta_j=\\sup_{D\\sim D'}\\sup_{\\lVert z\\rVert=1}\\big|\\textstyle\\sum_i\\langle Qz,X_i\\rangle^2-
              \\sum_i\\langle Qz,X_i'\\rangle^2\\big|=\\tau^2

    >>> fpca_deflated_sensitivity(0.5)
    0.25
    """
    return fpca_sensitivity(tau)


def fpca_energy_shortfall(n_basis: int, n_components: int, *, n: int, epsilon_step: float, tau: float) -> float:
    r"""The noise part of the expected captured-energy shortfall per record (formula ``accuracy.fpca.energy_shortfall@1``).

    .. math:: \mathrm E\Big[\tfrac1n\mathrm{tr}(\hat V^\top\mathbf X^\top\mathbf X\hat V)-
              \tfrac1n\mathrm{tr}(\tilde V^\top\mathbf X^\top\mathbf X\tilde V)\Big]\approx
              \frac{k(m-k)\,\tau^2}{n\,\epsilon_j}

    The Laplace approximation of the exponential mechanism at its mode (MATH.md §10.3-10.5, derived in the proof
    note): each of the ``k(m - k)`` dimensions of the space of ``k``-dimensional subspaces of the basis costs
    ``1 / (2 a n)`` of per-record energy, ``a = epsilon_j / (2 tau^2)`` the temperature of a step. It is the
    randomness of the mechanism alone, as the mean's ``E L2 error`` is its noise alone: the Bingham base measure
    (``c > 0``) adds a bias towards the kernel's smooth directions that depends on the data and does not fall with
    epsilon, and where the data's spread is below this figure the shortfall is smaller (it cannot exceed the
    records' own energy). Public inputs only: ``m``, ``k``, ``n``, ``epsilon_j`` and ``tau``.

    >>> fpca_energy_shortfall(5, 2, n=93, epsilon_step=0.5, tau=1.0)  # 2 * 3 / (93 * 0.5)
    0.12903225806451613
    """
    m = _validate.positive_int("n_basis", n_basis)
    k = _validate.positive_int("n_components", n_components)
    if k >= m:
        raise DomainError(f"n_components ({k}) must be < n_basis ({m})")
    n = _validate.positive_int("n", n)
    eps = _validate.positive_finite("epsilon_step", epsilon_step)
    t = _validate.positive_finite("tau", tau)
    return k * (m - k) * t * t / (n * eps)


def fpca_deflation_parameter(
    gram: ArrayLike, sigma: ArrayLike, released: ArrayLike, *, epsilon: float, tau: float, prior_strength: float,
) -> tuple[NDArrayFloat, NDArrayFloat]:
    """One deflation step: ``(Q, A_j)`` with ``Q`` an orthonormal basis of the complement of ``released`` and ``A_j = Q^T A Q`` for ``A`` of :func:`fpca_bingham_parameter` at ``(epsilon, prior_strength)``.

    (formula ``calibration.fpca.deflation@1``, MATH.md §10.3).

    .. math:: p(z)\\propto\\exp\\Big(\\frac{\\epsilon_j}{2\\tau^2}\\,z^\\top Q^\\top\\mathbf X^\\top\\mathbf XQz
              - c_j\\,z^\\top Q^\\top\\Sigma^{-1}Qz\\Big)\\ \\text{on } S^{m-j},\\qquad v_j=Qz

    is the exponential mechanism for the utility ``sum_i <Qz, X_i>^2`` (sensitivity ``tau^2``,
    :func:`fpca_deflated_sensitivity`) with a data-independent base measure, so step ``j`` is
    ``epsilon_j``-DP given the released (public) components.

    Args:
        gram: ``X^T X`` (m x m) of clipped coefficients.
        sigma: eigenvalues of ``Sigma`` on the basis.
        released: ``(m, j - 1)`` orthonormal components already released (public), possibly ``(m, 0)``.
        epsilon: ``epsilon_j`` of this step.
        tau: clipping radius.
        prior_strength: ``c_j`` of this step.

    >>> q, a = fpca_deflation_parameter(np.eye(3), [1.0, 1.0, 1.0], np.eye(3)[:, :1], epsilon=2.0, tau=1.0,
    ...                                 prior_strength=0.0)
    >>> q.shape, bool(np.allclose(q[0], 0.0)), a.round(12).tolist()
    ((3, 2), True, [[1.0, 0.0], [0.0, 1.0]])
    """
    a = fpca_bingham_parameter(gram, sigma, epsilon=epsilon, tau=tau, prior_strength=prior_strength)
    v = np.asarray(released, dtype=np.float64).reshape(a.shape[0], -1)
    if v.shape[1] >= a.shape[0] or (v.shape[1] and not np.allclose(v.T @ v, np.eye(v.shape[1]), atol=1e-8)):
        raise DomainError(f"released (shape {v.shape}) must be fewer than m orthonormal columns")
    if v.shape[1] == 0:
        q = np.eye(a.shape[0])
    else:  # the last m - j + 1 left singular vectors span the complement of the released columns
        u, _, _ = np.linalg.svd(v, full_matrices=True)
        q = u[:, v.shape[1]:]
    a_j: NDArrayFloat = q.T @ a @ q
    return q, (a_j + a_j.T) / 2.0


@dataclass(frozen=True, eq=False)
class FpcaPlan(PaysChoicesFirst):
    """Everything that fixes the FPCA mechanism, from public inputs only.

    Attributes:
        basis: the public basis and ``Sigma``.
        n_components: ``k``.
        epsilon: privacy parameter of the release (the public choices included).
        tau: clipping radius.
        prior_strength: ``c`` of the Bingham base measure.
        burn_in: Gibbs sweeps before the single released state (``sampler="gibbs"``, ``k > 1`` only; else 0).
        method: ``"acg"`` or ``"hoff"`` column updates of the Gibbs chain.
        formulas: formula ids this release uses (cited by the manifest).
        sampler: ``"deflation"`` (exact, pure eps-DP) or ``"gibbs"`` (no certified guarantee).
        public_choices: ``tau: auto`` (:mod:`fdpcore.noise.quantiles`), a named split of ``epsilon`` paid before
            the components; ``tau`` is then the value it released.
    """

    basis: FpcaBasis
    n_components: int
    epsilon: float
    tau: float
    prior_strength: float
    burn_in: int
    method: str = "acg"
    formulas: tuple[str, ...] = ()
    sampler: str = "deflation"
    public_choices: tuple[PublicChoice, ...] = ()

    split_name: ClassVar[str] = "fpca"

    @property
    def sensitivity(self) -> float:
        """``tau^2``."""
        return fpca_sensitivity(self.tau)

    @property
    def exact(self) -> bool:
        """Whether every released state is an exact draw (``k = 1``, or the deflation sampler)."""
        return self.n_components == 1 or self.sampler == "deflation"

    @property
    def private(self) -> bool:
        """Whether the release is ``epsilon``-DP: only exact draws are (a Gibbs state has no certified bound)."""
        return self.exact

    @property
    def epsilon_step(self) -> float:
        """``epsilon_j = epsilon_mechanism / k`` of each deflation step (``epsilon_mechanism`` for one component)."""
        return self.epsilon_mechanism / self.n_components

    def expected_energy_shortfall(self, n: int) -> float:
        """:func:`fpca_energy_shortfall` of this plan for ``n`` records (rescaled units; the Gibbs chain: one joint draw)."""
        step = self.epsilon_step if self.sampler == "deflation" else self.epsilon_mechanism
        return fpca_energy_shortfall(self.basis.n_basis, self.n_components, n=n, epsilon_step=step, tau=self.tau)


def plan_fpca_release(
    basis: FpcaBasis,
    *,
    n_components: int,
    epsilon: float,
    tau: float,
    prior_strength: float | None = None,
    burn_in: int | None = None,
    method: str = "acg",
    sampler: str = "deflation",
    non_private: bool = False,
    public_choices: tuple[PublicChoice, ...] = (),
) -> FpcaPlan:
    """Validate and fix the public parameters of one FPCA release (MATH.md §10.3-10.5).

    ``sampler="deflation"`` (default): ``k`` exact draws on successively deflated subspaces,
    ``epsilon/k`` each, pure ``epsilon``-DP; ``burn_in`` must not be given. ``sampler="gibbs"``: the
    [AKRS] matrix-Bingham chain; no bound on its distance from the target is certified, so for
    ``k > 1`` it needs ``non_private=True`` (methodologists only; ``fdp release`` refuses it) and
    ``burn_in`` (default :data:`DEFAULT_BURN_IN`). ``public_choices`` (``tau: auto``) are parts of ``epsilon``
    paid first: the mechanism (and the paper's ``c = epsilon/2``) uses the rest, and ``tau`` is the value they
    released.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = fpca_basis(midpoint_grid(30), {"name": "gaussian", "length_scale": 0.2}, 5)
    >>> p = plan_fpca_release(b, n_components=2, epsilon=1.0, tau=1.0)
    >>> p.prior_strength, p.sensitivity, p.exact, p.epsilon_step
    (0.5, 1.0, True, 0.5)
    """
    total = _validate.positive_finite("epsilon", epsilon)
    choices = tuple(public_choices)
    eps = epsilon_after_choices(total, choices)  # the exponential mechanism's own part
    t = _validate.positive_finite("tau", tau)
    k = _validate.positive_int("n_components", n_components)
    if k >= basis.n_basis:
        raise DomainError(f"n_components ({k}) must be < n_basis ({basis.n_basis})")
    c = eps / 2.0 if prior_strength is None else float(prior_strength)
    if not (math.isfinite(c) and c >= 0):
        raise DomainError(f"prior_strength ({prior_strength!r}) must be finite and >= 0")
    if sampler not in FPCA_SAMPLERS:
        raise DomainError(f"sampler ({sampler!r}) must be one of {FPCA_SAMPLERS}")
    if method not in ("acg", "hoff"):
        raise DomainError(f"method ({method!r}) must be 'acg' or 'hoff'")
    formulas = ["sensitivity.fpca.projection_energy@1", "calibration.fpca.bingham_exponential@1",
                "sampler.bingham.acg_rejection@1"]
    gibbs = sampler == "gibbs" and k > 1
    if not gibbs:
        if sampler == "deflation" and burn_in is not None:
            raise DomainError(f"burn_in ({burn_in!r}) is a parameter of the gibbs sampler only; exact draws need none")
        if non_private:
            raise DomainError("non_private is only meaningful with sampler 'gibbs' and n_components > 1")
        if k > 1:
            formulas += ["sensitivity.fpca.deflated_energy@1", "calibration.fpca.deflation@1",
                         "accounting.pure.sequential@1"]
        return FpcaPlan(basis, k, total, t, c, 0, method, _with_choices(formulas, choices),
                        sampler, choices)
    if not non_private:
        raise DomainError(
            "sampler ('gibbs') with n_components > 1 has no certified bound on the chain's distance from its target, "
            "so it is not differentially private; use sampler 'deflation' (exact, the default) or pass non_private=True"
        )
    burn = _validate.positive_int("burn_in", DEFAULT_BURN_IN if burn_in is None else burn_in, minimum=1)
    formulas.append("sampler.bingham.matrix_gibbs@1")
    if method == "hoff":
        formulas.append("sampler.bingham.hoff_scan@1")
    return FpcaPlan(basis, k, total, t, c, burn, method, _with_choices(formulas, choices),
                    sampler, choices)


def _with_choices(formulas: list[str], choices: tuple[PublicChoice, ...]) -> tuple[str, ...]:
    """``formulas`` followed by the public choices' formula ids not already listed."""
    return (*formulas, *sorted(choice_formulas(choices, raised=False) - set(formulas)))


def draw_fpca_components(plan: FpcaPlan, gram: ArrayLike, rng: np.random.Generator) -> NDArrayFloat:
    """One draw ``V`` (m x k) of the mechanism.

    ``deflation`` (and every ``k = 1``): ``k`` exact vector-Bingham draws, step ``j`` on the complement
    of the columns already drawn (:func:`fpca_deflation_parameter`, ``epsilon/k`` and ``c/k`` each).
    ``gibbs``: the last state of one chain started at a Haar-random frame (never at the non-private
    components; MATH.md §10.5) — no DP guarantee.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = fpca_basis(midpoint_grid(30), {"name": "gaussian", "length_scale": 0.2}, 5)
    >>> p = plan_fpca_release(b, n_components=2, epsilon=1.0, tau=1.0)
    >>> v = draw_fpca_components(p, np.eye(5), np.random.default_rng(0))
    >>> v.shape, bool(np.allclose(v.T @ v, np.eye(2)))
    ((5, 2), True)
    """
    if plan.exact:
        m, k = plan.basis.n_basis, plan.n_components
        frame = np.zeros((m, 0))
        for _ in range(k):
            q, a_j = fpca_deflation_parameter(gram, plan.basis.sigma, frame, epsilon=plan.epsilon_step, tau=plan.tau,
                                              prior_strength=plan.prior_strength / k)
            z = sample_vector_bingham(a_j, rng)
            frame = np.hstack([frame, (q @ z)[:, None]])
        return frame
    a = fpca_bingham_parameter(gram, plan.basis.sigma, epsilon=plan.epsilon_mechanism, tau=plan.tau,
                               prior_strength=plan.prior_strength)
    v = sample_matrix_bingham(a, plan.n_components, rng, n_sweeps=plan.burn_in, method=plan.method)
    out: NDArrayFloat = v[0]
    return out


@dataclass(frozen=True, eq=False)
class FpcaRelease:
    """A private FPCA release.

    Attributes:
        components: released component curves on the grid, ``B V`` (K x k); order and signs arbitrary.
        frame: ``V`` (m x k), orthonormal coefficients on the basis.
        plan: the public plan.
    """

    components: NDArrayFloat
    frame: NDArrayFloat
    plan: FpcaPlan

    @property
    def epsilon(self) -> float | None:
        """Privacy parameter of the (exact) mechanism; ``None`` for a Gibbs release (:attr:`private` false).

        The chain targets the ``plan.epsilon`` mechanism, but no bound certifies its draw, so it has no epsilon.
        """
        return self.plan.epsilon if self.plan.private else None

    @property
    def private(self) -> bool:
        """Whether the release is ``epsilon``-DP (exact draws); ``False`` for the Gibbs chain with ``k > 1``."""
        return self.plan.private

    @property
    def sensitivity(self) -> float:
        """``tau^2``."""
        return self.plan.sensitivity


def release_fpca(
    curves: ArrayLike,
    basis: FpcaBasis,
    *,
    n_components: int,
    epsilon: float,
    tau: float | str,
    rng: np.random.Generator,
    prior_strength: float | None = None,
    burn_in: int | None = None,
    method: str = "acg",
    sampler: str = "deflation",
    non_private: bool = False,
    tau_share: float = DEFAULT_TAU_SHARE,
    tau_range: tuple[float, float] | None = None,
) -> FpcaRelease:
    """Methodologist facade: clip, project, and release the span of ``k`` private components (MATH.md §10).

    ``curves`` must already be centred by a *public* reference (MATH.md §10.2); centring by
    the sample mean breaks the ``tau^2`` sensitivity.

    ``tau="auto"`` buys the clip radius with ``tau_share`` of ``epsilon`` (raised for small ``n``:
    :func:`fdpcore.noise.quantiles.choice_epsilon`): one OpenDP DP **median** (``tuning.tau.summary_level@1``) of the
    norms of ``curves`` — exactly the records the clip applies to — over the geometric grid on ``tau_range``
    (default ``[0.01, 1] * sqrt(|T|)``; :func:`fdpcore.noise.quantiles.plan_with_tau`), or the a-priori upper end of
    ``tau_range`` (free) when ``n * epsilon`` is too small. The plan's ``budget_splits`` are then ``tau`` and
    ``fpca`` (the mechanism, its steps and the paper's ``c = epsilon/2`` use what ``tau`` leaves); ``plan.tau`` is
    the drawn value. The quantile is OpenDP's draw, not ``rng``'s.

    Privacy assumptions:
        Grid, basis, ``Sigma``, ``tau``, ``c``, ``burn_in`` and ``n`` are public; one row per
        privacy unit. ``fdp release`` seeds ``rng`` from :mod:`secrets`; seeded generators are
        for simulations only.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> g = midpoint_grid(30)
    >>> b = fpca_basis(g, {"name": "gaussian", "length_scale": 0.2}, 5)
    >>> x = np.random.default_rng(1).standard_normal((50, 30)) * 0.3
    >>> r = release_fpca(x, b, n_components=1, epsilon=1.0, tau=1.0, rng=np.random.default_rng(2))
    >>> r.components.shape, round(float(g.norm(r.components.T)[0]), 12)
    ((30, 1), 1.0)
    >>> a = release_fpca(x, b, n_components=1, epsilon=2.0, tau="auto", rng=np.random.default_rng(2))
    >>> [s["name"] for s in a.plan.budget_splits], a.plan.tau == a.plan.public_choices[0].value
    (['tau', 'fpca'], True)
    """
    x = _validate.finite_matrix("curves", curves, ncols=basis.grid.size)

    def plan_at(radius: float, choices: tuple[PublicChoice, ...]) -> FpcaPlan:  # public inputs only
        return plan_fpca_release(basis, n_components=n_components, epsilon=epsilon, tau=radius,
                                 prior_strength=prior_strength, burn_in=burn_in, method=method, sampler=sampler,
                                 non_private=non_private, public_choices=choices)

    # x holds exactly the records the clip applies to (fpca_gram clips them to plan.tau)
    plan = plan_with_tau(tau, x, basis.grid, plan_at, summary="fpca", epsilon=epsilon, tau_share=tau_share,
                         tau_range=tau_range)
    v = draw_fpca_components(plan, fpca_gram(x, basis, plan.tau), rng)
    return FpcaRelease(basis.functions @ v, v, plan)


def top_components(coefficients: ArrayLike, k: int) -> NDArrayFloat:
    """Non-private top-``k`` eigenvectors ``V_hat`` of ``X^T X`` (m x k), for utility metrics only.

    >>> top_components(np.diag([3.0, 1.0, 2.0]), 2).round(12).tolist()
    [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]
    """
    x = np.asarray(coefficients, dtype=np.float64)
    lam, vec = np.linalg.eigh(x.T @ x)
    v = vec[:, ::-1][:, : _validate.positive_int("k", k)]
    signs = np.sign(v[np.argmax(np.abs(v), axis=0), np.arange(v.shape[1])])
    out: NDArrayFloat = v * signs
    return out


def variance_ratio(coefficients: ArrayLike, frames: ArrayLike) -> NDArrayFloat | float:
    """Share of the top-``k`` variance captured by a released frame (MATH.md §10.5; in ``[0, 1]``).

    The dimensionally consistent version of [AKRS]'s ratio:

    .. math:: \\mathrm{VR}=\\frac{\\mathrm{tr}(\\tilde V^\\top\\mathbf X^\\top\\mathbf X\\tilde V)}
              {\\mathrm{tr}(\\hat V^\\top\\mathbf X^\\top\\mathbf X\\hat V)}

    ``frames`` is one ``(m, k)`` frame or a stack ``(r, m, k)``.

    >>> x = np.diag([2.0, 1.0, 0.0])
    >>> float(variance_ratio(x, np.eye(3)[:, [1]]))
    0.25
    """
    x = np.asarray(coefficients, dtype=np.float64)
    v = np.asarray(frames, dtype=np.float64)
    gram = x.T @ x
    k = v.shape[-1]
    lam = np.linalg.eigvalsh(gram)[::-1]
    num = np.einsum("...ik,ij,...jk->...", v, gram, v)
    out = num / lam[:k].sum()
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


def variance_ratio_paper(coefficients: ArrayLike, frames: ArrayLike) -> NDArrayFloat | float:
    """[AKRS]'s printed ratio read literally with ``S = X^T X``: ``tr((P S P)^2) / tr((P_hat S P_hat)^2)``.

    Kept for comparison only (MATH.md §10.5); :func:`variance_ratio` is the reported metric.

    >>> x = np.diag([2.0, 1.0, 0.0])
    >>> float(variance_ratio_paper(x, np.eye(3)[:, [1]]))
    0.0625
    """
    x = np.asarray(coefficients, dtype=np.float64)
    v = np.asarray(frames, dtype=np.float64)
    gram = x.T @ x
    k = v.shape[-1]
    lam = np.linalg.eigvalsh(gram)[::-1]
    m_small = np.einsum("...ik,ij,...jl->...kl", v, gram, v)  # V^T S V; tr((PSP)^2) = ||V^T S V||_F^2
    out = np.einsum("...kl,...kl->...", m_small, m_small) / float(np.sum(lam[:k] ** 2))
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


def projection_distance(frames: ArrayLike, reference: ArrayLike) -> NDArrayFloat | float:
    """Projection distance ``||P - P_hat||_F^2 / 2 = k - ||V^T V_hat||_F^2`` (MATH.md §10.5; in ``[0, k]``).

    .. math:: d(\\tilde P,\\hat P)=\\tfrac12\\lVert\\tilde P-\\hat P\\rVert_F^2=k-\\lVert\\tilde V^\\top\\hat V\\rVert_F^2

    >>> float(projection_distance(np.eye(3)[:, :2], np.eye(3)[:, 1:]))
    1.0
    """
    v = np.asarray(frames, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    cross = np.einsum("...ik,il->...kl", v, ref)
    out = v.shape[-1] - np.einsum("...kl,...kl->...", cross, cross)
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


@dataclass(frozen=True)
class GibbsDiagnostic:
    """Convergence diagnostic of the matrix Gibbs sampler (methodologist API; never published).

    Attributes:
        checkpoints: sweep counts at which the diagnostic was computed.
        rhat: split potential scale reduction (Gelman-Rubin) at each checkpoint, the maximum
            over the energy ``tr(V^T A V)`` and every entry of ``V V^T``, computed on the
            second half of the sweeps up to the checkpoint.
        energy: ``(n_chains, n_sweeps)`` energy trace.
        threshold: the R-hat threshold.
    """

    checkpoints: tuple[int, ...]
    rhat: tuple[float, ...]
    energy: NDArrayFloat
    threshold: float

    @property
    def converged_after(self) -> int | None:
        """First checkpoint from which R-hat stays below the threshold (``None`` if never)."""
        for i, c in enumerate(self.checkpoints):
            if all(r < self.threshold for r in self.rhat[i:]):
                return c
        return None


def _split_rhat(draws: NDArrayFloat) -> NDArrayFloat:
    """Split R-hat over axis 0 = chains, axis 1 = iterations, for every trailing statistic."""
    n = draws.shape[1] // 2
    halves = np.concatenate([draws[:, :n], draws[:, n: 2 * n]], axis=0)
    chain_means = halves.mean(axis=1)
    within = halves.var(axis=1, ddof=1).mean(axis=0)
    between = n * chain_means.var(axis=0, ddof=1)
    var_hat = (n - 1) / n * within + between / n
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(var_hat / within)
    out: NDArrayFloat = np.where(within > 1e-14, r, 1.0)
    return out


def gibbs_diagnostic(
    a: ArrayLike,
    k: int,
    rng: np.random.Generator,
    *,
    n_sweeps: int = 2000,
    n_chains: int = 8,
    n_checkpoints: int = 10,
    threshold: float = 1.01,
    method: str = "acg",
) -> GibbsDiagnostic:
    """Run ``n_chains`` Haar-started chains and report split R-hat at checkpoints (MATH.md §10.5).

    For methodologists choosing a burn-in (on public or synthetic data with the same
    ``m, k, eps, n, tau``): the result depends on ``A``, so it must never be computed on
    the private data of a release and published.

    >>> d = gibbs_diagnostic(np.diag([3.0, 2.0, 0.0, 0.0]), 2, np.random.default_rng(0), n_sweeps=200, n_chains=4)
    >>> len(d.rhat), d.energy.shape
    (10, (4, 200))
    """
    n_sweeps = _validate.positive_int("n_sweeps", n_sweeps, minimum=4)
    chains = BinghamChains.start(a, k, rng, n_chains=_validate.positive_int("n_chains", n_chains, minimum=2),
                                 method=method)
    mat = chains.a
    m = mat.shape[0]
    iu = np.triu_indices(m)
    stats = np.empty((n_chains, n_sweeps, 1 + iu[0].size))
    for s in range(n_sweeps):
        chains.run(1, rng)
        v = chains.frames[:, :, :k]
        stats[:, s, 0] = np.einsum("bik,ij,bjk->b", v, mat, v)
        stats[:, s, 1:] = np.einsum("bik,bjk->bij", v, v)[:, iu[0], iu[1]]
    checkpoints = tuple(int(c) for c in np.unique(np.linspace(n_sweeps / n_checkpoints, n_sweeps, n_checkpoints).astype(int)))
    rhat = tuple(float(np.max(_split_rhat(stats[:, c // 2: c]))) if c >= 8 else float("inf") for c in checkpoints)
    return GibbsDiagnostic(checkpoints, rhat, stats[:, :, 0].copy(), float(threshold))
