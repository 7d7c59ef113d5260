"""Forget job round trip through Redis (enqueue → report), for an empty selection and for one
real session, against a no-op arq job round trip on the same Redis in the same run, plus the
same forget run in-process. Target: job <= no-op + in-process.

As a real caller would: memoryd's own worker (memoryd.runtime.worker) runs in a process of its own
(bench.arq_worker) and this process enqueues with `memoryd.runtime.client.MemorydClient` and waits for
the report with its polls. The no-op job returns as many bytes as the forget report, so storing,
reading and decoding the result count on both sides. Both forgets are previews (dry runs), so
every repetition does the same work; the empty selection names a participant nobody has
(an explicit unknown session id would still be a selected session).
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import datetime
from typing import Any

import orjson

from bench import arq_worker
from bench.runner import Context, Row, at_most, entry_point_missing, info, not_available, run_async
from bench.scenarios._common import CONTEXT, FORGET_OP, INGEST, RUN_FORGET, entry, sweep_agents

NAME = "forget_job"
AGENT = "main"
# Round trips per repetition (the median of them is the repetition's figure): a round trip of
# the no-op is ~10 ms, so a few trips would leave a single scheduling hiccup in the median.
PARTS = ("pickup", "run", "seen")  # enqueue → worker starts it → it finishes → the client sees it
TRIPS_PER_REP = {"tiny": 6, "small": 12, "medium": 15, "large": 15}


def missing() -> str | None:
    return entry_point_missing(
        CONTEXT,
        INGEST,
        RUN_FORGET,
        FORGET_OP,
        "memoryd.runtime.worker:worker_kwargs",
        "memoryd.runtime.client:MemorydClient",
    )


async def _forget_inproc(settings: Any, payload: dict[str, Any]) -> tuple[float, int]:
    """One in-process forget preview: (seconds, bytes of its JSON report)."""
    from memoryd.agent_runtime import agent_runtime

    request = entry(FORGET_OP).contract.parse(payload)
    t0 = time.perf_counter()
    async with agent_runtime(settings, AGENT, readonly=True, redis=False) as rt:
        report = await entry(RUN_FORGET)(rt, request)
    elapsed = time.perf_counter() - t0
    return elapsed, len(orjson.dumps(report.to_json()))


async def _round_trips(
    settings: Any,
    queue: str,
    payloads: dict[str, dict[str, Any]],
    result_bytes: int,
    trips: int,
    reps: int,
    warmup: int,
) -> dict[str, list[float]]:
    """Per repetition, the median of `trips` rounds of: no-op job, then per payload its job and
    its in-process run. Returns {"noop": [...], "<name>:job": [...], "<name>:local": [...]}."""
    from memoryd.runtime.client import MemorydClient

    forget_op = entry(FORGET_OP)

    async with MemorydClient.connect(settings) as client:

        async def trip(function: str, payload: dict[str, Any], parts: str | None = None) -> float:
            t0 = time.perf_counter()
            if function == forget_op.contract.name:  # validated exactly as the client's submit does
                payload = forget_op.contract.payload(forget_op.contract.parse(payload))
            job = await client.enqueue(function, payload, queue=queue, request_id=uuid.uuid4().hex)
            report = await client.wait(job.job_id, timeout_s=120)
            elapsed = time.perf_counter() - t0
            seen_ms = time.time() * 1000
            if report.state != "complete":
                raise RuntimeError(f"{function} job {report.state}: {report.error}")
            if parts:  # where the round trip went, from arq's own timestamps (ms resolution)
                enq, start, end = (
                    _ms(v) for v in (report.enqueued_at, report.started_at, report.finished_at)
                )
                round_[f"{parts}:pickup"].append((start - enq) / 1000)
                round_[f"{parts}:run"].append((end - start) / 1000)
                round_[f"{parts}:seen"].append((seen_ms - end) / 1000)
            return elapsed

        round_: dict[str, list[float]] = {}
        out: dict[str, list[float]] = {"noop": [], **{f"noop:{part}": [] for part in PARTS}}
        for name in payloads:
            out.update({f"{name}:{part}": [] for part in ("job", "local", *PARTS)})
        for rep in range(warmup + reps):
            round_.clear()
            round_.update({key: [] for key in out})
            for _ in range(trips):
                round_["noop"].append(await trip(arq_worker.NOOP, {"result_bytes": result_bytes}, "noop"))
                for name, payload in payloads.items():
                    round_[f"{name}:job"].append(await trip(forget_op.contract.name, payload, name))
                    round_[f"{name}:local"].append((await _forget_inproc(settings, payload))[0])
            if rep >= warmup:
                for key, values in round_.items():
                    out[key].append(statistics.median(values))
    return out


def _ms(iso: str | None) -> float:
    assert iso is not None
    return datetime.fromisoformat(iso).timestamp() * 1000


def run(ctx: Context) -> list[Row]:
    from memoryd.settings import load_settings

    state = ctx.scratch("state")
    data = ctx.settings_data(state)
    data["daemon"]["keep_result_s"] = 120  # hundreds of results per run: let Redis drop them soon
    settings = load_settings(None, **data)
    trips = TRIPS_PER_REP[ctx.scale]
    queue = f"memoryd:bench:{uuid.uuid4().hex[:8]}"
    reason = missing()
    payloads: dict[str, dict[str, Any]] = {}
    result_bytes = 0
    if not reason:
        run_async(sweep_agents, settings, [AGENT])
        target = ctx.corpus.manifest.targets[AGENT]
        payloads = {
            "empty": {"agent": AGENT, "participants": [f"nobody-{ctx.unique}"], "dry_run": True},
            "session": {"agent": AGENT, "sessions": [target], "dry_run": True},
        }
        _, result_bytes = run_async(_forget_inproc, settings, payloads["session"])
    worker = arq_worker.start(data, queue)
    try:
        got = run_async(_round_trips, settings, queue, payloads, result_bytes, trips, ctx.reps, ctx.warmup)
    finally:
        arq_worker.stop(worker)

    noop_figure = f"no-op arq job round trip ({result_bytes:,} B result)"
    if reason:
        return [
            info(NAME, noop_figure, "s", got["noop"]),
            not_available(NAME, "forget job round trip (preview)", reason),
        ]
    rows: list[Row] = []
    for name, figure in (
        ("empty", "forget job round trip, empty selection (preview)"),
        ("session", "forget job round trip, one 100-message session (preview)"),
    ):
        job, local = got[f"{name}:job"], got[f"{name}:local"]
        baseline = [a + b for a, b in zip(got["noop"], local, strict=True)]
        rows += [
            at_most(
                NAME,
                figure,
                "s",
                job,
                baseline,
                1.0,
                note=f"{name}: baseline = no-op round trip + the same forget in-process; {_split(got, name)}",
            ),
            info(NAME, "  the same forget in-process", "s", local),
        ]
    rows.append(
        info(
            NAME,
            f"  {noop_figure}",
            "s",
            got["noop"],
            note=f"no-op: {_split(got, 'noop')}; median of {trips} round trips per rep, worker in its own "
            "process (poll 10 ms), client woken by a push on completion, polling every 10 ms as a fallback",
        )
    )
    return rows


def _split(got: dict[str, list[float]], name: str) -> str:
    """Where the round trip goes (medians): queued until the worker starts it, running, and
    finished until the client's poll sees the result."""
    pickup, run_, seen = (statistics.median(got[f"{name}:{part}"]) * 1000 for part in PARTS)
    return f"queued {pickup:.1f} ms, in the worker {run_:.1f} ms, result seen {seen:.1f} ms after it finished"
