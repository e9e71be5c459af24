"""Samplers for the vector and matrix Bingham laws (MATH.md §10.4).

The vector Bingham law on the unit sphere :math:`S^{q-1}` has density
:math:`\\propto\\exp(z^\\top A z)` with respect to the uniform measure; the matrix
Bingham law on the Stiefel manifold :math:`\\mathcal V_{m,k}` has density
:math:`\\propto\\mathrm{etr}(V^\\top A V)` with respect to Haar measure.

* :func:`sample_vector_bingham` draws *exactly* (Kent, Ganeiber & Mardia 2018 rejection
  sampler with an angular central Gaussian envelope; exact von Mises draw when ``q = 2``).
* :func:`hoff_scan` is one Markov update of [Hoff]'s coordinate scan (rstiefel
  ``rbing.vector.gibbs``), with the ``q = 2`` and ``a < -k_q`` corrections of MATH.md §10.4.
* :func:`sample_matrix_bingham` runs the column-wise Gibbs sampler ([Hoff], rstiefel
  ``rbing.matrix.gibbs`` with ``B = I``) for many independent chains at once. Each column
  update is an exact draw from its full conditional (``method="acg"``, the default) or
  one coordinate scan (``method="hoff"``).

The exact ACG paths (single-matrix vector draws, and the Gibbs sweep with ``m - k + 1 >= 3``)
run in compiled kernels (:mod:`fdpcore.noise._bingham_kernels`, numba) that loop over chains, sweeps,
columns and proposals without Python overhead; the kernels are fed blocks of normals and
uniforms drawn here from the caller's :class:`numpy.random.Generator` (the only source of
randomness). Without numba the same kernel bodies run as NumPy code for one chain, and the
NumPy paths batched over a leading axis of chains (:meth:`BinghamChains._sweep_stack`,
:func:`_acg_draw`) serve stacks; ``method="hoff"`` and the ``q = 2`` circle always take those.

Performance: without numba a column update makes a few LAPACK calls on matrices of size
``m - k + 1``; with a multi-threaded BLAS, thread wake-ups can cost more than the work
(observed: 10-30x on a busy machine). Run long chains with ``OPENBLAS_NUM_THREADS=1`` or under
``threadpoolctl.threadpool_limits(1)`` (``fdp release`` does the latter). The compiled kernels
are not affected (measured: same time with and without the limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.linalg import lapack

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore._validate import positive_int
from fdpcore.errors import DomainError, InternalError
from fdpcore.noise import _bingham_kernels as kernels

__all__ = [
    "BinghamChains",
    "acg_envelope_b",
    "haar_stiefel",
    "hoff_scan",
    "sample_matrix_bingham",
    "sample_vector_bingham",
]

#: Proposals drawn per chain and round by the rejection samplers (vectorised rejection).
_PROPOSALS = 8
#: Give up (InternalError) after this many rejection rounds: unreachable for a valid envelope.
_MAX_ROUNDS = 100_000
#: Re-orthonormalise the chains' frames every this many sweeps (rounding drift only).
_REORTHO_EVERY = 50
#: Newton steps for the ACG parameter b: each iterate is a valid b (see acg_envelope_b); 3 reach the root to ~0.2%.
_NEWTON_STEPS = kernels.NEWTON_STEPS
#: Kernel paths: first guess of ACG proposals per accepted draw (adapted to the observed rate while running).
_PROPOSALS_PER_DRAW = 2.0
#: Kernel paths: at most this many proposals (rows of normals) are drawn per block.
_MAX_PROPOSAL_BLOCK = 1 << 15
#: Kernel paths: give up (InternalError) after this many consecutive blocks without an acceptance.
_MAX_STALLS = 64


def _symmetric_stack(name: str, a: ArrayLike) -> tuple[NDArrayFloat, bool]:
    arr = np.asarray(a, dtype=np.float64)
    single = arr.ndim == 2
    if single:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[1] < 1:
        raise DomainError(f"{name} (shape {np.shape(a)}) must be a square matrix or a stack of square matrices")
    if not np.isfinite(arr).all():
        raise DomainError(f"{name} must contain only finite values")
    transposed = np.swapaxes(arr, 1, 2)
    scale = max(1.0, float(np.abs(arr).max()))
    if float(np.abs(arr - transposed).max()) > 1e-10 * scale:
        raise DomainError(f"{name} must be symmetric")
    return (arr + transposed) * 0.5, single


def acg_envelope_b(shifted_eigenvalues: ArrayLike, steps: int = 8) -> NDArrayFloat:
    """The ACG envelope parameter ``b``: the root of ``sum_i 1/(b + 2 l_i) = 1`` in ``[1, q]``.

    ``shifted_eigenvalues`` are the eigenvalues ``l_i >= 0`` of ``l_max I - A`` (minimum 0),
    one row per problem. Any ``b`` in ``(0, q]`` gives a valid envelope; this root maximises
    the acceptance rate (Kent, Ganeiber & Mardia 2018; MATH.md §10.4 option B).

    >>> float(acg_envelope_b([[0.0, 0.0, 0.0]])[0])  # uniform law: b = q
    3.0
    """
    lt = np.atleast_2d(np.asarray(shifted_eigenvalues, dtype=np.float64))
    q = lt.shape[1]
    two_l = 2.0 * lt
    b = np.ones(lt.shape[0])
    # h(b) = 1 / sum_i 1/(b + 2 l_i) is a harmonic mean of affine functions, hence concave and
    # increasing, with h(1) <= 1 (one l_i is 0). Newton's iterates from b = 1 therefore increase
    # monotonically to the root and never pass it: every iterate is a valid b <= q.
    for _ in range(steps):
        inv = 1.0 / (b[:, None] + two_l)
        s1 = inv.sum(axis=1)
        s2 = np.einsum("ij,ij->i", inv, inv)
        b = b + (1.0 - 1.0 / s1) * s1 * s1 / s2
    out: NDArrayFloat = np.clip(b, 1.0, float(q))
    return out


def _acg_draw(a: NDArrayFloat, rng: np.random.Generator) -> NDArrayFloat:
    """Exact draws from ``exp(z^T a z)`` on the sphere, one per matrix of the stack ``a``."""
    n, q, _ = a.shape
    if n == 1:
        return _acg_draw_one(a[0], rng)[None]
    lam = np.linalg.eigvalsh(a)  # ascending
    lmax = lam[:, -1]
    b = acg_envelope_b(lmax[:, None] - lam, steps=_NEWTON_STEPS)
    eye = np.eye(q)
    a_t = lmax[:, None, None] * eye - a  # PSD, smallest eigenvalue 0
    omega = eye + (2.0 / b)[:, None, None] * a_t
    chol_t = np.swapaxes(np.linalg.cholesky(omega), 1, 2)  # Omega = L L^T; w = L^{-T} g ~ N(0, Omega^{-1})
    log_const = (q - b) / 2.0 - (q / 2.0) * np.log(q / b)
    out = np.empty((n, q))
    todo = np.arange(n)
    for _ in range(_MAX_ROUNDS):
        g = rng.standard_normal((todo.size, q, _PROPOSALS))
        w = np.linalg.solve(chol_t[todo], g)
        x = w / np.linalg.norm(w, axis=1, keepdims=True)
        y = np.einsum("bip,bij,bjp->bp", x, a_t[todo], x)
        bt = b[todo][:, None]
        log_ratio = -y + (q / 2.0) * np.log1p(2.0 * y / bt) + log_const[todo][:, None]
        ok = np.log(rng.random(log_ratio.shape)) <= log_ratio
        has = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        hit = np.flatnonzero(has)
        out[todo[hit]] = x[hit, :, first[hit]]
        todo = todo[~has]
        if todo.size == 0:
            return out
    raise InternalError("the ACG rejection sampler did not accept within its round limit")  # pragma: no cover


def _acg_draw_one(a: NDArrayFloat, rng: np.random.Generator) -> NDArrayFloat:
    """:func:`_acg_draw` for one matrix, calling LAPACK directly (no stack overhead per call)."""
    q = a.shape[0]
    lam, _, info = lapack.dsyevd(a.T, compute_v=0)  # a is symmetric: its transpose is a Fortran-ordered view
    if info != 0:
        raise InternalError(f"dsyevd failed (info {info})")  # pragma: no cover
    lmax = float(lam[-1])
    two_l = 2.0 * (lmax - lam)
    b = 1.0
    for _ in range(_NEWTON_STEPS):  # as in acg_envelope_b, without the stack overhead
        inv = 1.0 / (b + two_l)
        s1 = float(inv.sum())
        b += (1.0 - 1.0 / s1) * s1 * s1 / float(inv @ inv)
    b = min(max(b, 1.0), float(q))
    a_t = -a
    a_t.flat[:: q + 1] += lmax  # lmax I - a
    omega = (2.0 / b) * a_t
    omega.flat[:: q + 1] += 1.0  # I + 2 a_t / b
    upper, info = lapack.dpotrf(omega.T, lower=0, overwrite_a=1)  # Omega = U^T U (symmetric: transpose is F-ordered)
    if info != 0:
        raise InternalError(f"dpotrf failed (info {info})")  # pragma: no cover
    log_const = (q - b) / 2.0 - (q / 2.0) * math.log(q / b)
    for _ in range(_MAX_ROUNDS):
        # U w = g with g ~ N(0, I); the transpose is Fortran-ordered, which LAPACK takes without a copy
        w, _ = lapack.dtrtrs(upper, rng.standard_normal((_PROPOSALS, q)).T, lower=0)
        x = w / np.sqrt(np.einsum("ip,ip->p", w, w))
        y = np.einsum("ip,ip->p", x, a_t @ x)
        log_ratio = -y + (q / 2.0) * np.log1p(2.0 * y / b) + log_const
        ok = np.flatnonzero(np.log(rng.random(_PROPOSALS)) <= log_ratio)
        if ok.size:
            out: NDArrayFloat = x[:, ok[0]]
            return out
    raise InternalError("the ACG rejection sampler did not accept within its round limit")  # pragma: no cover


def _circle_draw(a: NDArrayFloat, rng: np.random.Generator) -> NDArrayFloat:
    """Exact draws on the circle (q = 2): ``z^T a z = const + kappa cos(2 omega - phi)``."""
    half_diff = (a[:, 0, 0] - a[:, 1, 1]) / 2.0
    kappa = np.hypot(half_diff, a[:, 0, 1])
    phi = np.arctan2(a[:, 0, 1], half_diff)
    two_omega = rng.vonmises(phi, kappa)
    omega = two_omega / 2.0 + np.pi * (rng.random(a.shape[0]) < 0.5)
    return np.stack([np.cos(omega), np.sin(omega)], axis=1)


def _proposal_block(remaining: int, rate: float, q: int, rng: np.random.Generator) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Standard normals ``(n, q)`` and uniforms ``(n,)`` for about ``remaining`` accepted draws."""
    n = min(int(remaining * rate * 1.25) + 4, _MAX_PROPOSAL_BLOCK)
    return rng.standard_normal((n, q)), rng.random(n)


