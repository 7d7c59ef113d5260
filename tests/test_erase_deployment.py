"""An erasure covers the deployment (DESIGN §5): `memoryd enqueue erase` without `--queue`
reaches every host that serves an agent on the Redis; its receipt is `complete` only when every
host has erased, names no host and counts the hosts; a host that is down makes it `partial`
(exit 1) and the erasure waits for it, durably, until it is back and runs it; the receipt then
updates. Two real daemons, each with its own state and sessions, on a private redis-server."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import DaemonProcess, NotifySocket, run_cli, write_config
from tools.chaos import PrivateRedis

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

NADIA = "tenant:default:user:nadia"
OLGA = "tenant:default:user:olga"
WORDS = {"nadia": ("kayakzq", "lockerzq"), "olga": ("greenhousezq",)}


def _leaks(root: Path, words: tuple[str, ...]) -> list[str]:
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            data = (Path(dirpath) / name).read_bytes()
            found += [f"{name}: {w}" for w in words if w.encode() in data]
    return found


class Host:
    def __init__(self, tmp: Path, name: str, agent: str, redis_url: str):
        self.tmp = tmp / name
        self.name = name
        self.agent = agent
        b = SessionStoreBuilder(self.tmp / "sessions", agent)
        b.add(
            f"agent:{agent}:dm:nadia",
            f"s-{name}-nadia",
            [
                Msg("user", f"Remember that my kayakzq at {name} is blue."),
                Msg("assistant", "Noted, the lockerzq too."),
            ],
            participants=[{"actorId": "nadia"}],
        )
        b.add(
            f"agent:{agent}:dm:olga",
            f"s-{name}-olga",
            [Msg("user", f"Remember that the greenhousezq at {name} needs water.")],
            participants=[{"actorId": "olga"}],
        )
        self.config = write_config(
            self.tmp / "memoryd.toml",
            state_dir=self.tmp / "state",
            sessions_root=self.tmp / "sessions",
            redis_url=redis_url,
            host_id=name,
            schedule=True,
        )
        self.daemon: DaemonProcess | None = None
        self.notify: NotifySocket | None = None

    def start(self) -> None:
        self.starts = getattr(self, "starts", 0) + 1
        self.notify = NotifySocket(self.tmp / f"n{self.starts}.sock")
        self.daemon = DaemonProcess(self.config, self.notify, self.tmp / "daemon.log").start()
        self.notify.wait_for("READY=1", timeout_s=30)

    def stop(self) -> None:
        assert self.daemon is not None and self.notify is not None
        assert self.daemon.stop() == 0
        self.notify.close()

    def ingest(self) -> None:
        done = run_cli(self.config, "ingest", "--agent", self.agent)
        assert done.returncode == 0, done.stderr

    def leaks(self, who: str) -> list[str]:
        return _leaks(self.tmp / "state", WORDS[who])


def test_an_erasure_reaches_every_host_and_waits_for_a_stopped_one(tmp_path) -> None:
    server = PrivateRedis(tmp_path / "redis").start()
    hosts = [
        Host(tmp_path, "aardvarkhost", "alpha", server.url),
        Host(tmp_path, "bisonhost", "beta", server.url),
    ]
    try:
        for h in hosts:
            h.ingest()
            h.start()
        assert all(h.leaks("nadia") and h.leaks("olga") for h in hosts)

        done = run_cli(hosts[0].config, "enqueue", "erase", "--scope", NADIA, "--wait", "--json", timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        receipt = json.loads(done.stdout)
        assert (receipt["state"], receipt["hosts"], receipt["hostsDone"], receipt["verified"]) == (
            "complete",
            2,
            2,
            True,
        )
        assert (
            "aardvarkhost" not in done.stdout and "bisonhost" not in done.stdout
        )  # counts, never host names
        assert [h.leaks("nadia") for h in hosts] == [[], []]

        hosts[1].stop()  # olga's erasure: one host is down
        sent = run_cli(
            hosts[0].config, "enqueue", "erase", "--scope", OLGA, "--wait", "--timeout", "60", "--json"
        )
        assert sent.returncode == 1, sent.stdout + sent.stderr
        partial = json.loads(sent.stdout)
        assert (partial["state"], partial["hostsDone"], partial["hostsPending"]) == ("partial", 1, 1)
        assert hosts[0].leaks("olga") == [] and hosts[1].leaks("olga")

        hosts[1].start()  # back: it finds the erasure waiting and runs it
        later = run_cli(
            hosts[0].config,
            "erasure",
            partial["erasureId"],
            "--wait",
            "--timeout",
            "120",
            "--json",
            timeout=180,
        )
        assert later.returncode == 0, later.stdout + later.stderr
        assert json.loads(later.stdout)["state"] == "complete"
        assert hosts[1].leaks("olga") == []
    finally:
        for h in hosts:
            if h.daemon is not None:
                h.daemon.kill()
        server.stop()


def test_the_direct_erase_says_it_reaches_this_host_only(tmp_path) -> None:
    server = PrivateRedis(tmp_path / "redis").start()
    try:
        host = Host(tmp_path, "hc", "gamma", server.url)
        host.ingest()
        done = run_cli(host.config, "erase", "--scope", NADIA)
        assert done.returncode == 0, done.stderr
        assert "This host only" in done.stdout
    finally:
        server.stop()


def test_a_deployment_receipt_that_waited_for_a_queued_purge_is_verified_once_it_has_run(tmp_path) -> None:
    """A forget of nadia's session is queued (its record stays: no purge deletes another), so the
    host's erasure waits for it; `memoryd erasure ID` reads the hosts' job results and applies the
    settle rule itself: not verified while the forget is queued, verified once it has run."""
    import redis as redis_sync

    server = PrivateRedis(tmp_path / "redis").start()
    host = Host(tmp_path, "hw", "delta", server.url)
    queued = redis_sync.Redis.from_url(server.url)
    try:
        host.ingest()
        host.start()
        key = "arq:job:queued-forget-of-nadia"
        record = {
            "t": 1,
            "f": "forget",
            "a": [{"agent": "delta", "sessions": ["s-hw-nadia"]}],
            "k": {},
            "et": 1,
        }
        queued.set(key, json.dumps(record))  # a record only: no queue entry, so it stays queued
        sent = run_cli(host.config, "enqueue", "erase", "--scope", NADIA, "--wait", "--json", timeout=180)
        waiting = json.loads(sent.stdout)
        assert (waiting["state"], waiting["verified"]) == ("complete", False), sent.stdout + sent.stderr
        assert waiting["receipts"][0]["verification"]["waitingFor"] == ["queued-forget-of-nadia"]

        still = run_cli(host.config, "erasure", waiting["erasureId"], "--json")
        assert json.loads(still.stdout)["verified"] is False

        queued.delete(key)  # it ran: arq deletes the record, and its result keeps no argument
        later = run_cli(host.config, "erasure", waiting["erasureId"], "--json")
        assert later.returncode == 0, later.stdout + later.stderr
        settled = json.loads(later.stdout)
        assert (settled["state"], settled["verified"]) == ("complete", True)
        assert settled["receipts"][0]["verification"]["waitingFor"] == []
    finally:
        queued.close()
        if host.daemon is not None:
            host.daemon.kill()
        server.stop()
