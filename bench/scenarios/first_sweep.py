"""First sweep: messages/s of a first ingest sweep over every agent of the corpus, against a
bare orjson parse of the same transcripts. Target: >= 0.5x.

The headline row runs the default configuration (`ingest.workers` = the cores). A curve of
worker counts (`--workers 1,2,4`, default 1,2; 1 is the serial sweep) adds a row per count, all
against the same baseline in the same run, and the serial fraction that Amdahl's law gives from
the 1- and 2-worker times, with the ratio it predicts for 16 cores."""

from __future__ import annotations

import os
import statistics

from bench.baselines import orjson_parse
from bench.runner import (
    WORKERS_ENV,
    Context,
    Row,
    at_least,
    entry_point_missing,
    info,
    not_available,
    run_async,
    timed,
)
from bench.scenarios._common import CONTEXT, INGEST, sweep_agents

NAME = "first_sweep"
PREDICT_CORES = 16


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST)


def worker_curve() -> list[int]:
    raw = os.environ.get(WORKERS_ENV, "1,2")
    return sorted({int(n) for n in raw.split(",") if n.strip()})


def run(ctx: Context) -> list[Row]:
    paths = ctx.corpus.transcripts()
    agents = list(ctx.corpus.manifest.agents)
    messages = ctx.corpus.manifest.messages
    figure = f"first sweep, {len(paths):,} sessions: messages/s"

    def baseline() -> float:
        return messages / timed(lambda: orjson_parse(paths))

    reason = missing()
    if reason:
        (base,) = ctx.interleaved(baseline)
        return [
            info(NAME, "baseline: orjson parse of the same transcripts", "msg/s", base),
            not_available(NAME, figure, reason),
        ]
    from memoryd.ingest.parallel import worker_count

    default = worker_count(0)
    counts = sorted({*worker_curve(), default})

    def product(workers: int) -> float:
        settings = ctx.settings(ctx.scratch("state"), ingest={**_NO_CAPS, "workers": workers})
        return messages / timed(lambda: run_async(sweep_agents, settings, agents))

    base, *curve = ctx.interleaved(baseline, *(lambda w=w: product(w) for w in counts))
    by_count = dict(zip(counts, curve, strict=True))
    rows = [
        at_least(
            NAME,
            figure,
            "msg/s",
            by_count[default],
            base,
            0.5,
            note=f"baseline: orjson parse + field extraction; ingest.workers = {default} (the cores)",
        )
    ]
    for w in counts:
        label = "serial" if w == 1 else f"{w} workers"
        rows.append(info(NAME, f"first sweep, {label}: messages/s", "msg/s", by_count[w], base))
    if 1 in by_count and 2 in by_count:
        rows.append(_amdahl(by_count[1], by_count[2], base))
    return rows


_NO_CAPS = {"max_messages_per_sweep": 10**9, "max_messages_per_file": 10**9}


def _amdahl(serial: list[float], two: list[float], base: list[float]) -> Row:
    """The serial fraction s from the 1- and 2-worker rates (speedup S2 = 1 / (s + (1 - s)/2)),
    and the ratio to the baseline it predicts on PREDICT_CORES cores."""
    s1, s2, b = statistics.median(serial), statistics.median(two), statistics.median(base)
    speedup = s2 / s1
    fraction = min(1.0, max(0.0, 2 / speedup - 1))
    predicted = s1 / b / (fraction + (1 - fraction) / PREDICT_CORES)
    return Row(
        NAME,
        f"serial fraction (Amdahl, 1 and 2 workers); predicted ratio on {PREDICT_CORES} cores",
        round(fraction, 3),
        None,
        round(predicted, 3),
        "(reported)",
        None,
        "",
        note=f"2 workers {speedup:.2f}x the serial sweep; the ratio column is the {PREDICT_CORES}-core prediction",
    )