def _acg_draws_same(a: NDArrayFloat, count: int, rng: np.random.Generator) -> NDArrayFloat:
    """``count`` exact ACG draws for one ``(q, q)`` matrix (q >= 3) by the compiled kernel.

    The kernel consumes blocks of the caller's normals and uniforms (see
    :mod:`fdpcore.noise._bingham_kernels`); a block that runs out restarts the pending draw's rejection
    loop on a fresh block, which leaves its law unchanged.
    """
    out = np.empty((count, a.shape[0]))
    ar = np.ascontiguousarray(a)
    row, rate, stalls = 0, _PROPOSALS_PER_DRAW, 0
    while row < count:
        normals, uniforms = _proposal_block(count - row, rate, a.shape[0], rng)
        nxt, used = kernels.acg_draws(ar, out, row, normals, uniforms)
        rate, stalls = _next_rate(rate, stalls, nxt - row, used)
        row = nxt
    return out


def _next_rate(rate: float, stalls: int, done: int, used: int) -> tuple[float, int]:
    """Observed proposals per accepted draw, or twice the guess after a block without an acceptance."""
    if done > 0:
        return used / done, 0
    if stalls >= _MAX_STALLS:  # pragma: no cover - 2^21 consecutive rejections: a broken envelope
        raise InternalError("the ACG rejection sampler did not accept within its round limit")
    return min(2.0 * rate, float(_MAX_PROPOSAL_BLOCK)), stalls + 1


