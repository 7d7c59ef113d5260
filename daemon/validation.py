"""Validating a request model (CLI flags or a job's JSON payload) into one clear error line."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from daemon.errors import UsageError

M = TypeVar("M", bound=BaseModel)


def validate_request(model: type[M], data: Any, what: str) -> M:
    """`data` as a `model`; any problem is one UsageError naming the request and the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "request"
        raise UsageError(f"{what} request: {where}: {err['msg']}") from None
