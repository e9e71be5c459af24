"""[HRW] release of GP-noised evaluations: batch and online (MATH.md §11).

The mechanism releases ``f_D + s G`` with ``G ~ GP(0, K)``; it is ``(epsilon, delta)``-DP when
``s`` is calibrated to ``Delta >= sup ||f_D - f_D'||_{H_K}`` (``s = c(delta) Delta / epsilon``,
or the analytic Gaussian sigma). Every set of evaluations, adaptive or not, is post-processing
of that one random function, so answering queries one at a time with the *conditional* law
of the noise given the noise already released costs nothing beyond the one release.

* :func:`release_hrw_batch`: ``f_D(x_1:m) + N(0, s^2 K_m)`` (the corrected square of [HRW] §5).
* :class:`OnlineGPReleaser`: any kernel; a Cholesky factor of ``K_i`` grown by one
  Schur-complement row per query, ``O(i^2)`` per query, never refactorised.
* :class:`OUBridgeReleaser`: the 1-D exponential kernel ``exp(-gamma |x - y|)`` (Ornstein–Uhlenbeck,
  Markov): the conditional law depends on the two nearest released points only, found by
  bisection on a sorted list (``O(log i)`` lookup).

The noise scale ``s`` is the caller's (this module does not calibrate it). With
``secure=True`` every draw comes from OpenDP's floating-point-safe Gaussian applied to the
released value's conditional mean; ``secure=False`` uses NumPy and is for simulations only.
The online objects keep ``(x_i, xi(x_i))`` in memory for the session only: they cannot be
pickled or copied, have no data in their ``repr``, and never log.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from typing import NoReturn

import numpy as np
import opendp.prelude as dp
from scipy import linalg

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.kernels import KernelSpec, kernel_matrix, kernel_spec
from fdpcore.basis.tensor import SeparableKernel, separable_kernel, separable_kernel_matrix
from fdpcore.errors import DomainError

__all__ = [
    "DEFAULT_NUGGET",
    "OUBridgeReleaser",
    "OnlineGPReleaser",
    "gaussian_conditional",
    "ou_bridge_conditional",
    "release_hrw_batch",
]

#: Default relative nugget: independent extra noise of variance ``s^2 * nugget * K(x, x)`` per
#: distinct point. Adding independent noise is post-processing, so it never weakens privacy;
#: it keeps the Cholesky factor well conditioned for near-duplicate query points.
DEFAULT_NUGGET = 1e-10

KernelLike = Mapping[str, object] | KernelSpec | SeparableKernel


def _resolve_kernel(kernel: KernelLike) -> KernelSpec | SeparableKernel:
    if isinstance(kernel, (KernelSpec, SeparableKernel)):
        return kernel
    if isinstance(kernel, Mapping) and str(kernel.get("name", "")).lower() == "separable":
        return separable_kernel(kernel)
    return kernel_spec(kernel)


def _points(kernel: KernelSpec | SeparableKernel, points: ArrayLike) -> NDArrayFloat:
    x = np.asarray(points, dtype=np.float64)
    if isinstance(kernel, SeparableKernel):
        if x.ndim != 2 or x.shape[1] != 2:
            raise DomainError(f"points (shape {x.shape}) must be an m x 2 array for a separable 2-D kernel")
    elif x.ndim != 1:
        raise DomainError(f"points (shape {x.shape}) must be a 1-D array for a 1-D kernel")
    if x.shape[0] < 1 or not np.all(np.isfinite(x)):
        raise DomainError("points must be a non-empty array of finite values")
    return x


def _kmat(kernel: KernelSpec | SeparableKernel, x: NDArrayFloat, y: NDArrayFloat) -> NDArrayFloat:
    if isinstance(kernel, SeparableKernel):
        return separable_kernel_matrix(kernel, x, y)
    return kernel_matrix(kernel, x, y)


def _nugget(nugget: float) -> float:
    try:
        v = float(nugget)
    except (TypeError, ValueError):
        raise DomainError(f"nugget ({nugget!r}) must be a number") from None
    if not (math.isfinite(v) and 0.0 <= v < 1.0):
        raise DomainError(f"nugget ({nugget!r}) must be in [0, 1)")
    return v


def _finite_value(value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DomainError("value must be a real number") from None
    if not math.isfinite(v):
        raise DomainError("value must be finite")
    return v


def release_hrw_batch(
    values: ArrayLike,
    points: ArrayLike,
    kernel: KernelLike,
    *,
    noise_scale: float,
    draws: int = 1,
    secure: bool = True,
    nugget: float = DEFAULT_NUGGET,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Release ``f_D`` at ``m`` query points with GP noise (formula ``release.hrw.batch@1``, MATH.md §11).

    .. math:: \\tilde f(x_{1:m})\\sim N\\big(f_D(x_{1:m}),\\ s^2K_m\\big),\\qquad K_m=[K(x_a,x_b)]_{a,b\\le m}.

    [HRW] §5 prints the covariance as :math:`\\frac{c\\Delta}{\\alpha}K_m`; the scale must be
    squared (MATH.md §14 item 15). Sampled as ``f + s L z`` with ``K_m + nugget * diag(K_m) = L L^T``.
    With ``secure=True`` the data enter OpenDP only: the whitened vector ``L^{-1} f`` receives
    OpenDP's vector Gaussian with scale ``s`` and is recoloured by ``L`` (post-processing).

    Args:
        values: ``f_D(x_1), ..., f_D(x_m)`` (non-private; never logged).
        points: ``m`` query points (``m x 2`` for a separable 2-D kernel).
        kernel: the noise kernel ``K`` (1-D mapping, or a separable 2-D kernel).
        noise_scale: ``s``, calibrated by the caller to the RKHS sensitivity.
        draws: number of independent releases (each costs the full budget).
        secure: OpenDP sampler (``True``) or NumPy (simulations only).
        nugget: relative jitter; extra independent noise, privacy-neutral (post-processing).
        rng: NumPy generator for ``secure=False``.

    Returns:
        ``draws x m`` released values.

    Privacy assumptions: ``points``, ``kernel`` and ``noise_scale`` are public (not chosen from
    the data); ``s`` is calibrated to ``Delta >= sup ||f_D - f_D'||_{H_K}``.

    >>> out = release_hrw_batch([0.0, 1.0], [0.2, 0.8], {"name": "exponential", "rho": 0.5},
    ...                         noise_scale=0.1, draws=3, secure=False, rng=np.random.default_rng(0))
    >>> out.shape
    (3, 2)
    """
    k = _resolve_kernel(kernel)
    x = _points(k, points)
    f = np.asarray(values, dtype=np.float64)
    if f.shape != (x.shape[0],) or not np.all(np.isfinite(f)):
        raise DomainError(f"values (shape {f.shape}) must be {x.shape[0]} finite numbers, one per point")
    s = _validate.positive_finite("noise_scale", noise_scale)
    draws = _validate.positive_int("draws", draws)
    jitter = _nugget(nugget)
    cov = _kmat(k, x, x)
    cov = (cov + cov.T) / 2.0
    cov[np.diag_indices_from(cov)] *= 1.0 + jitter
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise DomainError(
            f"the kernel matrix at the query points is not positive definite with nugget ({jitter!r}); "
            "use distinct points or a larger nugget"
        ) from None
    if secure:
        white = linalg.solve_triangular(chol, f, lower=True)
        meas = _opendp_gaussian_vector(white.shape[0], s)
        noisy_white = np.array([meas(white.tolist()) for _ in range(draws)], dtype=np.float64)
        return np.asarray(noisy_white @ chol.T, dtype=np.float64)
    gen = rng if rng is not None else np.random.default_rng()
    z = gen.standard_normal((draws, x.shape[0]))
    return np.asarray(f + s * (z @ chol.T), dtype=np.float64)