def _exact_stack(a: NDArrayFloat, rng: np.random.Generator) -> NDArrayFloat:
    q = a.shape[1]
    if q == 1:
        return np.where(rng.random((a.shape[0], 1)) < 0.5, -1.0, 1.0)
    if q == 2:
        return _circle_draw(a, rng)
    return _acg_draw(a, rng)


def sample_vector_bingham(a: ArrayLike, rng: np.random.Generator, size: int | None = None) -> NDArrayFloat:
    """Exact draws from the vector Bingham law ``p(z) ∝ exp(z^T A z)`` on ``S^{q-1}`` (MATH.md §10.4 B).

    For ``q >= 3`` this is the rejection sampler of Kent, Ganeiber & Mardia (2018) with
    an angular central Gaussian envelope, :math:`\\Omega = I + 2\\tilde A/b`,
    :math:`\\tilde A = l_{\\max}I - A`:

    .. math:: \\log U \\le -x^\\top\\tilde Ax + \\tfrac q2\\log(x^\\top\\Omega x)
              + \\tfrac{q-b}2 - \\tfrac q2\\log\\tfrac qb ,

    valid because :math:`e^{-y}\\le (q/b)^{q/2}e^{-(q-b)/2}(1+2y/b)^{-q/2}` for
    :math:`y\\ge0`. For ``q = 2`` it is the exact von Mises circle draw.

    Args:
        a: symmetric ``(q, q)`` matrix, or a stack ``(n, q, q)`` (one draw per matrix).
        rng: source of randomness.
        size: number of draws for a single matrix (ignored for a stack).

    Returns:
        ``(q,)`` for a single matrix and ``size=None``, ``(size, q)`` with ``size``, or
        ``(n, q)`` for a stack.

    >>> z = sample_vector_bingham(np.diag([5.0, 0.0, 0.0]), np.random.default_rng(0), size=4)
    >>> z.shape, bool(np.allclose(np.linalg.norm(z, axis=1), 1.0))
    ((4, 3), True)
    """
    stack, single = _symmetric_stack("A", a)
    if single and kernels.NUMBA and stack.shape[1] >= 3:
        draws = _acg_draws_same(stack[0], 1 if size is None else positive_int("size", size), rng)
        return draws[0] if size is None else draws
    if single and size is not None:
        stack = np.broadcast_to(stack, (positive_int("size", size), *stack.shape[1:])).copy()
    out = _exact_stack(stack, rng)
    return out[0] if single and size is None else out


