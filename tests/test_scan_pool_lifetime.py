"""The parallel scan's processes end with the process that started them, SIGKILL included.

A ProcessPoolExecutor's workers hold the forkserver's liveness pipe and block on their call
queue, whose write end they hold too: when the sweep's process is killed, nothing tells them,
and the workers and the forkserver would stay forever (outside systemd's cgroup kill: a
`memoryd ingest` killed from a shell, a test run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

OWNER = """
import sys, time
from memoryd.ingest import parallel
from multiprocessing import forkserver
pool = parallel.scan_pool(2)
list(pool.map(abs, [-1, -2, -3, -4]))  # the workers are up
print(*parallel.pool_pids(), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone between the open and the read
        return False


@pytest.mark.slow
def test_the_scan_processes_end_when_the_process_that_started_them_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 3  # two workers and their forkserver
        assert all(_alive(p) for p in pids)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if _alive(p)]
        for p in left:  # do not leak them from the test either
            os.kill(p, signal.SIGKILL)
        assert left == [], f"scan processes outlived their owner: {left}"
    finally:
        if owner.poll() is None:
            owner.kill()
