"""The registry: every operation. The CLI, the arq job functions, the client, the scheduler
and the docs generator read it; nothing else names a job family. Adding a family is adding
its module under daemon/ops/ and its line here.

The order is the scheduler's within a tick (dreaming before the index sync, so a tick's
promotion is indexed by the same tick's sync) and the docs'."""

from __future__ import annotations

from typing import Any

from memoryd.errors import UsageError
from memoryd.ops import backfill, dream, erase, expire, forget, index_sync, ingest_sweep, retention_sweep
from memoryd.ops.op import Op

OPS: tuple[Op[Any], ...] = (
    forget.OP,
    erase.OP,
    expire.OP,
    ingest_sweep.OP,
    dream.OP,
    index_sync.OP,
    backfill.OP,
    retention_sweep.OP,
)
_BY_NAME: dict[str, Op[Any]] = {op.contract.name: op for op in OPS}
if len(_BY_NAME) != len(OPS):
    raise RuntimeError("two operations share a name")


def op_named(name: str) -> Op[Any]:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UsageError(f"job: no operation named {name!r} (one of {', '.join(_BY_NAME)})") from None
