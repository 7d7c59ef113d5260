"""A report's stored form: what of it may sit in Redis as a job's result.

Redis is outside what forget and erase rewrite, and a result stays there a day, so a stored
result holds counts, states and names of the run's own kinds only — never memory text,
snippets, themes, session or subject ids, entry keys (hashes of content) or workspace paths.
A report model marks each field that may hold such a value with `Content`; `stored_form`
blanks every marked field, at any depth. The direct caller (the CLI in the foreground) gets the
whole report; `memoryd jobs` and `enqueue --wait` print the stored form.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class _ContentMark:
    def __repr__(self) -> str:
        return "Content"


# `Annotated[list[str], Content]`: the field may hold memory text, ids, keys or paths.
Content = _ContentMark()


def is_content(model: type[BaseModel], field: str) -> bool:
    return any(m is Content for m in model.model_fields[field].metadata)


def _blank(value: Any) -> Any:
    return None if value is None else type(value)()


def _stored(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return stored_form(value)
    if isinstance(value, list):
        return [_stored(v) for v in value]
    return value


def stored_form(report: M) -> M:
    """`report` with every `Content` field blanked (empty string, list or dict; None stays)."""
    model = type(report)
    update = {
        name: _blank(value) if is_content(model, name) else _stored(value)
        for name in model.model_fields
        if (value := getattr(report, name)) is not None
    }
    return report.model_copy(update=update)
