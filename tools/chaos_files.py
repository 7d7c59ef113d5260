"""Hostile files for the fault campaign (tools/chaos.py): session files swapped mid-run for a
FIFO, a symlink to a FIFO, a symlink out of sessions_root, a symlink loop or /dev/zero (then
put back), and a state directory on a small tmpfs that a ballast file fills.

Planted text: a symlink out of sessions_root points at a copy of what it replaces, outside,
with PLANTED added (a transcript line, a session entry). Nothing of it may ever reach the
state directory: `planted_in` reads every byte there.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PLANTED = "zqplantedoutsidetok"  # no session token is a substring of it, nor it of one
TARGETS = ("transcript", "sessions.json", "sessions_dir", "agent_dir")
REPLACEMENTS = ("fifo", "symlink_fifo", "symlink_outside", "symlink_loop", "dev_zero")
BALLAST = "ballast"
_CHUNK = 1 << 20


def target_path(sessions_root: Path, agent: str, target: str, sid: str) -> Path:
    agent_dir = sessions_root / "agents" / agent
    return {
        "transcript": agent_dir / "sessions" / f"{sid}.jsonl",
        "sessions.json": agent_dir / "sessions" / "sessions.json",
        "sessions_dir": agent_dir / "sessions",
        "agent_dir": agent_dir,
    }[target]


def _planted_line(sid: str) -> str:
    message = {"role": "user", "content": f"{PLANTED} read from outside sessions_root", "timestamp": 1}
    return json.dumps({"type": "message", "id": f"{sid}-planted", "parentId": None, "message": message})


def _plant_file(path: Path) -> None:
    """Add PLANTED to a copy: a message line to a transcript, an entry to a sessions.json."""
    if path.name == "sessions.json":
        entries = json.loads(path.read_text())
        entries[f"agent:x:{PLANTED}"] = {"sessionId": PLANTED, "sessionKind": "interactive"}
        path.write_text(json.dumps(entries))
    elif path.suffix == ".jsonl":
        with path.open("a") as fh:
            fh.write(_planted_line(path.stem) + "\n")


def _plant_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            _plant_file(path)


@dataclass
class Swap:
    """One session path replaced by something hostile; `restore` puts the original back."""

    path: Path
    aside: Path  # where the original waits (same filesystem: a rename each way)
    outside: Path  # this swap's own directory outside sessions_root
    replacement: str

    @classmethod
    def make(cls, path: Path, replacement: str, work: Path, n: int) -> Swap:
        aside = work / "aside" / f"{n}-{path.name}"
        outside = work / "outside" / str(n)
        aside.parent.mkdir(parents=True, exist_ok=True)
        outside.mkdir(parents=True, exist_ok=True)
        swap = cls(path, aside, outside, replacement)
        swap._apply()
        return swap

    def _apply(self) -> None:
        if self.replacement == "symlink_outside":  # a planted copy, made before the original moves
            copy = self.outside / self.path.name
            if self.path.is_dir():
                shutil.copytree(self.path, copy, symlinks=True)
                _plant_tree(copy)
            else:
                shutil.copyfile(self.path, copy)
                _plant_file(copy)
        os.rename(self.path, self.aside)
        if self.replacement == "fifo":
            os.mkfifo(self.path, 0o600)
        elif self.replacement == "symlink_fifo":
            os.mkfifo(self.outside / "fifo", 0o600)
            os.symlink(self.outside / "fifo", self.path)
        elif self.replacement == "symlink_outside":
            os.symlink(self.outside / self.path.name, self.path)
        elif self.replacement == "symlink_loop":
            os.symlink(self.path.name, self.path)  # points at itself: ELOOP
        elif self.replacement == "dev_zero":
            os.symlink("/dev/zero", self.path)
        else:
            raise ValueError(f"unknown replacement {self.replacement!r}")

    def restore(self) -> None:
        os.unlink(self.path)  # a FIFO or a symlink, never followed
        os.rename(self.aside, self.path)
        shutil.rmtree(self.outside, ignore_errors=True)


def planted_in(state_dir: Path) -> list[str]:
    """Files under the state directory (stores, WAL, workspace, corpus, index) holding PLANTED."""
    needle = PLANTED.encode()
    found: list[str] = []
    for path in sorted(state_dir.rglob("*")) if state_dir.exists() else []:
        if path.is_symlink() or not path.is_file() or path.name == BALLAST:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue  # removed or replaced between listing and reading
        if needle in data:
            found.append(str(path.relative_to(state_dir)))
    return found


class Tmpfs:
    """A tmpfs of `size_mb` mounted on the state directory (root only), and a ballast file that
    fills it. `unmount` runs whatever happens (the campaign calls it in a finally)."""

    def __init__(self, mount_point: Path, size_mb: int):
        self.mount_point = mount_point
        self.size_mb = size_mb
        self.mounted = False

    @staticmethod
    def refusal() -> str | None:
        """Why a tmpfs cannot be mounted here, or None."""
        if os.geteuid() != 0:
            return "--tmpfs-mb needs root (it mounts a tmpfs on the state directory); running without the disk-full fault"
        if shutil.which("mount") is None or shutil.which("umount") is None:
            return "--tmpfs-mb needs mount and umount on the PATH; running without the disk-full fault"
        return None

    def mount(self) -> None:
        self.mount_point.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0700", "tmpfs", str(self.mount_point)],
            check=True,
            capture_output=True,
            timeout=30,
        )
        self.mounted = True

    def unmount(self) -> None:
        if not self.mounted:
            return
        done = subprocess.run(["umount", str(self.mount_point)], capture_output=True, timeout=30)
        if done.returncode != 0:  # still busy (a child not yet reaped): detach it now, freed when idle
            subprocess.run(["umount", "-l", str(self.mount_point)], capture_output=True, timeout=30)
        self.mounted = False

    @property
    def ballast(self) -> Path:
        return self.mount_point / BALLAST

    def fill(self) -> int:
        """Write the ballast until the filesystem is full; bytes written."""
        written = 0
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = b"\0" * _CHUNK
            while True:
                try:
                    written += os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    if len(block) == 1:
                        break
                    block = block[: len(block) // 2]  # fill the last pages too
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        try:
            os.unlink(self.ballast)
        except FileNotFoundError:
            pass
