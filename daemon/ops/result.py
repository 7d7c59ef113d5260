"""Reading a job's result: through its operation's report model (`Op.result()`), never by its
keys, so a renamed or mistyped field fails the type check instead of reading as a default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_result(model: type[M], result: Mapping[str, Any] | None) -> M | None:
    """`result` (a report's JSON, as a job stores it) as `model`; None when there is none or it
    is not that report (another memoryd version wrote it, or another tool)."""
    if result is None:
        return None
    try:
        return model.model_validate(result)
    except ValidationError:
        return None
