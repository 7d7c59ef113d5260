"""Live ingestion latency: messages appended at random moments to random sessions of a store a
running daemon (`memoryd run`, a process of its own) serves; each message's time until it is in
the corpus (staged) and until `search` returns it. Targets (the issue's, absolute): staged
p95 <= 1 s, searchable p95 <= 2 s, with `index.sources = ["memory", "sessions"]` and otherwise
the default config (caps, intervals of 300 s: only the watcher can be this fast) but for
dreaming, which is off here (its first sweep at start is not what is measured) and on in
`live_latency_dreaming`, which holds every dream job at its grouping for the whole run.

The store is swept and indexed before the daemon starts (not measured), on a copy of the
corpus so that the appends never touch the shared one. Each message carries a word of its
own; every POLL_S a thread reads the corpus files' new bytes (a message is staged when its word
is there), and a loop searches each pending word (a message is searchable when `search` returns
it, timed when the search returns); the resolution is POLL_S plus, for search, one search."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from bench.runner import Context, Row, entry_point_missing, info, limit, not_available, run_async
from bench.scenarios._common import CONTEXT, INDEX, INGEST, SEARCH, entry, sweep_agents

NAME = "live_latency"
LIVE = "memoryd.runtime.live:LiveIngest"
MESSAGES = {"tiny": 8, "small": 30, "medium": 40, "large": 40}
GAP_S = (0.2, 1.5)  # random pause between two appends
POLL_S = 0.02
GIVE_UP_S = 30.0  # a message not searchable by then counts as this late
REPO = Path(__file__).resolve().parents[2]


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST, INDEX, SEARCH, LIVE)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _admitted_sessions(settings: Any, agents: list[str]) -> list[tuple[str, str, Path]]:
    """(agent, session id, transcript) of the sessions the default policy admits."""
    from memoryd.sessions.admission import AdmissionPolicy, admission_reason
    from memoryd.sessions.source import session_source_for

    policy = AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)
    out = []
    for agent in agents:
        source = session_source_for(settings, agent)
        for session in source.list_sessions().sessions:
            path = source.transcript_location(session)
            if path is not None and path.exists() and admission_reason(session, policy, ()) is None:
                out.append((agent, session.session_id, path))
    return out


async def _prepare(settings: Any, agents: list[str]) -> None:
    """The first sweep and index of the copy, uncapped and unmeasured."""
    from memoryd.agent_runtime import agent_runtime

    await sweep_agents(settings, agents)
    run_index_sync = entry(INDEX)
    for agent in agents:
        async with agent_runtime(settings, agent) as rt:
            await run_index_sync(rt)


def _write_config(path: Path, data: dict[str, Any], dreaming: bool) -> None:
    path.write_text(
        f'state_dir = "{data["state_dir"]}"\nsessions_root = "{data["sessions_root"]}"\n'
        f'redis_url = "{data["redis_url"]}"\n\n'
        f'[daemon]\nhost_id = "{data["daemon"]["host_id"]}"\nmetrics_listen = "127.0.0.1:0"\n\n'
        '[index]\nsources = ["memory", "sessions"]\n\n'
        # The first dream sweep of each agent is due at start and, at 10k sessions, runs for
        # minutes (docs/performance.md): measured only by the dreaming variant.
        f"[dreaming]\nenabled = {str(dreaming).lower()}\n"
    )


def _until_held(trace: Path, count: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (trace.read_text() if trace.exists() else "").count("dream.select ") < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} dream jobs reached their grouping")
        time.sleep(0.05)


def _drop_dreams(redis_url: str, log: Path) -> None:
    """The ids of the dreams this daemon scheduled (per agent and interval slot) would refuse
    the next run's dreams, which name the same agents: drop those jobs and results."""
    import redis

    ids = re.findall(r"scheduled (dream:\S+)", log.read_text(errors="replace"))
    client = redis.Redis.from_url(redis_url)
    try:
        for job_id in ids:
            client.delete(*(f"arq:{kind}:{job_id}" for kind in ("job", "result", "retry", "in-progress")))
    finally:
        client.close()