def gaussian_conditional(
    factor: ArrayLike, white_noise: ArrayLike, k_cross: ArrayLike, k_point: float
) -> tuple[float, float, NDArrayFloat]:
    """One online step for a general kernel (formula ``release.hrw.online_conditional@1``, MATH.md §11).

    .. math::
        \\xi(x_i)\\mid\\xi_{1:i-1}\\sim N\\big(V_i^\\top C_i^{-1}\\xi_{1:i-1},\\
        s^2(K(x_i,x_i)-V_i^\\top C_i^{-1}V_i)\\big),

    computed with the Cholesky factor ``C_i = L L^T`` and the whitened noise ``z = L^{-1} xi``:
    ``y = L^{-1} V_i`` (one triangular solve, ``O(i^2)``), mean ``y^T z``, unit variance
    ``d = K(x_i, x_i) - y^T y`` (the Schur complement). The factor of ``C_{i+1}`` is ``L``
    bordered by the row ``[y^T, sqrt(d)]``, and ``z_i = (xi_i - y^T z) / sqrt(d)``: a rank-one
    update, never a refactorisation.

    Args:
        factor: lower-triangular ``L`` (``i-1 x i-1``) with ``L L^T = C_i``.
        white_noise: ``z = L^{-1} xi_{1:i-1}``.
        k_cross: ``V_i = [K(x_a, x_i)]_{a < i}``.
        k_point: ``K(x_i, x_i)`` (plus any nugget).

    Returns:
        ``(mean, unit_variance, y)``; the noise variance is ``s^2 * unit_variance``.

    >>> m, v, y = gaussian_conditional(np.ones((1, 1)), [0.5], [0.6], 1.0)
    >>> round(m, 12), round(v, 12)
    (0.3, 0.64)
    """
    lf = np.asarray(factor, dtype=np.float64)
    z = np.asarray(white_noise, dtype=np.float64)
    v = np.asarray(k_cross, dtype=np.float64)
    if lf.shape[0] == 0:
        return 0.0, float(k_point), np.zeros(0)
    y = _forward_substitution(lf, v)
    return float(y @ z), float(k_point - y @ y), y


