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
from typing import Any

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


def _redis_server(args: list[str], workdir: Path, name: str, port: int) -> subprocess.Popen[bytes]:
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(["redis-server", *args], stdout=out, stderr=subprocess.STDOUT)
    wait_listening(proc, port, log)
    return proc


def _data_node_args(port: int, workdir: Path) -> list[str]:
    return [
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
        "--save", "", "--appendonly", "no", "--daemonize", "no",
    ]  # fmt: skip


@dataclass
class SentinelDeployment:
    """A primary, a replica (`--replicaof`) and three Sentinels (quorum 2) monitoring MASTER."""

    MASTER = "mymaster"

    workdir: Path
    primary_port: int
    replica_port: int
    sentinel_ports: tuple[int, ...]
    procs: dict[str, subprocess.Popen[bytes]]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.MASTER}/0"

    def sentinel(self, i: int = 0) -> Any:
        import redis as sync_redis

        return sync_redis.Redis(port=self.sentinel_ports[i], socket_timeout=2)

    def master_port(self) -> int | None:
        """The primary's port as a majority of the Sentinels say (None while they disagree)."""
        seen = []
        for i in range(len(self.sentinel_ports)):
            client = self.sentinel(i)
            try:
                seen.append(int(client.sentinel_get_master_addr_by_name(self.MASTER)[1]))
            except Exception:
                seen.append(-1)
            finally:
                client.close()
        best = max(set(seen), key=seen.count)
        return best if best > 0 and seen.count(best) * 2 > len(seen) else None

    def kill_primary(self) -> None:
        self.procs["primary"].kill()  # SIGKILL: no shutdown, no last writes
        self.procs["primary"].wait(10)

    def restart_killed_primary(self) -> None:
        """The killed primary started again on its port, as systemd would (it kept no data):
        the Sentinels make it a replica of the promoted one, which has a replica again."""
        self.procs["primary"] = _redis_server(
            _data_node_args(self.primary_port, self.workdir), self.workdir, "primary", self.primary_port
        )

    def wait_until(self, ready: Any, what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.1)
        pytest.fail(f"sentinel deployment: no {what} within {timeout_s}s")

    def wait_monitored(self) -> None:
        """Until the replica is in sync and every Sentinel knows it and the other two."""

        def ready() -> bool:
            for i in range(len(self.sentinel_ports)):
                client = self.sentinel(i)
                try:
                    master = client.sentinel_master(self.MASTER)
                    replicas = client.sentinel_slaves(self.MASTER)
                except Exception:
                    return False
                finally:
                    client.close()
                if int(master.get("num-other-sentinels", 0)) < len(self.sentinel_ports) - 1:
                    return False
                if not any(r.get("master-link-status") == "ok" for r in replicas):
                    return False
            return True

        self.wait_until(ready, "replica in sync known to every sentinel")

    def wait_failover(self) -> None:
        self.wait_until(lambda: self.master_port() == self.replica_port, "failover to the replica", 60)


@contextmanager
def sentinel_deployment(workdir: Path) -> Iterator[SentinelDeployment]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed here")
    workdir.mkdir(parents=True, exist_ok=True)
    primary, replica = free_port(), free_port()
    sentinels = tuple(free_port() for _ in range(3))
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["primary"] = _redis_server(_data_node_args(primary, workdir), workdir, "primary", primary)
        procs["replica"] = _redis_server(
            [*_data_node_args(replica, workdir), "--replicaof", "127.0.0.1", str(primary)],
            workdir,
            "replica",
            replica,
        )
        for i, port in enumerate(sentinels):
            conf = workdir / f"sentinel-{i}.conf"  # Sentinel rewrites its config: one file each
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
                f"sentinel monitor {SentinelDeployment.MASTER} 127.0.0.1 {primary} 2\n"
                f"sentinel down-after-milliseconds {SentinelDeployment.MASTER} 1000\n"
                f"sentinel failover-timeout {SentinelDeployment.MASTER} 5000\n"
                f"sentinel parallel-syncs {SentinelDeployment.MASTER} 1\n"
            )
            procs[f"sentinel-{i}"] = _redis_server([str(conf), "--sentinel"], workdir, f"sentinel-{i}", port)
        deployment = SentinelDeployment(workdir, primary, replica, sentinels, procs)
        deployment.wait_monitored()
        yield deployment
    finally:
        for proc in procs.values():
            stop(proc)