class _Daemon:
    def __init__(self, config: Path, log: Path, env_extra: dict[str, str]):
        env = {**os.environ, "PYTHONPATH": str(REPO), **env_extra}
        env.pop("NOTIFY_SOCKET", None)
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd.cli", "--config", str(config), "run"],
            cwd=REPO,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait_for(self, needle: str, count: int = 1, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.log.read_text(errors="replace").count(needle) < count:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daemon: no {needle!r} (log {self.log})")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


async def _idle(redis_url: str, queue: str, quiet_s: float = 1.0, timeout_s: float = 300.0) -> None:
    """Until the daemon's queue has been empty (nothing queued or running) for `quiet_s`."""
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if int(await client.zcard(queue)) == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= quiet_s:
                    return
            else:
                quiet_since = None
            await anyio.sleep(0.05)
        raise RuntimeError(f"queue {queue} never idle")
    finally:
        await client.aclose()


class _Corpus:
    """New bytes of an agent's corpus day files since the last look."""

    def __init__(self, settings: Any, agents: list[str]):
        self.dirs = [settings.workspace_for(a) / "memory" / ".dreams" / "session-corpus" for a in agents]
        self.offsets: dict[Path, int] = {}
        for path in self._files():
            self.offsets[path] = path.stat().st_size

    def _files(self) -> list[Path]:
        return [p for d in self.dirs if d.exists() for p in d.glob("*.txt")]

    def new_text(self) -> str:
        parts = []
        for path in self._files():
            start = self.offsets.get(path, 0)
            with path.open("rb") as fh:
                fh.seek(start)
                data = fh.read()
            self.offsets[path] = start + len(data)
            parts.append(data.decode(errors="replace"))
        return "".join(parts)


class _StagedWatch:
    """Every POLL_S, in a thread of its own, the words of `appended` now in the corpus go into
    `staged` with the time: the searches hold the event loop for a while at 10k sessions, and a
    message's staged time must not wait for them."""

    def __init__(self, corpus: _Corpus, appended: dict[str, Any], staged: dict[str, float]):
        self.corpus, self.appended, self.staged = corpus, appended, staged
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="staged-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        carry = ""  # a word cut in two by a read is found with the next one
        while not self._stop.is_set():
            text = carry + self.corpus.new_text()
            now = time.monotonic()  # every word in `text` was in the corpus by now
            for word in list(self.appended):
                if word not in self.staged and word in text:
                    self.staged[word] = now
            carry = text[-64:]
            self._stop.wait(POLL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _append(path: Path, sid: str, word: str, n: int) -> None:
    from memoryd.sessions.transcript_writer import Turn, encode_lines, message_line

    now = int(time.time() * 1000)
    text = f"{word} is the code word the ops team agreed on for the live ingestion check."
    line = message_line(f"live-{sid[:8]}-{n}", None, Turn("user", text, now, meta={"senderIsOwner": True}))
    with path.open("ab") as fh:
        fh.write(encode_lines([line]))


async def _measure(
    settings: Any, targets: list[tuple[str, str, Path]], n: int
) -> tuple[list[float], list[float]]:
    from memoryd.agent_runtime import agent_runtime

    run_search = entry(SEARCH)
    rng = random.Random(20261201)
    agents = sorted({a for a, _, _ in targets})
    corpus = _Corpus(settings, agents)
    appended: dict[str, tuple[str, float]] = {}  # word -> (agent, when)
    staged: dict[str, float] = {}
    found: dict[str, float] = {}

    async def appender() -> None:
        for i in range(n):
            await anyio.sleep(rng.uniform(*GAP_S))
            agent, sid, path = rng.choice(targets)
            word = f"livecheck{i:03d}x{rng.randrange(16**6):06x}"
            appended[word] = (agent, time.monotonic())
            _append(path, sid, word, i)

    async def poller(rts: dict[str, Any]) -> None:
        while len(found) < n:
            for agent, rt in rts.items():
                for word in [w for w, (a, _) in list(appended.items()) if a == agent and w not in found]:
                    # The word is unique to its message: any hit is that message's chunk (whose
                    # snippet may start before it).
                    if (await run_search(rt, word, 1)).results:
                        found[word] = time.monotonic()  # when `search` returned it
            if appended and all(time.monotonic() - t > GIVE_UP_S for _, t in list(appended.values())):
                break
            await anyio.sleep(POLL_S)

    rts: dict[str, Any] = {}
    managers = []
    for agent in agents:
        cm = agent_runtime(settings, agent, readonly=True, redis=False)
        rts[agent] = await cm.__aenter__()
        managers.append(cm)
    watcher = _StagedWatch(corpus, appended, staged)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(appender)
            await poller(rts)
            tg.cancel_scope.cancel()
    finally:
        watcher.stop()
        for cm in managers:
            await cm.__aexit__(None, None, None)
    staged_s = [staged.get(w, t + GIVE_UP_S) - t for w, (_, t) in appended.items()]
    found_s = [found.get(w, t + GIVE_UP_S) - t for w, (_, t) in appended.items()]
    return staged_s, found_s


def run(ctx: Context) -> list[Row]:
    return measure(ctx, NAME, dreaming=False)


def measure(ctx: Context, name: str, dreaming: bool) -> list[Row]:
    """With `dreaming`, every dream job is held at its grouping (a failpoint) from the start to
    the end of the run: the minutes-long first dream sweeps of a large history, at their worst."""
    from memoryd.failpoints import HOLD_ENV_VAR, RELEASE_ENV_VAR, TRACE_ENV_VAR

    reason = missing()
    staged_figure = "append -> staged (in the corpus): p95"
    found_figure = "append -> searchable (`search` returns it): p95"
    if reason:
        return [not_available(name, staged_figure, reason), not_available(name, found_figure, reason)]
    root = ctx.scratch("sessions")
    shutil.copytree(ctx.corpus.root / "agents", root / "agents")
    agents = list(ctx.corpus.manifest.agents)
    data = ctx.settings_data(ctx.scratch("state"), sessions_root=root)
    data["index"] = {"sources": ["memory", "sessions"]}
    settings = ctx.settings(Path(data["state_dir"]), sessions_root=root, index=data["index"])
    run_async(_prepare, settings, agents)
    targets = _admitted_sessions(settings, agents)
    config = ctx.workdir / "memoryd.toml"
    _write_config(config, data, dreaming)
    trace = ctx.workdir / "failpoints"
    env: dict[str, str] = {}
    if dreaming:  # the dreams are held until the release file is made, after the measurement
        env = {
            HOLD_ENV_VAR: "dream.select",
            RELEASE_ENV_VAR: str(ctx.workdir / "release"),
            TRACE_ENV_VAR: str(trace),
        }
    daemon = _Daemon(config, ctx.workdir / "daemon.log", env)
    held = 0
    try:
        daemon.wait_for("ready:")
        daemon.wait_for(": watching ", count=len(agents))
        from memoryd.runtime.wire import queue_name

        if dreaming:  # until the dreams that can start have started, and are held
            held = min(len(agents), max(1, settings.daemon.max_jobs - 1))
            _until_held(trace, held)
        else:
            run_async(_idle, settings.redis_url, queue_name(settings.daemon.host_id))
        n = MESSAGES[ctx.scale]
        staged_s, found_s = run_async(_measure, settings, targets, n)
    finally:
        if dreaming:  # the dreams end, so the daemon drains (and unpublishes) within the stop
            (ctx.workdir / "release").touch()
        daemon.stop()
        if dreaming:
            _drop_dreams(settings.redis_url, ctx.workdir / "daemon.log")
    note = f"{n} messages, {len(targets):,} admitted sessions; poll resolution {POLL_S * 1000:.0f} ms"
    if dreaming:
        note += f"; {held} dream jobs held throughout, max_jobs {settings.daemon.max_jobs}"
    return [
        limit(name, staged_figure, "s", [_p(staged_s, 0.95)], 1.0, note=note),
        info(name, "append -> staged: p50", "s", [_p(staged_s, 0.5)]),
        limit(name, found_figure, "s", [_p(found_s, 0.95)], 2.0),
        info(name, "append -> searchable: p50", "s", [_p(found_s, 0.5)]),
    ]
