"""One command as a child process: its wall time, its peak RSS and its output. Both sides of
the peer table are measured through this.

The peak RSS is GNU time's report of the command it forked (`%M`), not the rusage of a child of
this process: a child made by fork or vfork starts with the bench's pages, and Linux keeps that
as the floor of its ru_maxrss through exec (the bench holds the plan and the writer's JSON of
every session: 98 MiB at 1,500 sessions, reported as memoryd's peak in every row). `time` is
small, so the floor of its own child is a couple of MiB.
"""

from __future__ import annotations

import os
import signal
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


GNU_TIME = Path("/usr/bin/time")


def measure(
    args: list[str], env: dict[str, str], cwd: Path | None = None, timeout_s: float = 1800
) -> Measured:
    if not GNU_TIME.exists():
        raise CommandFailed(f"{GNU_TIME} (GNU time) is missing: it measures peak RSS; apt-get install time")
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as rss,
    ):
        started = time.perf_counter()
        # Its own session: a timeout ends `time` and the command it forked together.
        proc = subprocess.Popen(
            [str(GNU_TIME), "-q", "-f", "%M", "-o", rss.name, *args],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timer = threading.Timer(timeout_s, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            returncode = proc.wait()
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        peak_kib = rss.read().strip().splitlines()
    if returncode < 0 and wall >= timeout_s:
        raise CommandFailed(f"{' '.join(args[:4])}: no answer within {timeout_s:.0f} s")
    if not peak_kib or not peak_kib[-1].isdigit():
        raise CommandFailed(f"{' '.join(args[:4])}: GNU time reported no peak RSS ({peak_kib!r})")
    return Measured(wall, int(peak_kib[-1]) / 1024, stdout, stderr, returncode)


def checked(args: list[str], env: dict[str, str], cwd: Path | None = None, what: str = "") -> Measured:
    got = measure(args, env, cwd)
    if got.returncode != 0:
        tail = (got.stderr or got.stdout).strip().splitlines()[-3:]
        raise CommandFailed(f"{what or ' '.join(args[:4])} exited {got.returncode}: {' | '.join(tail)}")
    return got