def _theta_draw(a: NDArrayFloat, kq: float, rng: np.random.Generator) -> NDArrayFloat:
    """Exact draws of ``theta`` on (0, 1) with density ∝ theta^{-1/2} (1-theta)^{kq-1} e^{a theta}, kq >= 1."""
    n = a.shape[0]
    out = np.empty(n)
    todo = np.arange(n)
    for _ in range(_MAX_ROUNDS):
        at = a[todo]
        pos, mid, neg = at > 0, (at <= 0) & (at >= -kq), at < -kq
        theta = np.empty(todo.size)
        log_acc = np.empty(todo.size)
        u = rng.random(todo.size)
        if pos.any():  # [Hoff]: Beta(1/2, g) envelope
            ap = at[pos]
            g = np.maximum(1.0 / (1.0 + np.log(2.0 + ap)), kq - ap)
            th = rng.beta(0.5, g)
            ell = ap - kq + g + special.xlogy(kq - g, (kq - g) / ap)
            theta[pos] = th
            log_acc[pos] = ap * th + special.xlogy(kq - g, 1.0 - th) - ell
        if mid.any():  # Beta(1/2, kq) envelope, accept with e^{a theta}
            th = rng.beta(0.5, kq, size=int(mid.sum()))
            theta[mid] = th
            log_acc[mid] = at[mid] * th
        if neg.any():  # Gamma(1/2, rate -a) truncated to (0, 1), accept with (1-theta)^{kq-1}
            rate = -at[neg]
            p = rng.random(rate.size) * special.gammainc(0.5, rate)
            th = special.gammaincinv(0.5, p) / rate
            theta[neg] = th
            log_acc[neg] = special.xlogy(kq - 1.0, 1.0 - th)
        ok = np.log(u) <= log_acc
        ok &= (theta > 0.0) & (theta < 1.0)
        out[todo[ok]] = theta[ok]
        todo = todo[~ok]
        if todo.size == 0:
            return out
    raise InternalError("the theta rejection sampler did not accept within its round limit")  # pragma: no cover


