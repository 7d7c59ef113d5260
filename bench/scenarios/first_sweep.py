"""First sweep: messages/s of a first ingest sweep over every agent of the corpus, against a
bare orjson parse of the same transcripts. Target: >= 0.5x."""

from __future__ import annotations

from bench.baselines import orjson_parse
from bench.runner import Context, Row, at_least, entry_point_missing, info, not_available, run_async, timed
from bench.scenarios._common import CONTEXT, INGEST, sweep_agents

NAME = "first_sweep"


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST)


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

    def product() -> float:
        settings = ctx.settings(ctx.scratch("state"))
        return messages / timed(lambda: run_async(sweep_agents, settings, agents))

    prod, base = ctx.interleaved(product, baseline)
    return [
        at_least(NAME, figure, "msg/s", prod, base, 0.5, note="baseline: orjson parse + field extraction")
    ]
