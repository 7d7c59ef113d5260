"""Erase of a user whose data has 1,000 provenance children (objects of other subjects that
cite the user's scope): time and rows/s of the erasure, reported beside a bare indexed UPDATE
that rewrites the same number of rows' provenance in one statement. No verdict: the erasure
also cascades, writes a receipt and (in the default form) verifies the store byte by byte."""

from __future__ import annotations

from typing import Any

from bench.baselines import build_provenance_table, indexed_update
from bench.runner import Context, Row, entry_point_missing, info, not_available, run_async, timed
from bench.scenarios._common import RUN_ERASE, entry

NAME = "erase"
CHILDREN = 1_000
OTHERS = {"tiny": 500, "small": 5_000, "medium": 20_000, "large": 50_000}
TENANT = "tenant:bench"
SUBJECT = f"{TENANT}:user:u-erased"


def missing() -> str | None:
    return entry_point_missing(
        RUN_ERASE,
        "memoryd.retention.api:write_objects",
        "memoryd.retention.request:EraseRequest",
        "memoryd.redis_conn:connect_redis",
    )


async def _populate(settings: Any, others: int) -> None:
    from memoryd.redis_conn import connect_redis
    from memoryd.retention.api import ObjectWrite

    write_objects = entry("memoryd.retention.api:write_objects")
    redis = await connect_redis(settings)
    try:
        items = [
            ObjectWrite(f"{SUBJECT}:session:s-0", "The erased subject's own note about the orchard budget.")
        ]
        items += [
            ObjectWrite(
                f"{TENANT}:user:u-{i % 50}:session:c-{i}",
                f"Derived note {i} citing a colleague.",
                provenance_parent=f"{SUBJECT}:session:s-0",
            )
            for i in range(CHILDREN)
        ]
        items += [
            ObjectWrite(f"{TENANT}:user:u-{i % 50}:session:o-{i}", f"Unrelated note {i}.")
            for i in range(others)
        ]
        for start in range(0, len(items), 5_000):
            await write_objects(settings, redis, items[start : start + 5_000])
    finally:
        await redis.aclose()


async def _erase(settings: Any, verify: bool) -> Any:
    from memoryd.redis_conn import connect_redis

    request = entry("memoryd.retention.request:EraseRequest")(scope=SUBJECT)
    redis = await connect_redis(settings)
    try:
        return await entry(RUN_ERASE)(settings, redis, request, verify=verify)
    finally:
        await redis.aclose()


def run(ctx: Context) -> list[Row]:
    conn = build_provenance_table(ctx.workdir / "bare.sqlite", SUBJECT, CHILDREN, OTHERS[ctx.scale])

    def bare() -> float:
        return timed(lambda: indexed_update(conn, SUBJECT))

    figure = f"erase of a user with {CHILDREN:,} provenance children"
    reason = missing()
    if reason:
        (base,) = ctx.interleaved(bare)
        return [
            info(NAME, f"baseline: indexed UPDATE of {CHILDREN:,} provenance rows", "s", base),
            not_available(NAME, figure, reason),
        ]

    empty_sessions = ctx.scratch("no-sessions")
    receipts: list[Any] = []

    def product(verify: bool) -> float:
        settings = ctx.settings(ctx.scratch("state"), sessions_root=empty_sessions)
        run_async(_populate, settings, OTHERS[ctx.scale])
        seconds = timed(lambda: receipts.append(run_async(_erase, settings, verify)))
        return seconds

    plain, verified, base = ctx.interleaved(lambda: product(False), lambda: product(True), bare)
    rewritten = getattr(receipts[-1], "provenance_rewritten", None)
    note = f"receipt: provenance_rewritten={rewritten}; baseline: one indexed UPDATE of the same row count"
    return [
        info(NAME, figure + ": time", "s", plain, base, note=note),
        info(NAME, figure + ": rows/s", "row/s", [CHILDREN / s for s in plain], [CHILDREN / b for b in base]),
        info(NAME, figure + ", with verification: time", "s", verified, base),
        info(NAME, f"baseline: indexed UPDATE of {CHILDREN:,} provenance rows", "s", base),
    ]