def hoff_scan(a: ArrayLike, z: ArrayLike, rng: np.random.Generator) -> NDArrayFloat:
    """One coordinate scan of [Hoff]'s Gibbs sampler for ``p(z) ∝ exp(z^T A z)`` (MATH.md §10.4 A).

    In the eigenbasis ``y = E^T z`` of ``A = E diag(l) E^T`` each coordinate in random order is
    redrawn from its exact conditional: ``theta = y_i^2`` has density

    .. math:: \\propto\\vartheta^{-1/2}(1-\\vartheta)^{k_q-1}e^{a\\vartheta},\\qquad
              k_q=\\tfrac{q-1}2,\\quad a=l_i-\\textstyle\\sum_{j\\ne i}l_ju_j^2,

    drawn by [Hoff]'s Beta envelope (``a > 0``), a ``Beta(1/2, k_q)`` envelope
    (``-k_q <= a <= 0``) or a truncated ``Gamma(1/2, -a)`` envelope (``a < -k_q``). For
    ``q = 2`` the exact von Mises draw replaces the scan (Hoff's constant is invalid there).
    This is a Markov kernel that leaves the law invariant, not an independent draw.

    Args:
        a: symmetric ``(q, q)`` matrix or a stack ``(n, q, q)``.
        z: current unit vector(s), ``(q,)`` or ``(n, q)``.
        rng: source of randomness.

    Returns:
        The updated unit vector(s), same shape as ``z``.

    >>> a = np.diag([3.0, 1.0, 0.0, -2.0])
    >>> z = hoff_scan(a, np.ones(4) / 2.0, np.random.default_rng(1))
    >>> z.shape, round(float(np.linalg.norm(z)), 12)
    ((4,), 1.0)
    """
    stack, single = _symmetric_stack("A", a)
    zz = np.atleast_2d(np.asarray(z, dtype=np.float64))
    if zz.shape != stack.shape[:2] and not (single and zz.shape == (1, stack.shape[1])):
        raise DomainError(f"z (shape {np.shape(z)}) must match A (shape {np.shape(a)})")
    out = _hoff_stack(np.broadcast_to(stack, (zz.shape[0], *stack.shape[1:])), zz, rng)
    return out[0] if single and np.ndim(z) == 1 else out


def _hoff_stack(a: NDArrayFloat, z: NDArrayFloat, rng: np.random.Generator) -> NDArrayFloat:
    n, q, _ = a.shape
    if q <= 2:
        return _exact_stack(a, rng)
    kq = (q - 1) / 2.0
    lam, vec = np.linalg.eigh(a)
    y = np.einsum("bji,bj->bi", vec, z)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    rows = np.arange(n)
    for i in rng.permutation(q):
        yi2 = y[:, i] ** 2
        rest = 1.0 - yi2
        degenerate = rest <= 1e-300
        if degenerate.any():  # guard 1 - y_i^2 = 0: draw u uniformly on the complement
            fresh = rng.standard_normal((int(degenerate.sum()), q))
            fresh[:, i] = 0.0
            fresh /= np.linalg.norm(fresh, axis=1, keepdims=True)
            y[degenerate] = fresh
            yi2 = np.where(degenerate, 0.0, yi2)
            rest = np.where(degenerate, 1.0, rest)
        energy_rest = np.einsum("bj,bj->b", lam, y * y) - lam[:, i] * yi2
        a_i = lam[:, i] - energy_rest / rest
        theta = _theta_draw(a_i, kq, rng)
        y *= np.sqrt((1.0 - theta) / rest)[:, None]
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        y[rows, i] = sign * np.sqrt(theta)
    out = np.einsum("bij,bj->bi", vec, y)
    normed: NDArrayFloat = out / np.linalg.norm(out, axis=1, keepdims=True)
    return normed


def haar_stiefel(m: int, k: int, rng: np.random.Generator, n_chains: int = 1) -> NDArrayFloat:
    """Haar-random orthonormal frames ``(n_chains, m, k)`` (QR of a Gaussian matrix, signs fixed).

    Data-independent: the initial state of every chain (MATH.md §10.5).

    >>> v = haar_stiefel(5, 2, np.random.default_rng(0))
    >>> v.shape, bool(np.allclose(v[0].T @ v[0], np.eye(2)))
    ((1, 5, 2), True)
    """
    m = positive_int("m", m)
    k = positive_int("k", k)
    if k > m:
        raise DomainError(f"k ({k}) must be <= m ({m})")
    return _haar_frames(m, rng, positive_int("n_chains", n_chains))[:, :, :k]


def _haar_frames(m: int, rng: np.random.Generator, n: int) -> NDArrayFloat:
    q, r = np.linalg.qr(rng.standard_normal((n, m, m)))
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    out: NDArrayFloat = q * signs[:, None, :]
    return out


