"""Live ingestion latency with dreaming on: bench/scenarios/live_latency.py, with every dream
job of the daemon held at its grouping for the whole run (the first dream sweeps of a large
history run for minutes). Dream jobs take at most daemon.max_jobs - 1 worker slots, so the live
sweeps keep one; the targets are the same."""

from __future__ import annotations

from bench.runner import Context, Row
from bench.scenarios import live_latency

NAME = "live_latency_dreaming"
missing = live_latency.missing


def run(ctx: Context) -> list[Row]:
    return live_latency.measure(ctx, NAME, dreaming=True)
