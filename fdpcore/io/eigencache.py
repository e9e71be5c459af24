"""Disk cache of kernel eigenbases across processes and releases (MATH.md §1.3-1.4, §3.5).

An eigenbasis depends only on public inputs (kernel, grid nodes and weights, ``rtol``, the
trace normalisation and the code of the eigen routine), so it can be computed once and reused by
every later release. Entries live in ``$FDP_CACHE_DIR/eigen/`` (default: ``<fdp state dir>/cache/eigen/``)
as ``<sha256>.npz``, where the SHA-256 is taken over :func:`fdpcore.basis.eigen.eigen_cache_key`.

Each entry stores the canonical key it was made for and a SHA-256 of its arrays; an entry whose
key or digest does not match, or that cannot be read, is treated as a miss (removed and
recomputed), never trusted. Writes go to a temporary file in the same directory and are moved
into place with ``os.replace`` (atomic on POSIX), so a reader never sees a partial entry. The
cache is an optimisation only: any I/O failure falls back to computing the basis.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path

import numpy as np

from fdpcore.basis import eigen
from fdpcore.ledger import state_dir

__all__ = ["DiskEigenCache", "cache_dir", "enable_disk_cache"]


def cache_dir() -> Path:
    """``$FDP_CACHE_DIR`` if set, else ``<fdp state dir>/cache`` (resolved at each call)."""
    env = os.environ.get("FDP_CACHE_DIR")
    return Path(env) if env else state_dir() / "cache"


def _digest(lam: np.ndarray, phi: np.ndarray, scale: float, n_dropped: int) -> str:
    h = hashlib.sha256()
    for a in (lam, phi):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a, dtype="<f8").tobytes())
    h.update(float(scale).hex().encode())
    h.update(str(int(n_dropped)).encode())
    return h.hexdigest()


class DiskEigenCache:
    """An :class:`fdpcore.basis.eigen.EigenStore` on disk.

    Args:
        root: cache directory; ``None`` resolves :func:`cache_dir` at each access (so it follows
            ``FDP_CACHE_DIR``/``FDP_STATE_DIR``).

    Attributes:
        hits: counters of this instance (for tests and benchmarks).
        misses: see ``hits``.
        corrupt: see ``hits``.

    >>> import tempfile
    >>> from fdpcore.basis.grids import midpoint_grid
    >>> c = DiskEigenCache(tempfile.mkdtemp())
    >>> previous = eigen.set_eigen_store(c); eigen.clear_memory_cache()
    >>> b1 = eigen.weighted_eigenbasis({"name": "brownian"}, midpoint_grid(30)); eigen.clear_memory_cache()
    >>> b2 = eigen.weighted_eigenbasis({"name": "brownian"}, midpoint_grid(30)); eigen.clear_memory_cache()
    >>> _ = eigen.set_eigen_store(previous)
    >>> (c.misses, c.hits, bool(np.array_equal(b1.eigenfunctions, b2.eigenfunctions)))
    (1, 1, True)
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self._root = Path(root) if root is not None else None
        self.hits = 0
        self.misses = 0
        self.corrupt = 0

    @property
    def directory(self) -> Path:
        """The directory holding the entries."""
        return (self._root if self._root is not None else cache_dir()) / "eigen"

    def path(self, key: bytes) -> Path:
        """The entry file of a canonical key."""
        return self.directory / f"{hashlib.sha256(key).hexdigest()}.npz"

    def load(self, key: bytes) -> tuple[np.ndarray, np.ndarray, float, int] | None:
        """The stored eigenbasis of ``key``, or ``None`` on a miss or a corrupt entry (which is removed)."""
        p = self.path(key)
        try:
            raw = p.read_bytes()
        except OSError:
            self.misses += 1
            return None
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                stored_key = z["key"].tobytes()
                lam = np.array(z["eigenvalues"], dtype=np.float64)
                phi = np.array(z["eigenfunctions"], dtype=np.float64)
                scale = float(z["trace_scale"])
                n_dropped = int(z["n_dropped"])
                digest = str(z["digest"])
            ok = stored_key == key and digest == _digest(lam, phi, scale, n_dropped)
        except Exception:  # noqa: BLE001 - any unreadable entry is a corrupt entry
            ok = False
        if not ok:
            self.corrupt += 1
            self.misses += 1
            try:
                p.unlink()
            except OSError:
                pass
            return None
        self.hits += 1
        return lam, phi, scale, n_dropped

    def save(self, key: bytes, eigenvalues: np.ndarray, eigenfunctions: np.ndarray, trace_scale: float,
             n_dropped: int) -> None:
        """Write an entry atomically (temporary file + ``os.replace``); I/O failures are ignored."""
        d = self.directory
        buf = io.BytesIO()
        np.savez(buf, key=np.frombuffer(key, dtype=np.uint8), eigenvalues=eigenvalues, eigenfunctions=eigenfunctions,
                 trace_scale=np.float64(trace_scale), n_dropped=np.int64(n_dropped),
                 digest=np.str_(_digest(eigenvalues, eigenfunctions, trace_scale, n_dropped)))
        tmp = None
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".npz")
            with os.fdopen(fd, "wb") as fh:
                fh.write(buf.getvalue())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path(key))
            tmp = None
        except OSError:
            pass
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def enable_disk_cache(root: str | Path | None = None) -> DiskEigenCache:
    """Install a :class:`DiskEigenCache` as the eigenbasis store unless one is already installed; return it.

    >>> import tempfile
    >>> previous = eigen.set_eigen_store(None)
    >>> c = enable_disk_cache(tempfile.mkdtemp())
    >>> enable_disk_cache() is c
    True
    >>> _ = eigen.set_eigen_store(previous)
    """
    current = eigen._STORE[0]
    if isinstance(current, DiskEigenCache) and root is None:
        return current
    store = DiskEigenCache(root)
    eigen.set_eigen_store(store)
    return store