def _reorthonormalise(q: NDArrayFloat) -> NDArrayFloat:
    qq, r = np.linalg.qr(q)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    out: NDArrayFloat = qq * signs[:, None, :]
    return out


@dataclass
class BinghamChains:
    """State of independent Gibbs chains for ``etr(V^T A V)`` on ``V_{m,k}`` (MATH.md §10.4).

    Each chain keeps a full orthogonal frame ``Q = [V, V_perp]`` and ``B = Q^T A Q``, so
    the null basis of ``V_{-r}`` is ``[v_r, V_perp]`` (no QR per column) and the conditional's
    matrix ``A_r = N_r^T A N_r`` is a sub-block of ``B``. After a column draw the frame is
    updated by one Householder reflection, which keeps it exactly orthogonal up to rounding.

    Attributes:
        a: the symmetric ``(m, m)`` parameter.
        k: number of columns.
        frames: ``(n_chains, m, m)`` orthogonal frames; ``frames[:, :, :k]`` is the state.
        method: ``"acg"`` (exact conditional draws) or ``"hoff"`` (one coordinate scan).
        sweeps: sweeps run so far.
    """

    a: NDArrayFloat
    k: int
    frames: NDArrayFloat
    method: str = "acg"
    sweeps: int = 0

    @classmethod
    def start(
        cls, a: ArrayLike, k: int, rng: np.random.Generator, *, n_chains: int = 1, method: str = "acg"
    ) -> BinghamChains:
        """Chains started at independent Haar-random frames (never at a data-dependent point).

        >>> c = BinghamChains.start(np.diag([2.0, 1.0, 0.0]), 2, np.random.default_rng(0), n_chains=3)
        >>> c.state.shape
        (3, 3, 2)
        """
        mat, single = _symmetric_stack("A", a)
        if not single:
            raise DomainError(f"A (shape {np.shape(a)}) must be one (m, m) matrix")
        m = mat.shape[1]
        k = positive_int("k", k)
        if k >= m:
            raise DomainError(f"k ({k}) must be < m ({m}); the Gibbs sampler updates single columns")
        if method not in ("acg", "hoff"):
            raise DomainError(f"method ({method!r}) must be 'acg' or 'hoff'")
        frames = _haar_frames(m, rng, positive_int("n_chains", n_chains))
        return cls(a=mat[0], k=k, frames=frames, method=method)

    @property
    def state(self) -> NDArrayFloat:
        """The current frames ``V`` of every chain, ``(n_chains, m, k)``."""
        out: NDArrayFloat = self.frames[:, :, : self.k].copy()
        return out

    def run(self, n_sweeps: int, rng: np.random.Generator) -> BinghamChains:
        """Run ``n_sweeps`` Gibbs sweeps (each column once, in random order) on every chain.

        ``method="acg"`` with ``m - k + 1 >= 3`` runs in the compiled kernel
        (:mod:`fdpcore.noise._bingham_kernels`; without numba the same body runs as NumPy code for one
        chain, and chains are vectorised by :meth:`_sweep_stack` instead). Sweeps run in blocks
        that end at the re-orthonormalisation points, so the schedule is the same on every path.
        """
        n_sweeps = positive_int("n_sweeps", n_sweeps, minimum=0)
        m = self.a.shape[0]
        use_kernel = self.method == "acg" and m - self.k + 1 >= 3 and (kernels.NUMBA or self.frames.shape[0] == 1)
        done = 0
        while done < n_sweeps:
            block = min(n_sweeps - done, _REORTHO_EVERY - self.sweeps % _REORTHO_EVERY)
            if use_kernel:
                self._kernel_sweeps(block, rng)
            else:
                for _ in range(block):
                    self._sweep_stack(rng)
            done += block
            self.sweeps += block
            if self.sweeps % _REORTHO_EVERY == 0:
                self.frames = _reorthonormalise(self.frames)
        return self

    def _kernel_sweeps(self, n_sweeps: int, rng: np.random.Generator) -> None:
        """``n_sweeps`` ACG Gibbs sweeps of every chain in :func:`fdpcore.noise._bingham_kernels.acg_sweeps`."""
        n, m, _ = self.frames.shape
        k, q = self.k, m - self.k + 1
        perms = rng.permuted(np.tile(np.arange(k), (n, n_sweeps, 1)), axis=2)  # column order of each sweep
        ft = np.ascontiguousarray(np.swapaxes(self.frames, 1, 2))  # rows are the frame's columns
        total = n * n_sweeps * k
        unit, rate, stalls = 0, _PROPOSALS_PER_DRAW, 0
        while unit < total:
            normals, uniforms = _proposal_block(total - unit, rate, q, rng)
            nxt, used = kernels.acg_sweeps(self.a, ft, k, perms, unit, normals, uniforms)
            rate, stalls = _next_rate(rate, stalls, nxt - unit, used)
            unit = nxt
        self.frames = np.swapaxes(ft, 1, 2)

    def _sweep_stack(self, rng: np.random.Generator) -> None:
        frames, a, k = self.frames, self.a, self.k
        m = a.shape[0]
        n = frames.shape[0]
        rest = np.arange(k, m)
        for r in rng.permutation(k):
            idx = np.concatenate(([r], rest))
            basis = frames[:, :, idx]  # N_r = [v_r, V_perp], (n, m, q)
            a_r = np.swapaxes(basis, 1, 2) @ (a @ basis)
            a_r = (a_r + np.swapaxes(a_r, 1, 2)) / 2.0
            if self.method == "acg":
                z = _exact_stack(a_r, rng)
            else:
                e1 = np.zeros((n, idx.size))
                e1[:, 0] = 1.0
                z = _hoff_stack(a_r, e1, rng)
            # the conditional law is symmetric under z -> -z: take z_1 >= 0 and reflect e_1 -> -z
            z = z * np.where(z[:, :1] < 0.0, -1.0, 1.0)
            u = z.copy()
            u[:, 0] += 1.0
            nu = np.einsum("bij,bj->bi", basis, u)
            frames[:, :, idx] = basis - (2.0 / np.einsum("bi,bi->b", u, u))[:, None, None] * nu[:, :, None] * u[:, None, :]


