"""The compiled Bingham kernels (fdpcore/noise/_bingham_kernels.py) and their pure-NumPy fallback.

Three properties: (1) fed identical random streams, the compiled kernels and the fallback bodies
produce the same draws and consume the same number of proposals; (2) the fallback is what runs
when numba cannot be imported, and its law is the target law; (3) running out of proposals in
the middle of a rejection loop (the caller refills and restarts the pending draw) leaves the law
unchanged. Laws are checked against the importance-sampling reference of test_bingham.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fdpcore.noise import _bingham_kernels as compiled
from fdpcore.noise import bingham
from fdpcore.noise.bingham import BinghamChains, sample_matrix_bingham, sample_vector_bingham

sys.path.insert(0, str(Path(__file__).parent))
from test_bingham import _mean_projection, _reference_projection, _rotated  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled.NUMBA, reason="numba is not installed: only the fallback exists")


@pytest.fixture(scope="module")
def fallback() -> ModuleType:
    """A fresh copy of the kernel module imported while ``import numba`` fails."""
    saved = sys.modules.get("numba")
    sys.modules["numba"] = None  # type: ignore[assignment]  # makes `import numba` raise ImportError
    try:
        spec = importlib.util.spec_from_file_location("_bingham_kernels_fallback", compiled.__file__)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["numba"]
        else:
            sys.modules["numba"] = saved
    return module


@pytest.fixture
def without_numba(fallback: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """fdpcore.noise.bingham running on the fallback module."""
    monkeypatch.setattr(bingham, "kernels", fallback)
    return fallback


def test_fallback_module_is_numpy_code(fallback: ModuleType) -> None:
    assert fallback.NUMBA is False and compiled.NUMBA is True
    assert fallback.acg_sweeps is fallback._acg_sweeps_body
    assert fallback._acg_propose is fallback._acg_propose_numpy
    assert fallback._lmax_b is fallback._lmax_b_eigvalsh
    assert type(compiled.acg_sweeps).__name__ == "CPUDispatcher"


def test_tridiagonal_lmax_and_b_match_the_eigendecomposition(fallback: ModuleType) -> None:
    # the compiled envelope (Householder + Sturm bisection + pivot Newton) against LAPACK eigvalsh
    rng = np.random.default_rng(29)
    cases = [np.zeros((5, 5)), np.diag([3.0, 1.0, 1.0, 1.0, 0.0]), 2.0 * np.eye(4), np.ones((6, 6)),
             np.diag([1e-8, 0.0, 0.0]), np.diag([0.0, 0.0, -5.0])]
    for q in (3, 4, 7, 38, 40):
        for _ in range(20):
            x = rng.standard_normal((q, q)) * rng.exponential(10.0)
            cases.append(x + x.T)
    for a in cases:
        scale = max(1.0, float(np.abs(a).max()))
        lmax, b = compiled._lmax_b(a)
        lmax_ref, b_ref = fallback._lmax_b(a)
        assert lmax_ref == np.linalg.eigvalsh(a)[-1]
        assert lmax >= lmax_ref - 1e-13 * scale  # an upper bound up to rounding: the envelope stays valid
        assert abs(lmax - lmax_ref) <= 1e-13 * scale
        assert abs(b - b_ref) <= 1e-10 * b_ref and 1.0 <= b <= a.shape[0]
    assert compiled._lmax_b(np.diag([0.0, 0.0, 0.0, 0.0]))[1] == 4.0  # uniform law: b = q


def _streams(seed: int, n: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, q)), rng.random(n)


@pytest.mark.parametrize(("m", "k", "n_chains"), [(7, 3, 3), (40, 3, 1), (6, 2, 2)])
def test_sweeps_agree_exactly_on_identical_streams(fallback: ModuleType, m: int, k: int, n_chains: int) -> None:
    a = _rotated(list(np.linspace(6.0, -4.0, m)), seed=m)
    rng = np.random.default_rng(30)
    ft = np.ascontiguousarray(np.swapaxes(bingham._haar_frames(m, rng, n_chains), 1, 2))
    perms = rng.permuted(np.tile(np.arange(k), (n_chains, 6, 1)), axis=2)
    total = n_chains * 6 * k
    for n_proposals in (4 * total, total // 2):  # enough, and running out part-way
        normals, uniforms = _streams(31, n_proposals, m - k + 1)
        f1, f2 = ft.copy(), ft.copy()
        out1 = compiled.acg_sweeps(a, f1, k, perms, 0, normals, uniforms)
        out2 = fallback.acg_sweeps(a, f2, k, perms, 0, normals, uniforms)
        assert out1 == out2
        assert 0 < out1[0] <= total
        assert np.abs(f1 - f2).max() < 1e-10
        assert np.abs(f1 - ft).max() > 0.1  # the columns did move
        # the untouched chains' frames and the updated frames stay orthogonal
        assert np.abs(np.einsum("bij,bkj->bik", f1, f1) - np.eye(m)).max() < 1e-12
    assert out1[0] < total and out1[1] == n_proposals  # the short stream stopped before the end


def test_vector_draws_agree_exactly_on_identical_streams(fallback: ModuleType) -> None:
    a = np.ascontiguousarray(_rotated([3.0, 1.0, 0.0, -4.0, -6.0], seed=2))
    normals, uniforms = _streams(32, 500, 5)
    out1, out2 = np.zeros((300, 5)), np.zeros((300, 5))
    r1 = compiled.acg_draws(a, out1, 0, normals, uniforms)
    r2 = fallback.acg_draws(a, out2, 0, normals, uniforms)
    assert r1 == r2 and r1[0] > 100
    assert np.abs(out1 - out2).max() < 1e-12
    # resuming from row r1[0] on a new stream only writes the remaining rows
    before = out1.copy()
    more = compiled.acg_draws(a, out1, r1[0], *_streams(33, 1000, 5))
    assert more[0] == 300 and np.allclose(np.linalg.norm(out1, axis=1), 1.0)
    assert np.array_equal(out1[: r1[0]], before[: r1[0]])


def test_public_api_single_chain_is_identical_with_and_without_numba(without_numba: ModuleType) -> None:
    a = _rotated([4.0, 2.0, 1.0, 0.0, -3.0, -5.0], seed=7)
    slow = sample_matrix_bingham(a, 3, np.random.default_rng(34), n_sweeps=120)  # crosses two re-orthonormalisations
    bingham.kernels = compiled  # teardown restores the original (compiled) module anyway
    fast = sample_matrix_bingham(a, 3, np.random.default_rng(34), n_sweeps=120)
    assert np.abs(fast - slow).max() < 1e-9


def test_fallback_single_chain_has_the_target_law(without_numba: ModuleType) -> None:
    # ergodic average of one long chain (the fallback's single-chain path is the kernel body)
    a = _rotated([4.0, 2.0, 1.0, 0.0, -3.0], seed=7)
    chains = BinghamChains.start(a, 2, np.random.default_rng(35))
    rng = np.random.default_rng(36)
    chains.run(20, rng)
    total = np.zeros((5, 5))
    n = 5_000
    with threadpool_limits(1):  # the fallback's tiny LAPACK calls: BLAS thread wake-ups dominate on a busy machine
        for _ in range(n):
            chains.run(1, rng)
            v = chains.frames[0, :, :2]
            total += v @ v.T
    assert np.abs(total / n - _reference_projection(a, 2)).max() < 0.03


def test_fallback_vector_and_many_chains_have_the_target_law(without_numba: ModuleType) -> None:
    a = _rotated([3.0, 1.0, 0.0, -4.0], seed=1)
    z = sample_vector_bingham(a, np.random.default_rng(37), size=50_000)
    assert np.abs(z.T @ z / z.shape[0] - _reference_projection(a, 1)).max() < 0.01
    a5 = _rotated([4.0, 2.0, 1.0, 0.0, -3.0], seed=7)
    v = sample_matrix_bingham(a5, 2, np.random.default_rng(38), n_sweeps=20, n_chains=5_000)
    assert np.abs(_mean_projection(v) - _reference_projection(a5, 2)).max() < 0.025


def test_restarting_a_rejection_loop_on_a_fresh_block_keeps_the_law(monkeypatch: pytest.MonkeyPatch) -> None:
    # blocks of one or two proposals: almost every draw is restarted after running out at least once
    monkeypatch.setattr(bingham, "_MAX_PROPOSAL_BLOCK", 1)
    a = _rotated([3.0, 1.0, 0.0, -4.0], seed=1)
    z = sample_vector_bingham(a, np.random.default_rng(39), size=20_000)
    assert np.abs(z.T @ z / z.shape[0] - _reference_projection(a, 1)).max() < 0.015
    monkeypatch.setattr(bingham, "_MAX_PROPOSAL_BLOCK", 2)
    a5 = _rotated([4.0, 2.0, 1.0, 0.0, -3.0], seed=7)
    v = sample_matrix_bingham(a5, 2, np.random.default_rng(40), n_sweeps=10, n_chains=3_000)
    assert np.abs(_mean_projection(v) - _reference_projection(a5, 2)).max() < 0.03


def test_compiled_long_chain_has_the_target_law() -> None:
    # one chain (the benchmark's use), ergodic average of thinned states against the reference
    a = _rotated([4.0, 3.5, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0], seed=12)
    chains = BinghamChains.start(a, 3, np.random.default_rng(41)).run(50, np.random.default_rng(42))
    rng = np.random.default_rng(43)
    total = np.zeros((12, 12))
    n = 4_000
    for _ in range(n):
        chains.run(5, rng)
        v = chains.frames[0, :, :3]
        total += v @ v.T
    assert chains.sweeps == 50 + 5 * n
    ref = _reference_projection(a, 3)
    assert np.abs(ref - np.eye(12) / 4).max() > 0.04  # the uniform law would fail the next check
    assert np.abs(total / n - ref).max() < 0.015
