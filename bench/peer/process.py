"""One command as a child process: its wall time, its peak RSS (from wait4, the child's own
rusage) and its output. Both sides of the peer table are measured through this."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Measured:
    wall_s: float
    rss_mib: float
    stdout: str
    stderr: str
    returncode: int


class CommandFailed(Exception):
    pass


def measure(
    args: list[str], env: dict[str, str], cwd: Path | None = None, timeout_s: float = 1800
) -> Measured:
    # Output goes to files, so that the child can be reaped with wait4 (its own rusage) rather
    # than by Popen, which discards it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=err)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if status and os.WIFSIGNALED(status) and wall >= timeout_s:
        raise CommandFailed(f"{' '.join(args[:4])}: no answer within {timeout_s:.0f} s")
    return Measured(wall, usage.ru_maxrss / 1024, stdout, stderr, proc.returncode)


def checked(args: list[str], env: dict[str, str], cwd: Path | None = None, what: str = "") -> Measured:
    got = measure(args, env, cwd)
    if got.returncode != 0:
        tail = (got.stderr or got.stdout).strip().splitlines()[-3:]
        raise CommandFailed(f"{what or ' '.join(args[:4])} exited {got.returncode}: {' | '.join(tail)}")
    return got
