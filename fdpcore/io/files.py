"""Atomic file writes, atomic release directories, path containment and hashing."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "PUBLISH_SUFFIX_BYTES",
    "inside",
    "publish_directory",
    "replaceable",
    "sha256_file",
    "write_bytes_atomic",
    "write_json_atomic",
]

_STAGING, _OLD = ".fdp-publish-", ".fdp-old-"
#: Bytes a staging directory's name adds to the target folder's name (``.<name>.fdp-publish-XXXXXXXX``).
PUBLISH_SUFFIX_BYTES = 1 + len(_STAGING) + 1 + 8
_RENAME_EXCHANGE = 2  # renameat2(2) flag (Linux >= 3.15)
_AT_FDCWD = -100


def inside(root: str | Path, *parts: str) -> Path:
    """``root / parts`` if it stays inside ``root`` once resolved, else :class:`ValueError`.

    >>> inside("releases", "elec-2026-11").as_posix()
    'releases/elec-2026-11'
    >>> inside("releases", "..", "x")
    Traceback (most recent call last):
    ...
    ValueError: path 'releases/../x' leaves 'releases'
    """
    base = Path(root)
    path = base.joinpath(*parts)
    if not path.resolve().is_relative_to(base.resolve()) or path.resolve() == base.resolve():
        raise ValueError(f"path {path.as_posix()!r} leaves {base.as_posix()!r}")
    return path


def replaceable(target: str | Path) -> bool:
    """Whether ``target`` may be replaced by a release directory: absent, empty, or a release directory (a ``manifest.json`` whose ``outputs`` name every other file; stale temporary files aside)."""
    t = Path(target)
    if not t.exists():
        return True
    if not t.is_dir():
        return False
    names = {p.name for p in t.iterdir() if not (p.name.startswith(".") and p.name.endswith(".tmp"))}
    if not names:
        return True
    try:
        manifest = json.loads((t / "manifest.json").read_text(encoding="utf-8"))
        listed = {str(o["path"]) for o in manifest["outputs"]} | {"manifest.json"}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return names <= listed and all((t / n).is_file() for n in names)


def publish_directory(target: str | Path, files: Mapping[str, bytes]) -> None:
    """Make ``target`` a directory holding exactly ``files``, so that a reader sees all of them or none.

    The files are written into a staging directory beside ``target`` (same file system), fsynced, and
    the staging directory is renamed onto ``target`` (an empty or absent ``target``), or exchanged with
    it atomically (``renameat2(RENAME_EXCHANGE)``; where that is missing, two renames, between which
    ``target`` is briefly absent) when it holds a previous copy of the release. Files get the user's
    umask (``0o666 & ~umask``). Staging directories left by a killed publish are removed first.

    Raises:
        FileExistsError: ``target`` holds other files (see :func:`replaceable`); nothing is changed.
        OSError: writing failed (e.g. the disk is full); ``target`` is unchanged.
    """
    t = Path(target).absolute()
    t.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(t)
    if not replaceable(t):
        raise FileExistsError(errno.EEXIST, "it holds files that are not this release's", str(t))
    staging = Path(tempfile.mkdtemp(dir=t.parent, prefix=f".{t.name}{_STAGING}"))
    try:
        os.chmod(staging, 0o777 & ~_umask())
        for name, data in files.items():
            fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        _fsync_dir(staging)
        if t.is_dir() and any(t.iterdir()):
            if not _exchange(staging, t):
                old = t.parent / f".{t.name}{_OLD}{os.urandom(4).hex()}"
                os.rename(t, old)
                os.rename(staging, t)
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, t)  # replaces an empty directory
        _fsync_dir(t.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # after an exchange it holds the previous copy
    remove_stale(t)


def remove_stale(target: Path) -> None:
    """Remove staging and old copies of ``target`` (``.<name>.fdp-publish-*``, ``.<name>.fdp-old-*``) and temporary files inside it, left by a publish that was killed."""
    for pattern in (f".{target.name}{_STAGING}*", f".{target.name}{_OLD}*"):
        for p in target.parent.glob(pattern):
            shutil.rmtree(p, ignore_errors=True)
    if target.is_dir():
        for p in target.glob(".*.tmp"):
            p.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); False where the call is unavailable."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace`` (no torn files)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; published files follow the user's umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as pretty JSON, atomically."""
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())
