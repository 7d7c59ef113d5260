"""Job identity and wire format shared by the daemon's worker, its scheduler and the client.

* Names: one per operation, declared by the registry (memoryd.ops.registry, DESIGN §6).
* Queues: one per host, `memoryd:queue:<host_id>`.
* Ids: built and parsed in memoryd.job_ids only (`JobId`). A request's job is random (`<job>:<32 hex>`)
  unless the caller gives a request id, whose job is `<job>:req:<32 hex>`, the hex a hash of the
  request id (never of the payload: a hash of a payload naming a subject would confirm a
  guessed subject to anyone who can list Redis keys, and outlive an erasure). A scheduled
  sweep's id names the agent and the interval slot, so a restart or a second daemon in the
  same slot does not enqueue it again; a live sweep's names the agent and a random token.
* Request fingerprints: the same request id sent with another payload must be refused, so a
  request id's job keeps `memoryd:request:<job id>`, an HMAC of the payload keyed by the
  request id itself, which Redis never holds (callers use unguessable request ids, and never
  put a subject's id in one: docs/jobs.md).
* Results: a stored result keeps no arguments (a forget's sessions and people, an erasure's
  subject), as its report keeps no content (daemon/stored_form.py).
* Serialization: JSON (orjson), never pickle: other tools enqueue jobs, and unpickling
  what they wrote would run their code. An exception result is stored as
  `{"error": <class>, "message": <text>}`.
* Decoding checks every field arq reads (function, arguments, try, times) before arq sees it:
  a record that arq's own decoding would trip over (`"f":{}`, `"t":"5"`, `"et":1e30`) is
  refused here as unreadable, which arq turns into a failed result for that job alone.
"""

from __future__ import annotations

from typing import Any

import orjson

from memoryd import derivations
from memoryd.constants import QUEUE_PREFIX
from memoryd.job_ids import canonical_json


def queue_name(host_id: str) -> str:
    return f"{QUEUE_PREFIX}{host_id}"


def request_fingerprint(request_id: str, name: str, payload: dict[str, Any]) -> str:
    """What tells two payloads sent under one request id apart: an HMAC keyed by the request id,
    which Redis never holds, so the stored value confirms no guessed payload by itself."""
    return derivations.request_fingerprint(request_id, canonical_json([name, payload]))


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


# arq turns these into datetimes (milliseconds since the epoch): years 1970 to 9999.
_MAX_TIME_MS = 253_402_300_799_999
_TIME_FIELDS = ("et", "st", "ft")  # enqueued, started, finished
# What arq reads of a job record (f, a, k, t, et) and of a result (those and s, st, ft, q).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {"f": (str,), "a": (list,), "k": (dict,), "s": (bool,)}


class UnreadableRecord(ValueError):
    """A job record or result that arq's decoding would trip over; the message names the field."""


def record_problem(value: Any) -> str | None:
    """What is wrong with a decoded job record or result, or None when arq can read it. A
    missing field is left to arq, whose decoding turns it into its DeserializationError."""
    if not isinstance(value, dict):
        return "not a JSON object"
    for name, types in _FIELD_TYPES.items():
        if name in value and not isinstance(value[name], types):
            return f"field {name!r} is not a {types[0].__name__}"
    job_try = value.get("t")
    if job_try is not None and (type(job_try) is not int or job_try < 0):
        return "field 't' is not a try count"
    for name in _TIME_FIELDS:
        if name in value and not _is_time_ms(value[name]):
            return f"field {name!r} is not a time in milliseconds"
    queue = value.get("q")
    if queue is not None and not isinstance(queue, str):
        return "field 'q' is not a queue name"
    return None


def _is_time_ms(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _MAX_TIME_MS


def deserialize(raw: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise UnreadableRecord("job record is not JSON") from None
    problem = record_problem(value)
    if problem is not None:
        raise UnreadableRecord(f"job record unreadable: {problem}")
    return value  # type: ignore[no-any-return]
