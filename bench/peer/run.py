"""`python -m bench --peer`: build the peer agent at each size, check that both sides see the
same sessions, then measure every shared operation, interleaved, each repetition on its own
copy of the state where the operation writes."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import corpus
from bench.peer import generator, memoryd_side
from bench.peer.generator import (
    AGENT,
    BASE_MS,
    DAY_MS,
    OWNER,
    PlannedView,
    SessionPlan,
    expected,
    plan_agent,
    writer_spec,
)
from bench.peer.install import OPENCLAW_VERSION, Peer, PeerUnavailable, ensure_peer
from bench.peer.openclaw import WRITER, OpenClawHome, create_home, require_offline_sandbox, write_sessions
from bench.peer.process import CommandFailed, Measured
from bench.peer.table import PeerRow, Samples, format_markdown, format_text

SEARCHES = ("deploy window Friday", "invoice due", "lighthouse rota")
BACKFILL_DAYS = (20, 29)  # the slice both sides backfill: days after the first session's day


AGENT_CACHE_DONE = "written.json"  # last into a cached agent: a partial copy is never reused


def agent_cache_dir(peer: Peer, n: int) -> Path:
    """Where the agent of `n` sessions is kept, named by what it is written from: the plan and
    the writer script (their source), OpenClaw's version."""
    digest = hashlib.sha256()
    for part in (Path(generator.__file__), WRITER, Path(corpus.__file__)):
        digest.update(part.read_bytes())
    digest.update(OPENCLAW_VERSION.encode())
    return peer.root / "agents" / f"{n}-{digest.hexdigest()[:16]}"


