"""A job payload's size limit, apart from the request models: a forget dry run from the CLI,
which builds no pydantic model, applies it too (memoryd.commands.forget)."""

from __future__ import annotations

from typing import Any

import orjson

from memoryd.constants import MAX_PAYLOAD_BYTES
from memoryd.errors import JobPayloadError


def payload_size(data: dict[str, Any]) -> int:
    """The payload's size as JSON; one that cannot be JSON is left for validation to name."""
    try:
        return len(orjson.dumps(data))
    except (TypeError, orjson.JSONEncodeError):
        return 0


def check_payload_size(family: str, data: dict[str, Any]) -> None:
    size = payload_size(data)
    if size > MAX_PAYLOAD_BYTES:
        raise JobPayloadError(f"{family}: payload is {size} bytes; at most {MAX_PAYLOAD_BYTES}")
