"""A live-ingestion world for tests: two sessions of one agent, a config with the watcher's
defaults, and a real daemon process over it (tests/test_live_ingest.py, the worker tests)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import httpx
import orjson
import redis as sync_redis

from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder, exchange
from tests.daemon_harness import DaemonProcess, NotifySocket, cleanup_redis, host_record, write_config
from tests.ingest_harness import corpus_text

LIVE_CONFIG = (
    "[ingest]\ninterval_s = 300\n{caps}\n"
    "[index]\ninterval_s = 300\n{sources}\n"
    "[dreaming]\nenabled = false\n\n"
    '[memory_policy.exclude_sessions]\nchannels = ["signal"]\n'
)


class World:
    def __init__(self, tmp: Path, redis_url: str, unique: str, sources: str, caps: str = ""):
        self.tmp = tmp
        self.redis_url = redis_url
        self.agent = f"a{unique}"
        self.host = f"h{unique}"
        self.ghost = f"g{unique}"  # configured, but without a sessions directory to watch
        self.builder = SessionStoreBuilder(tmp / "sessions", self.agent)
        self.builder.add(f"agent:{self.agent}:main", "s-one", exchange("orchard"), chatType="direct")
        self.builder.add(f"agent:{self.agent}:work", "s-two", exchange("harbour"), chatType="direct")
        self.config = write_config(
            tmp / "memoryd.toml",
            state_dir=tmp / "state",
            sessions_root=tmp / "sessions",
            redis_url=redis_url,
            host_id=self.host,
            schedule=True,
            extra=LIVE_CONFIG.format(sources=sources, caps=caps) + f"\n[agents.{self.ghost}]\n",
        )
        self.settings = load_settings(self.config)
        self.daemon: DaemonProcess | None = None
        self.notify: NotifySocket | None = None
        self.next_index = {"s-one": 2, "s-two": 2}

    def start(self, *run_args: str) -> DaemonProcess:
        self.notify = NotifySocket(self.tmp / "n.sock")
        self.daemon = DaemonProcess(
            self.config, self.notify, self.tmp / "daemon.log", run_args=run_args
        ).start()
        self.notify.wait_for("READY=1", timeout_s=30)
        return self.daemon

    def corpus(self) -> str:
        return corpus_text(self.settings, self.agent)

    def append(self, sid: str, text: str) -> None:
        i = self.next_index[sid]
        self.builder.append(sid, [Msg("user", text)], i)
        self.next_index[sid] = i + 1

    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{host_record(self.redis_url, self.host)['metrics_port']}/metrics"

    def metric(self, pattern: str) -> float:
        """The sum of the daemon's samples whose name and labels match `pattern`."""
        body = httpx.get(self.metrics_url(), timeout=5).text
        return sum(float(m.group(1)) for m in re.finditer(pattern + r"\S* ([0-9.e+]+)$", body, re.M))

    def queue_idle(self) -> bool:
        r = sync_redis.Redis.from_url(self.redis_url)
        try:
            return int(r.zcard(queue_name(self.host))) == 0
        finally:
            r.close()

    def sweeps_done(self) -> float:
        return self.metric(r'memoryd_jobs_total\{family="ingest_sweep",outcome="complete"\}')

    def live_results(self, family: str = "ingest_sweep") -> list[dict]:
        """The stored reports of the live jobs of `family`, oldest first."""
        r = sync_redis.Redis.from_url(self.redis_url)
        try:
            records = [
                orjson.loads(r.get(k) or b"{}")
                for k in r.scan_iter(match=f"arq:result:{family}:{self.agent}:live:*")
            ]
        finally:
            r.close()
        return [
            rec["r"]
            for rec in sorted(records, key=lambda rec: rec.get("ft", 0))
            if isinstance(rec.get("r"), dict)
        ]

    def live_sweeps_enqueued(self) -> float:
        return self.metric(r'memoryd_live_jobs_total\{family="ingest_sweep"')

    async def quiet(self, what: str, hold_s: float = 1.0, timeout_s: float = 20.0) -> None:
        """Return once the queue is empty and no live sweep was enqueued for `hold_s`: an empty
        queue alone may hide a running sweep whose follow-up is enqueued when it ends."""
        deadline = time.monotonic() + timeout_s
        count, since = self.live_sweeps_enqueued(), time.monotonic()
        while True:
            now_count = self.live_sweeps_enqueued()
            if now_count != count or not self.queue_idle():
                count, since = now_count, time.monotonic()
            elif time.monotonic() - since >= hold_s:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not quiet within {timeout_s}s")
            await anyio.sleep(0.05)

    def cleanup(self) -> None:
        if self.daemon is not None:
            self.daemon.kill()
            # Captured: pytest shows it with a failing test's report, and drops it otherwise.
            print(f"--- daemon log ---\n{self.daemon.log()}")
        r = sync_redis.Redis.from_url(self.redis_url)
        try:
            ids = {
                key.decode().split(":", 2)[2]
                for pattern in (f"arq:*:*:{self.agent}:*", f"arq:*:*:{self.host}:*")
                for key in r.scan_iter(match=pattern)
            }
        finally:
            r.close()
        cleanup_redis(self.redis_url, [self.host], [self.agent, self.ghost], sorted(ids))