def sample_matrix_bingham(
    a: ArrayLike,
    k: int,
    rng: np.random.Generator,
    *,
    n_sweeps: int,
    n_chains: int = 1,
    method: str = "acg",
) -> NDArrayFloat:
    """Final states of ``n_chains`` Gibbs chains for ``p(V) ∝ etr(V^T A V)`` on ``V_{m,k}`` (MATH.md §10.4).

    One sweep updates every column once, in random order, from its full conditional: with
    ``N_r`` an orthonormal basis of ``null(V_{-r}^T)`` and ``v_r = N_r z``,
    ``z ∝ exp(z^T N_r^T A N_r z)`` on ``S^{m-k}``. Chains start at Haar-random frames. For
    ``k = 1`` the law is a single vector Bingham law and is drawn exactly (no chain).

    Args:
        a: symmetric ``(m, m)`` parameter.
        k: number of columns, ``1 <= k < m``.
        rng: source of randomness.
        n_sweeps: Gibbs sweeps per chain (the burn-in; ignored for ``k = 1``).
        n_chains: number of independent chains (one final state each).
        method: ``"acg"`` (exact conditional draws) or ``"hoff"`` (coordinate scan).

    Returns:
        ``(n_chains, m, k)`` orthonormal frames.

    >>> v = sample_matrix_bingham(np.diag([4.0, 3.0, 0.0, 0.0, 0.0]), 2, np.random.default_rng(0), n_sweeps=20)
    >>> v.shape, bool(np.allclose(v[0].T @ v[0], np.eye(2)))
    ((1, 5, 2), True)
    """
    mat, single = _symmetric_stack("A", a)
    if not single:
        raise DomainError(f"A (shape {np.shape(a)}) must be one (m, m) matrix")
    m = mat.shape[1]
    k = positive_int("k", k)
    if k >= m:
        raise DomainError(f"k ({k}) must be < m ({m})")
    n_chains = positive_int("n_chains", n_chains)
    n_sweeps = positive_int("n_sweeps", n_sweeps, minimum=0)
    if method not in ("acg", "hoff"):
        raise DomainError(f"method ({method!r}) must be 'acg' or 'hoff'")
    if k == 1:
        if kernels.NUMBA and m >= 3:
            return _acg_draws_same(mat[0], n_chains, rng)[:, :, None]
        z = _exact_stack(np.broadcast_to(mat, (n_chains, m, m)).copy(), rng)
        return z[:, :, None]
    chains = BinghamChains.start(mat[0], k, rng, n_chains=n_chains, method=method)
    return chains.run(n_sweeps, rng).state