def _forward_substitution(lf: NDArrayFloat, v: NDArrayFloat, block: int = 256) -> NDArrayFloat:
    """Solve ``L y = v`` by blocks: BLAS matrix-vector products on strided views, small triangular solves.

    ``L`` is usually a leading block of a larger preallocated array, i.e. not contiguous;
    a direct LAPACK call would copy all of it (O(i^2) memory traffic per query). Here only
    the ``block x block`` diagonal blocks are copied.
    """
    n = lf.shape[0]
    y = np.empty(n)
    for start in range(0, n, block):
        stop = min(start + block, n)
        rhs = v[start:stop] - lf[start:stop, :start] @ y[:start] if start else v[start:stop]
        y[start:stop] = linalg.solve_triangular(lf[start:stop, start:stop], rhs, lower=True, check_finite=False)
    return y


def ou_bridge_conditional(x: float, left: float | None, right: float | None, gamma: float) -> tuple[float, float, float]:
    """Weights and unit variance of the OU bridge (formula ``release.hrw.online_ou_bridge@1``, MATH.md §11).

    For ``K(x, y) = exp(-gamma |x - y|)`` and released neighbours ``x_L < x < x_R``, with
    :math:`\\varsigma(u)=\\sinh(\\gamma u)`:

    .. math::
        \\mathrm E\\,\\xi(x)=\\frac{\\varsigma(x_R-x)}{\\varsigma(x_R-x_L)}\\xi(x_L)
        +\\frac{\\varsigma(x-x_L)}{\\varsigma(x_R-x_L)}\\xi(x_R),\\qquad
        \\frac{\\mathrm{Var}}{s^2}=1-e^{-\\gamma(x-x_L)}\\frac{\\varsigma(x_R-x)}{\\varsigma(x_R-x_L)}
        -e^{-\\gamma(x_R-x)}\\frac{\\varsigma(x-x_L)}{\\varsigma(x_R-x_L)}
        =\\frac{2\\varsigma(x-x_L)\\varsigma(x_R-x)}{\\varsigma(x_R-x_L)} ;

    left of all points: weight ``exp(-gamma (x_R - x))`` on ``xi(x_R)`` and unit variance
    ``1 - exp(-2 gamma (x_R - x))``; right of all points: the mirror image; no points: the
    prior ``(0, 0, 1)``. Computed with ``expm1`` in the algebraically equal forms
    ``sinh(a)/sinh(a+b) = e^{-b}(1 - e^{-2a})/(1 - e^{-2(a+b)})`` so that nothing overflows
    for large ``gamma u`` or cancels for small ``gamma u``.

    Returns:
        ``(weight_left, weight_right, unit_variance)``; a missing neighbour has weight 0.

    >>> [round(v, 5) for v in ou_bridge_conditional(0.5, 0.0, 1.0, 1.5)]  # MATH.md Appendix A
    [0.38619, 0.38619, 0.63515]
    """
    g = _validate.positive_finite("gamma", gamma, privacy=False)
    if left is None and right is None:
        return 0.0, 0.0, 1.0
    if left is not None and right is not None:
        if not left < x < right:
            raise DomainError("the OU bridge needs left < x < right")
        a, b = g * (x - left), g * (right - x)
        one_a, one_b, one_ab = -math.expm1(-2 * a), -math.expm1(-2 * b), -math.expm1(-2 * (a + b))
        w_left = math.exp(-a) * one_b / one_ab
        w_right = math.exp(-b) * one_a / one_ab
        return w_left, w_right, one_a * one_b / one_ab
    if right is not None:
        if not x < right:
            raise DomainError("the OU left end needs x < right")
        b = g * (right - x)
        return 0.0, math.exp(-b), -math.expm1(-2 * b)
    if left is None or not left < x:
        raise DomainError("the OU right end needs left < x")
    a = g * (x - left)
    return math.exp(-a), 0.0, -math.expm1(-2 * a)


