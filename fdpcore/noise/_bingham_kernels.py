"""Compiled inner loops of the Bingham samplers (MATH.md §10.4), with a pure-NumPy fallback.

The column-wise Gibbs sweep and the ACG rejection sampler of :mod:`fdpcore.noise.bingham` make a
few small LAPACK calls per column update; from Python, the call overhead of NumPy (Cholesky,
triangular solve, acceptance test, Householder update) costs as much as the arithmetic. Here
the whole loop over column updates runs in one compiled function (numba ``@njit``) when numba
is importable; otherwise the same function bodies run as plain Python with vectorised NumPy
per proposal batch (:data:`NUMBA` tells which).

Randomness contract: the kernels never draw. The caller passes blocks of standard normals
(``(n_proposals, q)``) and uniforms (``(n_proposals,)``) drawn from its own
:class:`numpy.random.Generator`; proposals are consumed in order, one row each, and the
kernels return how far they got. A rejection loop that runs out of proposals stops *before*
its update and is restarted by the caller with a fresh block: only rejected proposals are
dropped, and the first accepted proposal of an i.i.d. stream has the same law whether or not
a prefix of rejected proposals is discarded, so the output law is exactly the sampler's.
The compiled and the fallback bodies consume the streams identically (the tests feed both
the same blocks and compare the results).

Envelope: the ACG sampler needs only ``l_max`` and ``b`` of each conditional matrix; the compiled
path gets them from a Householder tridiagonalisation, Sturm bisection and pivot recurrences
(:func:`_lmax_b_tridiagonal`, about 3x cheaper than LAPACK ``dsyevd`` at q = 38), the fallback
from LAPACK's eigenvalues (:func:`_lmax_b_eigvalsh`); the two agree to rounding.

Kernel layout: frames are stored *transposed* (``ft[c, j]`` is column ``j`` of chain ``c``'s
orthogonal frame), so each column is a contiguous row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.linalg import lapack

from fdpcore._typing import NDArrayFloat

try:  # numba is optional: without it the same bodies run as NumPy code (slower per column update)
    import numba  # allowed in this one module by tests/test_architecture.py (a compiler, no I/O)
except ImportError:  # pragma: no cover - exercised by tests that force the fallback
    numba = None  # type: ignore[assignment]

#: True when the kernels are compiled by numba.
NUMBA = numba is not None
#: Newton steps for the ACG parameter b (see fdpcore.noise.bingham.acg_envelope_b: every iterate is valid).
NEWTON_STEPS = 3
#: Proposals evaluated per vectorised batch by the NumPy fallback.
_FALLBACK_BATCH = 8


def _jit(func: Callable[..., Any]) -> Callable[..., Any]:
    if numba is None:  # pragma: no cover
        return func
    return numba.njit(cache=True, nogil=True)(func)


def _lmax_b_eigvalsh(ar: NDArrayFloat) -> tuple[float, float]:
    """Largest eigenvalue of ``ar`` and the ACG parameter b (NEWTON_STEPS Newton steps from 1), by LAPACK."""
    q = ar.shape[0]
    lam = np.linalg.eigvalsh(ar)  # ascending
    lmax = lam[q - 1]
    two_l = 2.0 * (lmax - lam)
    b = 1.0
    for _ in range(NEWTON_STEPS):
        inv = 1.0 / (b + two_l)
        s1 = np.sum(inv)
        b += (1.0 - 1.0 / s1) * s1 * s1 / np.sum(inv * inv)
    return lmax, min(max(b, 1.0), float(q))


def _tridiagonalise(x: NDArrayFloat, d: NDArrayFloat, e: NDArrayFloat, v: NDArrayFloat, p: NDArrayFloat) -> None:
    """Householder reduction of the symmetric ``x`` (overwritten) to tridiagonal ``(d, e)``, same spectrum.

    Step j reflects the trailing block with ``H = I - tau v v^T``, ``H x_{j+1:, j} = alpha e_1``:
    with ``p = tau S v`` and ``w = p - (tau v^T p / 2) v``, ``H S H = S - v w^T - w v^T``.
    """
    n = x.shape[0]
    for j in range(n - 2):
        size = n - j - 1
        d[j] = x[j, j]
        sig = 0.0
        for i in range(j + 1, n):
            sig += x[i, j] * x[i, j]
        if sig == 0.0:
            e[j] = 0.0
            continue
        x0 = x[j + 1, j]
        alpha = -math.copysign(math.sqrt(sig), x0)
        for i in range(size):
            v[i] = x[j + 1 + i, j]
        v[0] -= alpha
        tau = 2.0 / (sig - x0 * x0 + v[0] * v[0])  # 2 / |v|^2
        p[:size] = 0.0
        for kk in range(size):  # p = S v by rows of the symmetric S (contiguous axpy)
            t = v[kk]
            for i in range(size):
                p[i] += x[j + 1 + kk, j + 1 + i] * t
        half = 0.0
        for i in range(size):
            p[i] *= tau
            half += v[i] * p[i]
        half *= 0.5 * tau
        for i in range(size):
            p[i] -= half * v[i]
        for i in range(size):
            vi = v[i]
            pi = p[i]
            for kk in range(size):
                x[j + 1 + i, j + 1 + kk] -= vi * p[kk] + pi * v[kk]
        e[j] = alpha
    d[n - 2] = x[n - 2, n - 2]
    d[n - 1] = x[n - 1, n - 1]
    e[n - 2] = x[n - 1, n - 2]


def _count_below(d: NDArrayFloat, e2: NDArrayFloat, t: float) -> int:
    """Number of eigenvalues of the tridiagonal (d, off-diagonal squares e2) below t (Sturm count)."""
    count = 0
    piv = d[0] - t
    for i in range(d.shape[0]):
        if i > 0:
            piv = d[i] - t - e2[i - 1] / piv
        if piv < 0.0:
            count += 1
        elif piv == 0.0:
            piv = -1e-300  # t is an eigenvalue of the leading block: perturb (standard Sturm guard)
            count += 1
    return count


def _lmax_b_tridiagonal(ar: NDArrayFloat) -> tuple[float, float]:
    """:func:`_lmax_b_eigvalsh` without a full eigendecomposition (compiled path).

    Householder tridiagonalisation (same spectrum), then the largest eigenvalue by Sturm
    bisection (the upper end of the final bracket, so an upper bound up to rounding), then b by
    the same Newton steps, with ``s1 = sum_i 1/(c - 2 l_i) = tr M^{-1}`` and
    ``s2 = sum_i 1/(c - 2 l_i)^2 = -d s1/dc`` for the tridiagonal ``M = cI - 2T``,
    ``c = b + 2 l_max``: ``(M^{-1})_ii = 1/(f_i + g_i - M_ii)`` from the forward and backward
    pivots f, g of ``M`` (positive: ``M >= b I``), differentiated along the recurrences.
    """
    q = ar.shape[0]
    x = ar.copy()
    d = np.empty(q)
    e = np.empty(q)
    _tridiagonalise(x, d, e, np.empty(q), np.empty(q))
    e2 = e[: q - 1] * e[: q - 1]
    radius = np.abs(e[: q - 1])
    hi = -np.inf
    lo = -np.inf
    for i in range(q):  # Gershgorin upper bound; the largest diagonal entry is a lower bound
        r = (radius[i - 1] if i > 0 else 0.0) + (radius[i] if i < q - 1 else 0.0)
        hi = max(hi, d[i] + r)
        lo = max(lo, d[i])
    scale = max(abs(hi), abs(lo), 1e-300)
    for _ in range(200):
        if hi - lo <= 4.0 * 2.220446049250313e-16 * scale:
            break
        mid = 0.5 * (lo + hi)
        if _count_below(d, e2, mid) == q:
            hi = mid
        else:
            lo = mid
    lmax = hi
    fwd = np.empty(q)
    dfwd = np.empty(q)
    b = 1.0
    for _ in range(NEWTON_STEPS):
        c = b + 2.0 * lmax
        fwd[0] = c - 2.0 * d[0]
        dfwd[0] = 1.0
        for i in range(1, q):
            ratio = 4.0 * e2[i - 1] / fwd[i - 1]
            fwd[i] = c - 2.0 * d[i] - ratio
            dfwd[i] = 1.0 + ratio * dfwd[i - 1] / fwd[i - 1]
        s1 = 0.0
        s2 = 0.0
        bwd = c - 2.0 * d[q - 1]
        dbwd = 1.0
        for i in range(q - 1, -1, -1):
            if i < q - 1:
                ratio = 4.0 * e2[i] / bwd
                dbwd = 1.0 + ratio * dbwd / bwd
                bwd = c - 2.0 * d[i] - ratio
            g = 1.0 / (fwd[i] + bwd - (c - 2.0 * d[i]))
            s1 += g
            s2 += (dfwd[i] + dbwd - 1.0) * g * g
        b += (1.0 - 1.0 / s1) * s1 * s1 / s2
    return lmax, min(max(b, 1.0), float(q))


def _acg_setup_body(ar: NDArrayFloat) -> tuple[NDArrayFloat, float, float]:
    """Envelope of the ACG sampler for ``exp(z^T ar z)``: Cholesky factor of Omega, b, log constant."""
    q = ar.shape[0]
    lmax, b = _lmax_b(ar)
    omega = ar * (-2.0 / b)  # Omega = I + 2 (lmax I - ar) / b
    diag = 1.0 + 2.0 * lmax / b
    for i in range(q):
        omega[i, i] += diag
    lower = np.linalg.cholesky(omega)
    log_const = (q - b) / 2.0 - (q / 2.0) * math.log(q / b)
    return lower, b, log_const


def _acg_propose_loops(
    lower: NDArrayFloat, b: float, log_const: float, normals: NDArrayFloat, uniforms: NDArrayFloat,
    cursor: int, out: NDArrayFloat,
) -> int:
    """First accepted proposal from ``cursor`` on, into ``out``; returns the next cursor, or -1 if the block runs out."""
    q = lower.shape[0]
    w = np.empty(q)
    half_q = q / 2.0
    for p in range(cursor, normals.shape[0]):
        g = normals[p]
        gg = 0.0
        ww = 0.0
        for i in range(q - 1, -1, -1):  # solve L^T w = g: w ~ N(0, Omega^{-1})
            s = g[i]
            for j in range(i + 1, q):
                s -= lower[j, i] * w[j]
            w[i] = s / lower[i, i]
            ww += w[i] * w[i]
            gg += g[i] * g[i]
        ratio = gg / ww  # x^T Omega x = 1 + 2 y / b for x = w / |w|, since w^T Omega w = |g|^2
        y = b * (ratio - 1.0) / 2.0
        if math.log(uniforms[p]) <= -y + half_q * math.log(ratio) + log_const:
            inv = 1.0 / math.sqrt(ww)
            for i in range(q):
                out[i] = w[i] * inv
            return p + 1
    return -1


def _acg_propose_numpy(
    lower: NDArrayFloat, b: float, log_const: float, normals: NDArrayFloat, uniforms: NDArrayFloat,
    cursor: int, out: NDArrayFloat,
) -> int:
    """:func:`_acg_propose_loops` in batches of proposals with LAPACK (the fallback)."""
    q = lower.shape[0]
    for start in range(cursor, normals.shape[0], _FALLBACK_BATCH):
        g = normals[start : start + _FALLBACK_BATCH]
        w, _ = lapack.dtrtrs(lower, g.T, lower=1, trans=1)  # L^T w = g
        gg = np.einsum("pi,pi->p", g, g)
        ww = np.einsum("ip,ip->p", w, w)
        ratio = gg / ww
        y = b * (ratio - 1.0) / 2.0
        ok = np.flatnonzero(np.log(uniforms[start : start + g.shape[0]]) <= -y + (q / 2.0) * np.log(ratio) + log_const)
        if ok.size:
            out[:] = w[:, ok[0]] / math.sqrt(ww[ok[0]])
            return start + int(ok[0]) + 1
    return -1


def _acg_draws_body(
    ar: NDArrayFloat, out: NDArrayFloat, start: int, normals: NDArrayFloat, uniforms: NDArrayFloat,
) -> tuple[int, int]:
    """Exact draws ``out[start:]`` from ``exp(z^T ar z)``; returns (next row to fill, proposals used)."""
    lower, b, log_const = _acg_setup(ar)
    cursor = 0
    row = start
    while row < out.shape[0]:
        nxt = _acg_propose(lower, b, log_const, normals, uniforms, cursor, out[row])
        if nxt < 0:
            return row, normals.shape[0]
        cursor = nxt
        row += 1
    return row, cursor


def _acg_sweeps_body(
    a: NDArrayFloat, ft: NDArrayFloat, k: int, perms: NDArrayFloat, start: int,
    normals: NDArrayFloat, uniforms: NDArrayFloat,
) -> tuple[int, int]:
    """Column updates ``start, start + 1, ...`` of the Gibbs sweeps; returns (next update, proposals used).

    Update ``u`` is chain ``u // (S k)``, sweep ``(u // k) % S``, column ``perms[chain, sweep, u % k]``
    (chain-major, ``S = perms.shape[1]``). Each replaces column ``r`` and the complement rows
    ``k..m-1`` of the transposed frame by the Householder image of ``N_r = [v_r, V_perp]``.
    """
    n, m, _ = ft.shape
    n_sweeps = perms.shape[1]
    q = m - k + 1
    total = n * n_sweeps * k
    bt = np.empty((q, m))
    z = np.empty(q)
    cursor = 0
    unit = start
    while unit < total:
        c = unit // (n_sweeps * k)
        r = perms[c, (unit // k) % n_sweeps, unit % k]
        bt[0] = ft[c, r]
        bt[1:] = ft[c, k:]
        ab = np.dot(bt, a)  # N^T A (A symmetric)
        ar = np.dot(ab, bt.T)
        ar = (ar + ar.T) / 2.0
        lower, b, log_const = _acg_setup(ar)
        nxt = _acg_propose(lower, b, log_const, normals, uniforms, cursor, z)
        if nxt < 0:
            return unit, normals.shape[0]
        cursor = nxt
        _reflect(ft[c], bt, z, r, k)
        unit += 1
    return unit, cursor


def _reflect_loops(frame_t: NDArrayFloat, bt: NDArrayFloat, z: NDArrayFloat, r: int, k: int) -> None:
    """Rows ``[r, k, ..., m-1]`` of ``frame_t`` (holding ``bt = N^T``) become ``H N^T``, ``H e_1 = -z``.

    The conditional law is symmetric under ``z -> -z``: with ``z_1 >= 0`` the Householder vector
    is ``u = z + e_1`` and ``H = I - 2 u u^T / u^T u``; ``z`` is overwritten by ``u``.
    """
    q, m = bt.shape
    if z[0] < 0.0:
        for i in range(q):
            z[i] = -z[i]
    z[0] += 1.0
    uu = 0.0
    for i in range(q):
        uu += z[i] * z[i]
    scale = 2.0 / uu
    nu = np.zeros(m)  # N u
    for i in range(q):
        t = z[i]
        for j in range(m):
            nu[j] += t * bt[i, j]
    for i in range(q):
        row = r if i == 0 else k + i - 1
        t = scale * z[i]
        for j in range(m):
            frame_t[row, j] = bt[i, j] - t * nu[j]


def _reflect_numpy(frame_t: NDArrayFloat, bt: NDArrayFloat, z: NDArrayFloat, r: int, k: int) -> None:
    """:func:`_reflect_loops` with array operations (the fallback)."""
    if z[0] < 0.0:
        z *= -1.0
    z[0] += 1.0
    scale = 2.0 / float(z @ z)
    nu = z @ bt
    update = bt - np.outer(scale * z, nu)
    frame_t[r] = update[0]
    frame_t[k:] = update[1:]


# The bodies call these two names; with numba both are compiled (and resolved at compile time).
if numba is not None:
    _tridiagonalise = _jit(_tridiagonalise)
    _count_below = _jit(_count_below)
    _lmax_b = _jit(_lmax_b_tridiagonal)
else:  # pragma: no cover
    _lmax_b = _lmax_b_eigvalsh
_acg_setup = _jit(_acg_setup_body)
_reflect = _jit(_reflect_loops) if numba is not None else _reflect_numpy
_acg_propose = _jit(_acg_propose_loops) if numba is not None else _acg_propose_numpy

acg_draws = _jit(_acg_draws_body)
acg_sweeps = _jit(_acg_sweeps_body)
