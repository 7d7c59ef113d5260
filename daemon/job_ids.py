"""Job ids, built and parsed here only (`JobId`): the worker, the scheduler, the client and the
purge of Redis values all read them through this module (daemon/runtime/wire.py says why each
kind looks as it does). Below the runtime in the layers, so that memoryd.redis_values can tell
memoryd's own erasure requests by their ids.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from memoryd import derivations


def canonical_json(payload: Any) -> bytes:
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)


# A job id's kinds: what the part after the family says about the job.
RANDOM, REQUEST, SCHEDULED, LIVE, OTHER = "random", "request", "scheduled", "live", "other"
_REQUEST_TAG, _SCHEDULED_TAG, _LIVE_TAG = "req", "sched", "live"
_TOKEN_HEX = 32  # random and request tokens: 128 bits


@dataclass(frozen=True, slots=True)
class JobId:
    """A job id taken apart: `family` is the op's name (arq's function), `agent` the agent a
    scheduled or live sweep names. Another tool's own id (any text) parses as kind OTHER, its
    family read up to the first colon, as arq's ids are commonly written."""

    family: str
    kind: str
    agent: str | None = None


def random_job_id(name: str) -> str:
    """A request's job: an id that says nothing of its payload."""
    return f"{name}:{secrets.token_hex(_TOKEN_HEX // 2)}"


def request_job_id(name: str, request_id: str) -> str:
    """The job of a caller's request id: one per (family, request id), never from the payload."""
    digest = derivations.request_digest(canonical_json([name, request_id]))
    return f"{name}:{_REQUEST_TAG}:{digest[:_TOKEN_HEX]}"


def scheduled_job_id(name: str, target: str, slot: int, deployment: str) -> str:
    """A scheduled run of `target` (an agent, or a host for a host-wide job) in one interval slot
    of one deployment: a restart or a second daemon of the deployment in the same slot does not
    enqueue it again, and another deployment on the same Redis with an agent of the same name
    runs its own (a deployment id has no colon: memoryd.settings)."""
    return f"{name}:{target}:{_SCHEDULED_TAG}:{deployment}:{slot}"


def live_job_id(name: str, agent: str) -> str:
    """A sweep the daemon starts on a change: unique, and naming the agent as a scheduled id does."""
    return f"{name}:{agent}:{_LIVE_TAG}:{secrets.token_hex(8)}"


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdef" for c in text)


def parse_job_id(job_id: str) -> JobId:
    parts = job_id.split(":")
    family = parts[0]
    if len(parts) == 2 and _is_hex(parts[1], _TOKEN_HEX):
        return JobId(family, RANDOM)
    if len(parts) == 3 and parts[1] == _REQUEST_TAG and _is_hex(parts[2], _TOKEN_HEX):
        return JobId(family, REQUEST)
    if len(parts) == 5 and parts[2] == _SCHEDULED_TAG and parts[4].isdigit():
        return JobId(family, SCHEDULED, parts[1])
    if len(parts) == 4 and parts[2] == _LIVE_TAG:
        return JobId(family, LIVE, parts[1])
    return JobId(family, OTHER)


def job_name_of(job_id: str) -> str:
    return parse_job_id(job_id).family
