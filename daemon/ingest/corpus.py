"""The session corpus: `memory/.dreams/session-corpus/<day>.txt`, one line per staged message,
`[<agentId>/<sessionPath>#L<line>] <snippet>` (reference §1, §5.2).

Appends are true appends (O_APPEND, one write per day file per batch) rather than
read-and-replace: a day file of a large first sweep runs to hundreds of megabytes, and
rewriting it per batch would cost its size in memory and I/O each time. Each day file a sweep
appended to is fsynced once, when the sweep ends (`sync`), not once per batch: a process that
dies keeps what it wrote (the page cache outlives it; a later writer cuts off what was never
committed); only a power loss can take the lines of the sweep's last batches, as it can take
the store's last commits (WAL, synchronous=NORMAL), and a line lost that way holds less
memory, never more. The rest follows the
workspace write rules (daemon/fileio.py): 0600, 0700 directories, no symlink anywhere below
the workspace. A crash mid-write can leave a partial last line; the next append starts on a
fresh line, so a partial line never merges with a new one.

An append is undone when it, or the store commit it belongs to, fails (disk full, a lease lost
meanwhile: the commit is fenced off): each day file is cut back to its size before the append,
if it is still the file and the size this append left. So a failed batch leaves no lines that
a retry would stage again, and a writer that resumed past its lease takes its lines back.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memoryd.constants import CORPUS_RELATIVE_DIR, FILE_MODE, READ_CHUNK_BYTES, RENDERED_LINE_MAX_CHARS
from memoryd.errors import OperationFailed, UsageError
from memoryd.failpoints import failpoint
from memoryd.fileio import check_no_symlinks, check_write_allowed, ensure_dir, fsync_dir
from memoryd.utf16 import truncate_utf16


def corpus_relative_path(day: str) -> str:
    return f"{CORPUS_RELATIVE_DIR}/{day}.txt"


def render_line(agent_id: str, session_path: str, line_number: int, snippet: str) -> str:
    return truncate_utf16(f"[{agent_id}/{session_path}#L{line_number}] {snippet}", RENDERED_LINE_MAX_CHARS)


@dataclass(frozen=True, slots=True)
class Extent:
    """What one append added to one day file: bytes [before, after) of inode `inode`."""

    path: Path
    inode: int
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class Appended:
    firsts: dict[str, int]  # the 1-based line number of each day's first new line
    extents: tuple[Extent, ...]


class CorpusAppender:
    """Appends to one workspace's corpus day files and tracks their line counts.

    The count of a file is cached against its (inode, size, mtime): a file another writer
    changed (forget rewrites the corpus) is counted afresh.
    """

    def __init__(self, workspace: Path):
        self.workspace = workspace
        self._counts: dict[str, tuple[tuple[int, int, int], int]] = {}
        self._unsynced: set[str] = set()  # days appended to since the last sync
        self._created = False  # a day file was created since the last sync: its directory too

    def path_for(self, day: str) -> Path:
        return self.workspace / corpus_relative_path(day)

    async def append(self, days: dict[str, list[str]]) -> Appended:
        """Append each day's lines to its file; nothing is fsynced here (`sync` does it once per
        file). If any of it fails, what was written is undone."""
        firsts: dict[str, int] = {}
        fds: list[int] = []
        extents: list[Extent] = []
        try:
            for day, lines in days.items():
                fd, first, before = self._write(day, lines)
                fds.append(fd)
                firsts[day] = first
                after = os.fstat(fd)
                extents.append(Extent(self.path_for(day), after.st_ino, before, after.st_size))
                self._unsynced.add(day)
                self._created = self._created or before == 0
            for day, fd in zip(days, fds, strict=True):
                after = os.fstat(fd)
                self._counts[day] = (
                    (after.st_ino, after.st_size, after.st_mtime_ns),
                    firsts[day] - 1 + len(days[day]),
                )
        except OSError as exc:
            self.undo(Appended(firsts, tuple(extents)))
            raise OperationFailed(
                f"{self.workspace / CORPUS_RELATIVE_DIR}: corpus append failed ({exc.strerror or exc}); "
                "nothing of this batch was staged and the next sweep reads it again"
            ) from None
        except BaseException:
            self.undo(Appended(firsts, tuple(extents)))
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return Appended(firsts, tuple(extents))

    async def sync(self) -> None:
        """fsync every day file appended to since the last sync, all at once (threads: about one
        fsync's wait however many days), then the directory if a file was created."""
        import anyio  # here, not at the top: the scan workers import this module for render_line

        days, self._unsynced = sorted(self._unsynced), set()
        created, self._created = self._created, False
        corpus_dir = self.workspace / CORPUS_RELATIVE_DIR
        try:
            async with anyio.create_task_group() as tg:
                for day in days:
                    tg.start_soon(anyio.to_thread.run_sync, _fsync_path, self.path_for(day))
            if created:
                fsync_dir(corpus_dir)
        except* OSError as group:
            exc = group.exceptions[0]
            raise OperationFailed(f"{corpus_dir}: cannot fsync the corpus: {exc}") from None

    def sizes_before(self, days: Iterable[str]) -> list[tuple[str, int, int]]:
        """(relative path, inode, size) of each day file now (0, 0 for one not there yet): what
        an append about to happen records, so a writer after a crash can cut it off."""
        out = []
        for day in days:
            try:
                st = os.lstat(self.path_for(day))
            except FileNotFoundError:
                out.append((corpus_relative_path(day), 0, 0))
                continue
            out.append((corpus_relative_path(day), st.st_ino, st.st_size))
        return out

    def cut_back(self, pending: Iterable[tuple[str, int, int]]) -> int:
        """Cut each day file back to its size before an append that never committed (its writer
        died first); a file replaced since (a forget's rewrite) is left alone. Bytes removed."""
        removed = 0
        for relative, inode, before in pending:
            path = self.workspace / relative
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise OperationFailed(f"{path}: cannot open corpus file: {exc.strerror}") from None
            try:
                st = os.fstat(fd)
                if (inode == 0 or st.st_ino == inode) and st.st_size > before:
                    check_write_allowed(path)
                    os.ftruncate(fd, before)
                    os.fsync(fd)
                    removed += st.st_size - before
            finally:
                os.close(fd)
        self._counts.clear()
        return removed

    def undo(self, appended: Appended) -> list[Path]:
        """Cut each file back to its size before `appended`, where it is still the file and the
        size that append left (another writer's rewrite or append since is never cut into).
        Returns the files it could not undo. Runs without the lease check: it only removes
        what this writer itself added."""
        left: list[Path] = []
        for extent in appended.extents:
            try:
                fd = os.open(extent.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                left.append(extent.path)
                continue
            try:
                st = os.fstat(fd)
                if st.st_ino != extent.inode or st.st_size != extent.after:
                    left.append(extent.path)
                    continue
                os.ftruncate(fd, extent.before)
                os.fsync(fd)
            except OSError:
                left.append(extent.path)
            finally:
                os.close(fd)
        self._counts.clear()
        return left

    def _write(self, day: str, lines: list[str]) -> tuple[int, int, int]:
        """(open fd, first new line number, the file's size before this write)."""
        path = self.path_for(day)
        ensure_dir(path.parent, root=self.workspace)
        check_no_symlinks(path, root=self.workspace)
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
            )
        except OSError as exc:
            if exc.errno == 40:
                raise UsageError(f"{path}: refusing to write through a symlink") from None
            raise OperationFailed(f"{path}: cannot open corpus file: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UsageError(f"{path}: corpus file is not a regular file")
            before, needs_newline = self._existing_lines(path, st)
            data = ("\n" if needs_newline else "") + "\n".join(lines) + "\n"
            check_write_allowed(path)
            failpoint("ingest.corpus.write")
            view = memoryview(data.encode("utf-8"))
            try:
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            except OSError:
                _cut_back(fd, st)  # a short write (disk full) leaves nothing of this day behind
                raise
        except BaseException:
            os.close(fd)
            raise
        return fd, before + 1, st.st_size

    def _existing_lines(self, path: Path, st: os.stat_result) -> tuple[int, bool]:
        """(lines in the file, whether it lacks a final newline). A partial last line counts."""
        if st.st_size == 0:
            return 0, False
        cached = self._counts.get(path.stem)
        if cached is not None and cached[0] == (st.st_ino, st.st_size, st.st_mtime_ns):
            return cached[1], False
        newlines = 0
        last = b""
        with open(path, "rb") as fh:
            while chunk := fh.read(READ_CHUNK_BYTES):
                newlines += chunk.count(b"\n")
                last = chunk[-1:]
        if last != b"\n":
            return newlines + 1, True
        return newlines, False


def _cut_back(fd: int, before: os.stat_result) -> None:
    try:
        if os.fstat(fd).st_ino == before.st_ino:
            os.ftruncate(fd, before.st_size)
    except OSError:
        pass  # the sweep reports the write's own error; the next append starts on a fresh line


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a forget that ran since replaced or removed it, durably
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
