"""The one way memoryd writes workspace files: temp file, fsync, expected-hash check, rename.

* mode 0600, parent directories 0700, never through a symlink (the target, or a parent
  inside the workspace);
* optimistic concurrency: the caller passes the sha256 of the content it read; if the file
  changed since, WriteConflict is raised and nothing is written;
* `content=None` removes the file (after the same check);
* fenced: right before it changes a file, every write guard of the running task is asked
  (`guarded_writes`): a workspace lease whose holder may have lost it refuses (memoryd.lock),
  so a writer stopped past its lease writes nothing when it resumes.

Temp files of atomic writes are an artifact kind: a crash between the write of the temp and
its rename leaves a copy of the new content (memory text) under a hidden name. Every atomic
write of memoryd (here, and the store, key and last-sweep files) names its temp with
`atomic_temp`, the one form `.<name>.tmp-<pid>-<8 hex>`. A leftover is a temp of that form
whose writer is gone: its pid is not a live process; or it is this process's pid and no write
of this process has it in flight (a pid reused by a later memoryd, often the same small pid in
a container); or that process started after the temp was last written (Linux's /proc says
when), so it reused the pid. Any other temp is kept: its process may be writing it. Leftovers
are removed by the next write of the same file, by every purge (forget and erasure) and at
daemon start, and the erasure verifier reads them until then. Where a process's start cannot
be read, a leftover whose pid a live process reuses stays until that process ends, and the
verifier reports it: it fails closed, never quietly.
"""

from __future__ import annotations

import contextvars
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memoryd.constants import DIR_MODE, FILE_MODE, PID_START_MARGIN_S, READ_CHUNK_BYTES, TEMP_NONCE_BYTES
from memoryd.derivations import bytes_digest
from memoryd.errors import OperationFailed, UsageError, WriteConflict
from memoryd.failpoints import failpoint

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


sha256_hex = bytes_digest  # declared with every other derivation (daemon/derivations.py)


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
    remove_leftover_temps(parent, of=path.name)  # the next write of a file ends its leftovers
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
    with atomic_temp(path) as tmp:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
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


# --- temp files of atomic writes ---------------------------------------------------------------

# `.<target name>.tmp-<pid>-<nonce>`: hidden, beside its target, named for the process writing it.
_TEMP_INFIX = ".tmp-"
_TEMP_NAME = re.compile(
    r"\.(?P<target>.+)"
    + re.escape(_TEMP_INFIX)
    + r"(?P<pid>[1-9][0-9]{0,9})-(?P<nonce>[0-9a-f]{"
    + str(2 * TEMP_NONCE_BYTES)
    + "})",
    re.DOTALL,
)
# Names of this process's temps whose write is under way (the pid and nonce make each unique).
_in_flight: set[str] = set()
_in_flight_lock = threading.Lock()


def temp_name(target: str, pid: int, nonce: str) -> str:
    return f".{target}{_TEMP_INFIX}{pid}-{nonce}"


def temp_target(name: str) -> tuple[str, int] | None:
    """(target name, writer pid) if `name` is the temp of an atomic write, else None."""
    m = _TEMP_NAME.fullmatch(name)
    return (m["target"], int(m["pid"])) if m else None


@contextmanager
def atomic_temp(path: Path) -> Iterator[Path]:
    """The temp path of one atomic write of `path`, in flight while the block runs; whatever is
    left at that name when it ends (a failed write, or the source of a link) is removed."""
    tmp = path.with_name(temp_name(path.name, os.getpid(), os.urandom(TEMP_NONCE_BYTES).hex()))
    with _in_flight_lock:
        _in_flight.add(tmp.name)
    try:
        yield tmp
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        finally:
            with _in_flight_lock:
                _in_flight.discard(tmp.name)


def is_leftover_temp(path: Path) -> bool:
    """Whether `path` is the temp of an atomic write whose writer is gone (see the module doc)."""
    found = temp_target(path.name)
    if found is None:
        return False
    pid = found[1]
    if pid == os.getpid():
        with _in_flight_lock:
            return path.name not in _in_flight
    if not _pid_alive(pid):
        return True
    try:
        changed = os.lstat(path).st_mtime
    except FileNotFoundError:
        return False
    started = _process_start(pid)
    # A process that started after the temp was last written cannot be its writer: the pid was
    # reused. Clocks are read to a second (the boot time), hence the margin.
    return started is not None and changed < started - PID_START_MARGIN_S


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: alive
        return True
    except (OverflowError, ValueError):  # past any pid this system can have
        return False
    return True


def _process_start(pid: int) -> float | None:
    """When process `pid` started (Unix seconds), from Linux's /proc; None where it cannot tell."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        # Fields after the command name (which may hold spaces and parentheses); starttime is
        # field 22 of the whole line, in clock ticks since boot.
        ticks = int(stat_line[stat_line.rindex(")") + 2 :].split()[19])
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def remove_leftover_temps(directory: Path, *, of: str | None = None) -> int:
    """Remove the leftover temps in `directory` (only those of the file named `of`, if given);
    how many were removed. A symlink or directory with a temp's name is not a temp: left alone."""
    removed = 0
    try:
        with os.scandir(directory) as entries:
            # The infix first: most entries are not temps, and it is cheaper than a stat.
            names = [e.name for e in entries if _TEMP_INFIX in e.name and e.is_file(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for name in names:
        found = temp_target(name)
        if found is None or (of is not None and found[0] != of) or not is_leftover_temp(directory / name):
            continue
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            continue
        removed += 1
    if removed:
        fsync_dir(directory)
    return removed


def remove_leftover_temps_under(root: Path) -> int:
    """`remove_leftover_temps` in `root` and every directory below it (symlinks not followed)."""
    removed = 0
    for here, dirs, _files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
        removed += remove_leftover_temps(Path(here))
    return removed
