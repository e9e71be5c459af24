"""Disk cache of eigenbases: hits across processes' worth of memory caches, misses on any spec change,
invalidation by code version, corrupt entries recomputed (never trusted), atomic files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fdpcore.basis import eigen
from fdpcore.basis.eigen import eigen_cache_key, weighted_eigenbasis
from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.basis.kernels import kernel_spec
from fdpcore.io.eigencache import DiskEigenCache, cache_dir, enable_disk_cache

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.1}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DiskEigenCache]:
    c = DiskEigenCache(tmp_path / "cache")
    previous = eigen.set_eigen_store(c)
    eigen.clear_memory_cache()
    yield c
    eigen.set_eigen_store(previous)
    eigen.clear_memory_cache()


def _fresh(kernel: dict, grid, **kw: object) -> eigen.Eigenbasis:  # noqa: ANN001
    eigen.clear_memory_cache()  # as a new process would: only the disk can answer
    return weighted_eigenbasis(kernel, grid, **kw)  # type: ignore[arg-type]


def test_miss_then_hit_returns_the_identical_basis(store: DiskEigenCache) -> None:
    g = midpoint_grid(60)
    b1 = _fresh(KERNEL, g)
    b2 = _fresh(KERNEL, g)
    assert (store.misses, store.hits) == (1, 1)
    assert np.array_equal(b1.eigenvalues, b2.eigenvalues) and np.array_equal(b1.eigenfunctions, b2.eigenfunctions)
    assert b1.trace_scale == b2.trace_scale and b1.n_dropped == b2.n_dropped
    assert not b2.eigenfunctions.flags.writeable
    assert len(list(store.directory.glob("*.npz"))) == 1
    assert not list(store.directory.glob(".tmp-*"))  # the temporary file was moved into place


@pytest.mark.parametrize("change", ["kernel", "nodes", "weights", "rtol", "normalize"])
def test_any_change_of_the_spec_is_a_miss(store: DiskEigenCache, change: str) -> None:
    g = midpoint_grid(40)
    _fresh(KERNEL, g)
    if change == "kernel":
        _fresh({**KERNEL, "rho": 0.1000001}, g)
    elif change == "nodes":
        _fresh(KERNEL, midpoint_grid(41))
    elif change == "weights":  # same nodes, other quadrature weights
        _fresh(KERNEL, grid_from_nodes(g.grid_points))
    elif change == "rtol":
        _fresh(KERNEL, g, rtol=1e-10)
    else:
        _fresh(KERNEL, g, normalize_trace=False)
    assert (store.misses, store.hits) == (2, 0)
    assert len(list(store.directory.glob("*.npz"))) == 2


def test_code_version_invalidates(store: DiskEigenCache, monkeypatch: pytest.MonkeyPatch) -> None:
    g = midpoint_grid(30)
    spec = kernel_spec(KERNEL)
    k1 = eigen_cache_key(spec, g, True, 1e-12)
    _fresh(KERNEL, g)
    monkeypatch.setattr(eigen, "EIGEN_CODE_VERSION", eigen.EIGEN_CODE_VERSION + "+next")
    assert eigen_cache_key(spec, g, True, 1e-12) != k1
    _fresh(KERNEL, g)
    assert (store.misses, store.hits) == (2, 0)


@pytest.mark.parametrize("damage", ["truncate", "flip_value", "garbage", "wrong_key"])
def test_corrupt_entries_are_recomputed_never_trusted(store: DiskEigenCache, damage: str) -> None:
    g = midpoint_grid(50)
    good = _fresh(KERNEL, g)
    (entry,) = store.directory.glob("*.npz")
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(200))
    elif damage == "flip_value":  # a valid file whose eigenvalues were altered: the digest catches it
        with np.load(entry) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["eigenvalues"] = arrays["eigenvalues"] * 1.5
        with open(entry, "wb") as fh:
            np.savez(fh, **arrays)
    else:  # an entry made for another spec, under this spec's name
        other = DiskEigenCache(store.directory.parent / "other")
        key2 = eigen_cache_key(kernel_spec(KERNEL), midpoint_grid(51), True, 1e-12)
        b = weighted_eigenbasis(KERNEL, midpoint_grid(51))
        other.save(key2, b.eigenvalues, b.eigenfunctions, b.trace_scale, b.n_dropped)
        entry.write_bytes(other.path(key2).read_bytes())
    again = _fresh(KERNEL, g)
    assert store.corrupt == 1
    assert np.array_equal(again.eigenvalues, good.eigenvalues)
    assert np.array_equal(again.eigenfunctions, good.eigenfunctions)
    _fresh(KERNEL, g)  # the recomputed entry was written back and is trusted now
    assert store.hits == 1


def test_unwritable_cache_falls_back_to_computing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = DiskEigenCache(blocker)  # its directory cannot be created
    previous = eigen.set_eigen_store(c)
    try:
        b = _fresh(KERNEL, midpoint_grid(20))
        assert b.n_basis > 0 and c.misses == 1
    finally:
        eigen.set_eigen_store(previous)
        eigen.clear_memory_cache()


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("FDP_CACHE_DIR", raising=False)
    assert cache_dir() == tmp_path / "state" / "cache"
    monkeypatch.setenv("FDP_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    previous = eigen.set_eigen_store(None)
    try:
        c = enable_disk_cache()
        assert c.directory == tmp_path / "c" / "eigen"
        assert enable_disk_cache() is c
    finally:
        eigen.set_eigen_store(previous)
