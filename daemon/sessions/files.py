"""Opening the agents' files below `sessions_root` without being led astray.

Another program writes these files, so any of them may be a FIFO, a device, a directory, a
symlink (to a FIFO, to `/dev/zero`, out of the root, or in a loop) or a regular file where a
directory should be. Every open here walks from the root one component at a time with
directory descriptors and `O_NOFOLLOW` (no symlink at or below the root is followed; the root
itself is the operator's choice), opens the file `O_NONBLOCK` (a FIFO cannot block the open)
and checks with fstat that it is a regular file before reading it. Reads are bounded.

A refused file raises UnsafeFile: one line naming the file and what it is, for the caller to
skip and count. A missing file raises FileNotFoundError, as `open` does.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from memoryd.constants import READ_CHUNK_BYTES
from memoryd.errors import OperationFailed

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OperationFailed):
    """A file below sessions_root that is not a regular file reached without symlinks, or is
    larger than its cap; it is skipped, never read."""


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(target: str, component: str, exc: OSError) -> UnsafeFile | OSError:
    """One line naming what was refused; `component` is the path that could not be opened."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
        return exc
    try:
        mode = os.lstat(component).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        what = f"{component}: is a symlink (not followed)"
    elif component != target:
        what = f"{component}: is {_kind(mode) if mode else 'gone'}, not a directory"
    else:
        what = f"{component}: is {_kind(mode) if mode else 'gone'}"
    return UnsafeFile(what + ("; skipped" if component == target else f"; {target} skipped"))


def _relative_parts(root: Path, path: Path | str) -> tuple[str, ...]:
    # What os.path.relpath and PurePosixPath(...).parts give for a path below the root, at a
    # fraction of their cost (a sweep opens every transcript it reads): both made absolute and
    # normal, then the rest of `path` after the root's own components.
    base = os.path.abspath(root)
    target = os.path.abspath(path)
    prefix = base if base.endswith("/") else base + "/"
    if target == base or not target.startswith(prefix):
        raise UnsafeFile(f"{path}: outside sessions_root {root}; skipped")
    return tuple(target[len(prefix) :].split("/"))


def open_dir_below(root: Path, path: Path | str, target: str | None = None) -> int:
    """A descriptor of the directory `path` below `root`, reached without following symlinks
    (`target`: the file it is opened for, named in a refusal)."""
    if os.path.normpath(os.fspath(path)) == os.path.normpath(os.fspath(root)):
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return _open_dirs(root, _relative_parts(root, path), target or str(path))


def _open_dirs(root: Path, parts: tuple[str, ...], target: str) -> int:
    """A descriptor of the directory `parts` below `root`, one component at a time."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    component = os.fspath(root)
    try:
        for part in parts:
            component = os.path.join(component, part)
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        raise _refusal(target, component, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(root: Path, path: Path | str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file `path` below `root`, and its fstat."""
    parts = _relative_parts(root, path)
    dir_fd = _open_dirs(root, parts[:-1], str(path))
    try:
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(str(path), str(path), exc) from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{path}: is {_kind(st.st_mode)}, not a regular file; skipped")
        # Reads block again (a regular file never blocks; this keeps Python's reads simple).
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(root: Path, path: Path | str, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `path` below `root` (at most `max_bytes`) and its fstat."""
    fd, st = open_regular(root, path)
    try:
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{path}: larger than {max_bytes} bytes; skipped")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(READ_CHUNK_BYTES, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                raise UnsafeFile(f"{path}: larger than {max_bytes} bytes; skipped")
        return b"".join(chunks), st
    finally:
        os.close(fd)


def stat_regular(root: Path, path: Path | str) -> os.stat_result:
    """The fstat of the regular file `path` below `root` (opened and closed, never read)."""
    fd, st = open_regular(root, path)
    os.close(fd)
    return st


def last_byte(path: Path | str) -> bytes | None:
    """The last byte of a regular file (None if it is empty, not regular, a symlink or gone);
    never blocks on a FIFO swapped in for it."""
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        return os.pread(fd, 1, st.st_size - 1)
    except OSError:
        return None
    finally:
        os.close(fd)
