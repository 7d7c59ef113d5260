"""`retention_sweep`: the scheduled form of `expire`, once per host per interval (retention
state is host-wide, in state_dir/retention.sqlite). Same payload, same report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.ops.expire import expiry_report, run_expiry, takes_retention_lease
from memoryd.ops.op import JobContract, JobPolicy, Op, Routing
from memoryd.retention.request import ExpireRequest

if TYPE_CHECKING:
    from memoryd.settings import Settings


def _interval_s(settings: Settings) -> float:
    return settings.retention.interval_s


OP = Op(
    contract=JobContract(
        name="retention_sweep",
        summary="the scheduled form of `expire`",
        request=ExpireRequest,
        result=expiry_report,
        routing=Routing.HOST,
        purge=True,
    ),
    run=run_expiry,
    policy=JobPolicy(
        lock=takes_retention_lease,
        interval_s=_interval_s,
        sweep=True,
    ),
)
