"""redis-server children for tests that need a server of their own (never the shared one): the
production configuration as shipped (deploy/redis.conf and its ACL users). Each is started on a
free loopback port in a temp directory and stopped by its process, never by a command (the
default user is off)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REDIS_CONF = REPO / "deploy" / "redis.conf"

# The users deploy/redis.conf defines, with the placeholder passwords it ships.
DAEMON_USER = ("memoryd", "CHANGE-ME-DAEMON")
SUBMITTER_USER = ("memoryd-submit", "CHANGE-ME-SUBMITTER")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"redis-server on port {port} exited: {log.read_text(errors='replace')[-800:]}")
            time.sleep(0.05)
    pytest.fail(f"redis-server on port {port} did not listen within {timeout_s}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@dataclass(frozen=True)
class ProductionRedis:
    port: int

    def url(self, user: tuple[str, str] | None = None) -> str:
        creds = "" if user is None else f"{user[0]}:{user[1]}@"
        return f"redis://{creds}127.0.0.1:{self.port}/0"


@contextmanager
def production_redis(workdir: Path) -> Iterator[ProductionRedis]:
    """redis-server with deploy/redis.conf as shipped; only its port and directory moved."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed here")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "redis.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            ["redis-server", str(REDIS_CONF), "--port", str(port), "--dir", str(workdir)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_listening(proc, port, log)
        yield ProductionRedis(port)
    finally:
        stop(proc)
