"""Reading a job's result: through its operation's report type (`Op.result()`), never by its
keys, so a renamed or mistyped field fails the type check instead of reading as a default."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar, cast

from pydantic import TypeAdapter, ValidationError

M = TypeVar("M")


@cache
def _adapter(report_type: Any) -> TypeAdapter[Any]:
    # A pydantic model or a plain report dataclass (daemon/plain_report.py): pydantic reads either.
    return TypeAdapter(report_type)


def read_result(report_type: type[M], result: Mapping[str, Any] | None) -> M | None:
    """`result` (a report's JSON, as a job stores it) as `report_type`; None when there is none
    or it is not that report (another memoryd version wrote it, or another tool)."""
    if result is None:
        return None
    adapter = _adapter(cast(Any, report_type))
    try:
        return cast(M, adapter.validate_python(result))
    except ValidationError:
        return None
