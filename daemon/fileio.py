"""The one way memoryd writes workspace files: temp file, fsync, expected-hash check, rename.

* mode 0600, parent directories 0700, never through a symlink (the target, or a parent
  inside the workspace);
* optimistic concurrency: the caller passes the sha256 of the content it read; if the file
  changed since, WriteConflict is raised and nothing is written;
* `content=None` removes the file (after the same check);
* fenced: right before it changes a file, every write guard of the running task is asked
  (`guarded_writes`): a workspace lease whose holder may have lost it refuses (daemon.lock),
  so a writer stopped past its lease writes nothing when it resumes.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from daemon.constants import DIR_MODE, FILE_MODE, READ_CHUNK_BYTES
from daemon.errors import OperationFailed, UsageError, WriteConflict
from daemon.failpoints import failpoint

ABSENT = "absent"  # expected_hash for "the file must not exist yet"

WriteGuard = Callable[[Path], None]  # raises when `path` may not be written now
_guards: contextvars.ContextVar[tuple[WriteGuard, ...]] = contextvars.ContextVar(
    "memoryd_write_guards", default=()
)


@contextmanager
def guarded_writes(guard: WriteGuard) -> Iterator[None]:
    """Every file write of this task (and of the tasks and threads it starts) asks `guard` first."""
    token = _guards.set((*_guards.get(), guard))
    try:
        yield
    finally:
        _guards.reset(token)


def check_write_allowed(path: Path) -> None:
    """Called right before a file is changed: the guards of the running task may refuse."""
    for guard in _guards.get():
        guard(path)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def make_private_dirs(path: Path) -> None:
    """Create `path` and every missing parent with mode 0700. (`mkdir(parents=True, mode=…)`
    applies the mode to the last directory only; its parents would get 0755.) Directories that
    already exist are left as they are."""
    missing = []
    cur = path
    while not os.path.lexists(cur):
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass  # another process made it first


def ensure_dir(path: Path, *, root: Path | None = None) -> None:
    """Create `path` (0700, parents too) and refuse any symlinked component below `root`."""
    make_private_dirs(path)
    check_no_symlinks(path, root=root)


def check_no_symlinks(path: Path, *, root: Path | None = None) -> None:
    """Refuse `path` if it, or a directory between `root` and it, is a symlink."""
    parts = [path]
    if root is not None:
        try:
            rel = path.relative_to(root)
        except ValueError:
            raise UsageError(f"{path}: outside the workspace {root}") from None
        cur = root
        parts = []
        for piece in rel.parts:
            cur = cur / piece
            parts.append(cur)
    for p in parts:
        try:
            if stat.S_ISLNK(os.lstat(p).st_mode):
                raise UsageError(f"{p}: refusing to follow a symlink in the workspace")
        except FileNotFoundError:
            return


def read_bytes_nofollow(path: Path) -> bytes | None:
    """File bytes, or None if absent. Refuses symlinks and non-regular files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink
            raise UsageError(f"{path}: refusing to read through a symlink") from None
        raise OperationFailed(f"{path}: cannot read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, READ_CHUNK_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def current_hash(path: Path) -> str:
    data = read_bytes_nofollow(path)
    return ABSENT if data is None else sha256_hex(data)


def commit_file(
    path: Path,
    content: bytes | str | None,
    *,
    expected_hash: str | None,
    root: Path | None = None,
    conflict_message: str | None = None,
) -> None:
    """Atomically replace (or remove, with content=None) `path`.

    `expected_hash`: sha256 hex of what the caller read, ABSENT if it read nothing, or None to
    skip the check (only for files memoryd alone writes, such as the corpus of a new day).
    """
    if isinstance(content, str):
        content = content.encode("utf-8")
    parent = path.parent
    ensure_dir(parent, root=root)
    check_no_symlinks(path, root=root)
    if content is None:
        if expected_hash is not None and current_hash(path) != expected_hash:
            raise WriteConflict(conflict_message or f"{path.name} changed before it could be removed")
        check_write_allowed(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        fsync_dir(parent)
        return
    tmp = parent / f".{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
    try:
        try:
            view = memoryview(content)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        # The check sits right before the rename so the race window is as small as it can be.
        if expected_hash is not None and current_hash(path) != expected_hash:
            raise WriteConflict(conflict_message or f"{path.name} changed before the write could commit")
        # Past the hash check, before the lease check: a writer stopped here must be refused.
        failpoint(f"file.commit.{file_kind(path)}")
        check_write_allowed(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(parent)


def file_kind(path: Path) -> str:
    """What a workspace file is, for the failpoint of its commit: memory (MEMORY.md), diary
    (DREAMS.md), corpus (a session-corpus day file), daily_note (another memory/*.md), or file."""
    name = path.name
    if name.lower() == "memory.md":
        return "memory"
    if name == "DREAMS.md":
        return "diary"
    if path.parent.name == "session-corpus":
        return "corpus"
    if name.endswith(".md") and "memory" in path.parts:
        return "daily_note"
    return "file"


def append_lines(path: Path, lines: list[str], *, root: Path | None = None) -> int:
    """Append text lines (each without newline) to a file memoryd owns; return lines before.

    Appends go through a read + commit so a crash never leaves a half-written line and the
    file is never reached through a symlink.
    """
    data = read_bytes_nofollow(path)
    existing = data or b""
    before = existing.count(b"\n") + (1 if existing and not existing.endswith(b"\n") else 0)
    if existing and not existing.endswith(b"\n"):
        existing += b"\n"
    new = existing + ("\n".join(lines) + "\n").encode("utf-8")
    commit_file(path, new, expected_hash=ABSENT if data is None else sha256_hex(data), root=root)
    return before


def fsync_dir(path: Path) -> None:
    """Make a rename or create in `path` durable; a directory that cannot be opened is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