class _OnlineBase:
    """Shared session state: secure/NumPy scalar draws and the no-persistence guard."""

    def __init__(self, noise_scale: float, secure: bool, rng: np.random.Generator | None) -> None:
        self._s = _validate.positive_finite("noise_scale", noise_scale)
        self._secure = bool(secure)
        self._rng = rng if rng is not None else np.random.default_rng()
        #: cumulative number of stored noise values read to answer queries (an operation count).
        self.noise_reads = 0

    @property
    def noise_scale(self) -> float:
        """The GP noise scale ``s`` (public)."""
        return self._s

    @property
    def secure(self) -> bool:
        """Whether draws come from OpenDP's floating-point-safe Gaussian."""
        return self._secure

    def _draw(self, centre: float, sd: float) -> float:
        """One draw of ``N(centre, sd^2)``: OpenDP on ``centre`` when secure, NumPy otherwise."""
        if not sd > 0:
            raise DomainError("the conditional noise variance must be > 0 at a new query point")
        if self._secure:
            return float(_opendp_gaussian_scalar(sd)(centre))
        return float(centre + sd * self._rng.standard_normal())

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise DomainError(f"{type(self).__name__} cannot be pickled or copied: it holds realised noise (MATH.md §12.4)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(noise_scale={self._s!r}, secure={self._secure!r})"


class OnlineGPReleaser(_OnlineBase):
    """Online [HRW] release for any kernel: each answer follows the conditional law (MATH.md §11).

    ``release(x, value)`` returns ``value + xi(x)``, where ``value = f_D(x)`` and ``xi(x)`` is
    drawn from the law of ``s G(x)`` given the noise already released
    (:func:`gaussian_conditional`). The Cholesky factor of the released points' kernel
    matrix grows by one row per new point (``O(i^2)`` per query). A repeated point returns
    the stored answer. The joint law of all answers is exactly ``N(f_D(x), s^2 (K_m + nugget diag K_m))``.

    Args:
        kernel: the noise kernel (1-D mapping/spec, or a separable 2-D kernel with points ``(s, u)``).
        noise_scale: ``s`` (the caller's calibration).
        secure: OpenDP draws (``True``) or NumPy (simulations only).
        nugget: relative jitter added to ``K(x, x)``; extra independent noise, privacy-neutral.
        rng: NumPy generator for ``secure=False``.

    Privacy assumptions: as :func:`release_hrw_batch`; the whole session is one release.

    >>> r = OnlineGPReleaser({"name": "gaussian", "length_scale": 0.3}, noise_scale=0.1,
    ...                      secure=False, rng=np.random.default_rng(1))
    >>> a = r.release(0.4, 1.0)
    >>> a == r.release(0.4, 1.0), r.n_points
    (True, 1)
    """

    def __init__(
        self,
        kernel: KernelLike,
        noise_scale: float,
        *,
        secure: bool = True,
        nugget: float = DEFAULT_NUGGET,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(noise_scale, secure, rng)
        self._kernel = _resolve_kernel(kernel)
        self._dim = 2 if isinstance(self._kernel, SeparableKernel) else 1
        self._nugget = _nugget(nugget)
        cap = 16
        self._x = np.zeros((cap, self._dim))
        self._factor = np.zeros((cap, cap))
        self._white = np.zeros(cap)
        self._xi = np.zeros(cap)
        self._n = 0
        self._answers: dict[tuple[float, ...], float] = {}

    @property
    def n_points(self) -> int:
        """Number of distinct points released so far."""
        return self._n

    def _grow(self) -> None:
        cap = 2 * self._x.shape[0]
        x, f, w, xi = self._x, self._factor, self._white, self._xi
        self._x = np.zeros((cap, self._dim))
        self._x[: self._n] = x[: self._n]
        self._factor = np.zeros((cap, cap))
        self._factor[: self._n, : self._n] = f[: self._n, : self._n]
        self._white = np.zeros(cap)
        self._white[: self._n] = w[: self._n]
        self._xi = np.zeros(cap)
        self._xi[: self._n] = xi[: self._n]

    def release(self, x: float | ArrayLike, value: float) -> float:
        """Answer the query at ``x``: ``value + xi(x)`` with ``value = f_D(x)`` (not stored, not logged)."""
        pt = np.atleast_1d(np.asarray(x, dtype=np.float64))
        if pt.shape != (self._dim,) or not np.all(np.isfinite(pt)):
            raise DomainError(f"x must be {'a finite (s, u) pair' if self._dim == 2 else 'a finite number'}")
        key = tuple(float(v) for v in pt)
        if key in self._answers:
            return self._answers[key]
        fx = _finite_value(value)
        n = self._n
        prev = self._x[:n]
        if self._dim == 1:
            k_cross = _kmat(self._kernel, prev[:, 0], pt)[:, 0]
            k_point = float(_kmat(self._kernel, pt, pt)[0, 0])
        else:
            k_cross = _kmat(self._kernel, prev, pt[None, :])[:, 0]
            k_point = float(_kmat(self._kernel, pt[None, :], pt[None, :])[0, 0])
        k_point *= 1.0 + self._nugget
        mean, unit_var, y = gaussian_conditional(self._factor[:n, :n], self._white[:n], k_cross, k_point)
        self.noise_reads += n
        if not unit_var > 1e-14 * k_point:
            raise DomainError(
                f"the conditional variance at this query point is numerically zero with nugget ({self._nugget!r}); "
                "use a larger nugget"
            )
        root = math.sqrt(unit_var)
        answer = self._draw(fx + self._s * mean, self._s * root)
        xi = answer - fx
        if n == self._x.shape[0]:
            self._grow()
        self._x[n] = pt
        self._factor[n, :n] = y
        self._factor[n, n] = root
        self._xi[n] = xi
        self._white[n] = (xi / self._s - mean) / root
        self._n = n + 1
        self._answers[key] = answer
        return answer


class OUBridgeReleaser(_OnlineBase):
    """Online [HRW] release for the 1-D exponential kernel ``exp(-|x - y| / rho)`` (MATH.md §11).

    The OU process is Markov, so the conditional law of ``xi(x)`` given all released noise
    depends only on the nearest released neighbours (:func:`ou_bridge_conditional`), found
    by bisection on a sorted list: ``O(log i)`` comparisons and two stored values read per
    query. A repeated point returns the stored answer.

    Args:
        kernel: ``{"name": "exponential", "rho": rho}`` (or Matérn with ``nu = 0.5``); ``gamma = 1/rho``.
        noise_scale: ``s`` (the caller's calibration).
        secure: OpenDP draws (``True``) or NumPy (simulations only).
        rng: NumPy generator for ``secure=False``.

    >>> r = OUBridgeReleaser({"name": "exponential", "rho": 0.5}, noise_scale=0.1,
    ...                      secure=False, rng=np.random.default_rng(2))
    >>> answers = [r.release(x, 0.0) for x in (0.1, 0.9, 0.5, 0.1)]
    >>> answers[0] == answers[3], r.n_points
    (True, 3)
    """

    def __init__(
        self,
        kernel: Mapping[str, object] | KernelSpec,
        noise_scale: float,
        *,
        secure: bool = True,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(noise_scale, secure, rng)
        spec = kernel_spec(kernel)
        if spec.name == "exponential" or (spec.name == "matern" and spec.param("nu") == 0.5):
            self._gamma = 1.0 / spec.param("rho")
        else:
            raise DomainError(f"kernel.name ({spec.name!r}) must be 'exponential' (Matérn nu = 0.5) for the OU bridge")
        self._sorted: list[float] = []
        self._noise: dict[float, float] = {}
        self._answers: dict[float, float] = {}

    @property
    def gamma(self) -> float:
        """``gamma = 1 / rho`` of ``K(x, y) = exp(-gamma |x - y|)``."""
        return self._gamma

    @property
    def n_points(self) -> int:
        """Number of distinct points released so far."""
        return len(self._sorted)

    def release(self, x: float, value: float) -> float:
        """Answer the query at ``x``: ``value + xi(x)`` with ``value = f_D(x)`` (not stored, not logged)."""
        xf = _finite_value(x)
        if xf in self._answers:
            return self._answers[xf]
        fx = _finite_value(value)
        i = bisect.bisect_left(self._sorted, xf)
        left = self._sorted[i - 1] if i > 0 else None
        right = self._sorted[i] if i < len(self._sorted) else None
        w_left, w_right, unit_var = ou_bridge_conditional(xf, left, right, self._gamma)
        mean = 0.0
        if left is not None:
            mean += w_left * self._noise[left]
            self.noise_reads += 1
        if right is not None:
            mean += w_right * self._noise[right]
            self.noise_reads += 1
        answer = self._draw(fx + mean, self._s * math.sqrt(unit_var))
        self._sorted.insert(i, xf)
        self._noise[xf] = answer - fx
        self._answers[xf] = answer
        return answer


def _opendp_gaussian_scalar(scale: float) -> dp.Measurement:
    dp.enable_features("contrib")
    return dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)


def _opendp_gaussian_vector(size: int, scale: float) -> dp.Measurement:
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)
