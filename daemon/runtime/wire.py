"""Job identity and wire format shared by the daemon's worker, its scheduler and the client.

* Names: one per operation, declared by the registry (daemon.ops.registry, DESIGN §6).
* Queues: one per host, `memoryd:queue:<host_id>`.
* Ids: deterministic. A client request's id is the family plus a hash of its canonical
  JSON payload, so the same request enqueued twice is one job (arq refuses an id whose
  job or result key exists) — except a payload naming a data subject (an erasure): its id is
  random, as a hash of it would confirm a guessed subject. A scheduled sweep's id names the
  agent and the interval slot, so a restart or a second daemon in the same slot does not
  enqueue it again.
* Results: a stored result keeps no arguments (a forget's sessions and people, an erasure's
  subject), as its report keeps no content (daemon/stored_form.py).
* Serialization: JSON (orjson), never pickle: other tools enqueue jobs, and unpickling
  what they wrote would run their code. An exception result is stored as
  `{"error": <class>, "message": <text>}`.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import orjson

from daemon.constants import QUEUE_PREFIX


def queue_name(host_id: str) -> str:
    return f"{QUEUE_PREFIX}{host_id}"


def canonical_json(payload: Any) -> bytes:
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)


def request_job_id(name: str, payload: dict[str, Any], request_id: str | None = None) -> str:
    """Same family + same payload (+ same optional request id) → same job id."""
    digest = hashlib.sha256(canonical_json([name, payload, request_id])).hexdigest()[:32]
    return f"{name}:{digest}"


def random_job_id(name: str) -> str:
    """For a payload naming a data subject: an id that says nothing of it."""
    return f"{name}:{secrets.token_hex(16)}"


def scheduled_job_id(name: str, agent: str, slot: int) -> str:
    return f"{name}:{agent}:sched:{slot}"


def live_job_id(name: str, agent: str) -> str:
    """A sweep the daemon starts on a change: unique, and naming the agent as a scheduled id does."""
    return f"{name}:{agent}:live:{secrets.token_hex(8)}"


def job_name_of(job_id: str) -> str:
    return job_id.split(":", 1)[0]


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} into a job")


def serialize(data: dict[str, Any]) -> bytes:
    if "r" in data:
        # A result outlives its job: it keeps no argument (a forget's sessions and people, an
        # erasure's subject), as its report keeps no content (daemon/stored_form.py).
        data = {**data, "a": [], "k": {}}
    return orjson.dumps(data, default=_default)


def deserialize(raw: bytes) -> dict[str, Any]:
    value = orjson.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("job data is not a JSON object")
    return value
