"""Run `memoryd run` as a real subprocess for tests: a config file, a notify socket the test
owns (as systemd would), and clean-up of the Redis keys the daemon published."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis as sync_redis

from memoryd.agent_runtime import agent_runtime
from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY, HOST_KEY, REQUEST_KEY, WORKERS_KEY
from memoryd.failpoints import TRACE_ENV_VAR
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.wire import queue_name
from memoryd.settings import Settings, load_settings
from memoryd.store.tombstones import is_forgotten
from tests.polling import until

REPO = Path(__file__).resolve().parent.parent


class NotifySocket:
    """A datagram socket standing in for systemd's $NOTIFY_SOCKET; collects what the daemon says."""

    def __init__(self, path: Path, abstract: bool = False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"memoryd-test-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind(b"\0" + name.encode())
            self.address = "@" + name
        else:
            self.sock.bind(str(path))
            self.address = str(path)
        self.messages: list[str] = []

    def wait_for(self, needle: str, timeout_s: float = 20.0) -> str:
        """The first message (seen or new) containing `needle`; AssertionError on timeout."""
        for msg in self.messages:
            if needle in msg:
                return msg
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536).decode()
            except TimeoutError:
                break
            self.messages.append(data)
            if needle in data:
                return data
        raise AssertionError(f"no notify message with {needle!r} within {timeout_s}s; got {self.messages}")

    def close(self) -> None:
        self.sock.close()


def write_config(
    path: Path,
    *,
    state_dir: Path,
    sessions_root: Path,
    redis_url: str,
    host_id: str,
    extra: str = "",
    grace_s: float = 5.0,
    lock_wait_s: float = 30.0,
    schedule: bool = False,
    max_jobs: int = 4,
) -> Path:
    path.write_text(
        f'state_dir = "{state_dir}"\nsessions_root = "{sessions_root}"\nredis_url = "{redis_url}"\n\n'
        f'[daemon]\nhost_id = "{host_id}"\nmetrics_listen = "127.0.0.1:0"\n'
        f"schedule = {str(schedule).lower()}\n"
        f"poll_delay_s = 0.01\nshutdown_grace_s = {grace_s}\nmax_jobs = {max_jobs}\n\n"
        f"[lock]\nwait_s = {lock_wait_s}\n\n{extra}\n"
    )
    return path


class FailpointTrace:
    """The failpoint trace file of daemon subprocesses (daemon/failpoints.py): which process
    reached which step, so a test can wait for a step instead of sleeping."""

    def __init__(self, path: Path):
        self.path = path

    @property
    def env(self) -> dict[str, str]:
        return {TRACE_ENV_VAR: str(self.path)}

    def pids_at(self, step: str) -> set[int]:
        text = self.path.read_text() if self.path.exists() else ""
        return {int(pid) for name, pid in (line.split() for line in text.splitlines()) if name == step}

    async def wait_for(self, step: str, pids: set[int], timeout_s: float = 20.0) -> None:
        """Until every process in `pids` has reached `step`; AssertionError on timeout."""
        await until(
            lambda: pids <= self.pids_at(step), f"processes {sorted(pids)} reaching {step}", timeout_s
        )


class DaemonProcess:
    def __init__(
        self,
        config: Path,
        notify: NotifySocket | None,
        log_path: Path,
        env: dict[str, str] | None = None,
        run_args: tuple[str, ...] = (),
    ):
        self.config = config
        self.notify = notify
        self.log_path = log_path
        self.env = env or {}
        self.run_args = run_args  # options of `memoryd run`
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DaemonProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO), **self.env}
        env.pop("NOTIFY_SOCKET", None)
        if self.notify is not None:
            env["NOTIFY_SOCKET"] = self.notify.address
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd.cli", "--config", str(self.config), "run", *self.run_args],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout_s)

    def wait(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout_s)
        self._log.close()
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_daemon(
    tmp_path: Path,
    sessions_root: Path,
    redis_url: str,
    host_id: str,
    *,
    env: dict[str, str] | None = None,
    **config: Any,
) -> tuple[Settings, NotifySocket, DaemonProcess]:
    """A daemon over `sessions_root`, started: its config (write_config's keywords), state,
    notify socket and log in `tmp_path`."""
    path = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host_id,
        **config,
    )
    notify = NotifySocket(tmp_path / "notify.sock")
    return load_settings(path), notify, DaemonProcess(path, notify, tmp_path / "daemon.log", env=env).start()


def stop_cleanly(daemon: DaemonProcess) -> None:
    """SIGTERM: the daemon exits 0 and its log holds no traceback."""
    assert daemon.stop() == 0, daemon.log()
    assert "Traceback" not in daemon.log(), daemon.log()


def cleanup_redis(redis_url: str, host_ids: list[str], agents: list[str], job_ids: list[str] = ()) -> None:  # type: ignore[assignment]
    """Remove what the daemons published; never FLUSHDB (the server is shared)."""
    r = sync_redis.Redis.from_url(redis_url)
    try:
        if agents:
            r.hdel(AGENT_OWNER_KEY, *agents)
        for host in host_ids:
            queue = queue_name(host)
            r.delete(
                HOST_KEY.format(host=host), queue, queue + ":health-check", WORKERS_KEY.format(queue=queue)
            )
            r.hdel(HEARTBEATS_KEY, host)
        for job_id in job_ids:
            r.delete(
                f"arq:job:{job_id}",
                f"arq:result:{job_id}",
                f"arq:retry:{job_id}",
                f"arq:in-progress:{job_id}",
                REQUEST_KEY.format(job_id=job_id),
            )
    finally:
        r.close()


def host_record(redis_url: str, host_id: str) -> dict[str, Any]:
    r = sync_redis.Redis.from_url(redis_url)
    try:
        return {k.decode(): v.decode() for k, v in r.hgetall(HOST_KEY.format(host=host_id)).items()}
    finally:
        r.close()


def start_cli(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`memoryd --config CONFIG ARGS…` started in the background, output piped (`env` added)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cli(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`memoryd --config CONFIG ARGS…` as a subprocess of its own, output captured."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def wait_state(client: MemorydClient, job_id: str, state: str, timeout_s: float = 20.0) -> None:
    async def reached() -> bool:
        return (await client.job(job_id)).state == state

    await until(reached, f"job {job_id} reaching {state}", timeout_s, every_s=0.02)


async def forgotten(settings: Settings, agent: str, sid: str) -> bool:
    """Does the agent's store (read as the daemon left it) hold a forgotten record of `sid`?"""
    async with agent_runtime(settings, agent, readonly=True, redis=False) as rt:
        store = rt.require_store()
        secret = rt.secret()
        return await store.read(lambda conn: is_forgotten(conn, sid, secret))