class PeerMismatch(Exception):
    """memoryd and OpenClaw do not see the same agent: timing them would compare nothing."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the two views of the agent -------------------------------------------------------------------


def view_mismatches(
    want: PlannedView,
    openclaw: dict[str, list[str]],
    memoryd: dict[str, list[str]],
    hooks: dict[str, set[str]],
) -> list[str]:
    """What differs between the plan, OpenClaw's `sessions --json` and memoryd's `sessions
    --json` (session id -> participant ids), and the gmail sessions each side selects. Pure."""
    problems: list[str] = []
    planned = set(want.sessions)
    for side, view in (("OpenClaw", openclaw), ("memoryd", memoryd)):
        if set(view) != planned:
            missing, extra = sorted(planned - set(view)), sorted(set(view) - planned)
            problems.append(
                f"{side} lists {len(view)} sessions, {len(planned)} were written "
                f"(missing {missing[:3]}, extra {extra[:3]})"
            )
    for sid in sorted(planned & set(openclaw) & set(memoryd)):
        if not (openclaw[sid] == memoryd[sid] == want.participants[sid]):
            problems.append(
                f"session {sid}: participants written {want.participants[sid]}, "
                f"OpenClaw {openclaw[sid]}, memoryd {memoryd[sid]}"
            )
            break
    for side, selected in hooks.items():
        if selected != want.gmail:
            problems.append(
                f"{side} selects {len(selected)} gmail hook sessions, {len(want.gmail)} were written"
            )
    return problems


def _openclaw_view(home: OpenClawHome) -> dict[str, list[str]]:
    data = json.loads(home.checked("sessions", "--json", "--agent", AGENT, "--limit", "all").stdout)
    return {
        s["sessionId"]: sorted(p["identity"]["id"] for p in s.get("participants") or [])
        for s in data["sessions"]
    }


def _memoryd_view(home: OpenClawHome) -> dict[str, list[str]]:
    data = json.loads(
        memoryd_side.run_checked(home, "sessions", "--agent", AGENT, "--limit", "all", "--json").stdout
    )
    return {s["sessionId"]: sorted(s["participants"]) for s in data["sessions"]}


def check_same_view(home: OpenClawHome, plans: list[SessionPlan]) -> None:
    hooks = {
        "OpenClaw": set(
            _ids(
                home.checked(
                    "memory", "forget", "--agent", AGENT, "--hook-source", "gmail", "--dry-run", "--json"
                )
            )
        ),
        "memoryd": set(
            _ids(
                memoryd_side.run_checked(
                    home, "forget", "--agent", AGENT, "--hook-source", "gmail", "--dry-run", "--json"
                )
            )
        ),
    }
    problems = view_mismatches(expected(plans), _openclaw_view(home), _memoryd_view(home), hooks)
    if problems:
        raise PeerMismatch("memoryd and OpenClaw do not read the same agent: " + "; ".join(problems))


def _ids(got: Measured) -> list[str]:
    return sorted(json.loads(got.stdout)["sessionIds"])


# -- the operations -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    openclaw: tuple[str, ...]
    memoryd: tuple[str, ...]
    writes: bool = False  # each repetition on a fresh copy of both states
    same_ids: bool = False  # both reports' sessionIds must be equal


def busiest_other(plans: list[SessionPlan]) -> str:
    counts: dict[str, int] = {}
    for p in plans:
        for _, actor in p.participants:
            if actor != OWNER[1]:
                counts[actor] = counts.get(actor, 0) + 1
    return max(sorted(counts), key=lambda a: counts[a])


def _day(offset: int) -> str:
    return datetime.fromtimestamp((BASE_MS + offset * DAY_MS) / 1000, UTC).strftime("%Y-%m-%d")


def operations(plans: list[SessionPlan]) -> list[Operation]:
    who = busiest_other(plans)
    agent = ("--agent", AGENT)
    days = ("--from", _day(BACKFILL_DAYS[0]), "--to", _day(BACKFILL_DAYS[1]))
    ops = [
        Operation(
            f"forget dry run, participant {who}",
            ("memory", "forget", *agent, "--participant", who, "--dry-run", "--json"),
            ("forget", *agent, "--participant", who, "--dry-run", "--json"),
            same_ids=True,
        ),
    ]
    ops += [
        Operation(f"search {q!r}", ("memory", "search", *agent, "--json", q), ("search", *agent, "--json", q))
        for q in SEARCHES
    ]
    ops += [
        Operation(
            "index --force, memory + sessions",
            ("memory", "index", *agent, "--force"),
            ("index", *agent, "--force"),
        ),
        Operation(
            f"forget apply, participant {who}",
            ("memory", "forget", *agent, "--participant", who, "--json"),
            ("forget", *agent, "--participant", who, "--json"),
            writes=True,
            same_ids=True,
        ),
        Operation(
            f"session backfill apply, {_day(BACKFILL_DAYS[0])}..{_day(BACKFILL_DAYS[1])}",
            ("memory", "session-backfill", *agent, "--apply", "--json", *days),
            ("backfill", *agent, "--apply", "--json", *days),
            writes=True,
        ),
    ]
    return ops


# -- building and measuring -----------------------------------------------------------------------


@dataclass
class Bench:
    work: Path
    redis_url: str
    host_id: str

    def copy(self, home: OpenClawHome, name: str) -> OpenClawHome:
        other = home.copy_to(self.work / name)
        memoryd_side.write_config(other, self.redis_url, self.host_id)
        return other

    def build(self, n: int) -> tuple[OpenClawHome, list[SessionPlan]]:
        peer = ensure_peer(log=log)
        plans = plan_agent(n)
        home = self.written_agent(peer, n, plans)
        memoryd_side.write_config(home, self.redis_url, self.host_id)
        memoryd_side.compile_bytecode()
        check_same_view(home, plans)
        log("  both sides list the same sessions, participants and gmail hook sessions; indexing once ...")
        home.checked("memory", "index", "--agent", AGENT, "--force")
        memoryd_side.run_checked(home, "index", "--agent", AGENT)
        return home, plans

    def written_agent(self, peer: Peer, n: int, plans: list[SessionPlan]) -> OpenClawHome:
        """The agent of `n` sessions as OpenClaw's writers leave it: from the cache when a run
        with the same plan, writer and OpenClaw version wrote it before (writing 1,500 sessions
        takes OpenClaw minutes), else written now and kept there."""
        cached = OpenClawHome(peer, agent_cache_dir(peer, n))
        done = cached.root / AGENT_CACHE_DONE
        if done.exists():
            require_offline_sandbox()
            written = json.loads(done.read_text())
            log(
                f"  {written['sessions']:,} sessions, {written['messages']:,} messages as written before ({cached.root})"
            )
            return cached.copy_to(self.work / f"agent-{n}")
        home = create_home(peer, self.work / f"agent-{n}")
        log(f"  writing {n:,} sessions with OpenClaw's writers ...")
        started = time.perf_counter()
        written = write_sessions(home, writer_spec(plans))
        log(
            f"  written: {written['sessions']:,} sessions, {written['messages']:,} messages in {time.perf_counter() - started:.0f} s"
        )
        home.copy_to(cached.root)
        (cached.root / AGENT_CACHE_DONE).write_text(json.dumps(written) + "\n")
        return home

    def one(self, op: Operation, home: OpenClawHome, side: str) -> Measured:
        target = self.copy(home, f"copy-{side}") if op.writes else home
        got = target.run(*op.openclaw) if side == "openclaw" else memoryd_side.run(target, *op.memoryd)
        if got.returncode not in (0,):
            tail = (got.stderr or got.stdout).strip().splitlines()[-2:]
            raise CommandFailed(f"{side} {op.contract.name}: exit {got.returncode}: {' | '.join(tail)}")
        return got

    def measure(self, n: int, reps: int) -> list[PeerRow]:
        home, plans = self.build(n)
        ops = operations(plans)
        samples: dict[tuple[str, str], list[Measured]] = {}
        for rep in range(reps):
            for op in ops:
                log(f"  [{rep + 1}/{reps}] {op.contract.name} ...")
                got = {side: self.one(op, home, side) for side in ("openclaw", "memoryd")}
                if op.same_ids and _ids(got["openclaw"]) != _ids(got["memoryd"]):
                    raise PeerMismatch(f"{op.contract.name}: the sides selected different sessionIds")
                for side, m in got.items():
                    samples.setdefault((op.contract.name, side), []).append(m)
        rows = []
        for op in ops:
            oc, md = samples[(op.contract.name, "openclaw")], samples[(op.contract.name, "memoryd")]
            note = f"{len(_ids(md[0]))} sessions selected" if op.same_ids else ""
            rows.append(PeerRow(op.contract.name, n, _samples(oc), _samples(md), note))
        return rows


def _samples(ms: list[Measured]) -> Samples:
    return Samples(tuple(m.wall_s for m in ms), tuple(m.rss_mib for m in ms))


def run_peer(sizes: list[int], reps: int, json_out: Path | None, redis_url: str) -> int:
    work = Path(tempfile.mkdtemp(prefix="memoryd-peer-"))
    rows: list[PeerRow] = []
    try:
        bench = Bench(work, redis_url, f"peer-bench-{work.name}")
        for n in sizes:
            log(f"peer agent of {n:,} sessions (OpenClaw {OPENCLAW_VERSION}) in {work}")
            rows += bench.measure(n, reps)
    except (PeerUnavailable, PeerMismatch, CommandFailed) as exc:
        print(f"peer bench stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(format_text(rows))
    print()
    print(format_markdown(rows))
    if json_out:
        json_out.write_text(json.dumps([r.as_json() for r in rows], indent=2) + "\n")
    return 0
