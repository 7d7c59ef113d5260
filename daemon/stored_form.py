"""A report's stored form: what of it may sit in Redis as a job's result.

Redis is outside what forget and erase rewrite, and a result stays there a day, so a stored
result holds counts, states and names of the run's own kinds only — never memory text,
snippets, themes, session or subject ids, entry keys (hashes of content) or workspace paths.
A report marks each field that may hold such a value with `Content`
(`Annotated[list[str], Content]`), in a pydantic model or a plain report dataclass
(daemon/plain_report.py) alike; `stored_form` blanks every marked field, at any depth. The direct
caller (the CLI in the foreground) gets the whole report; `memoryd jobs` and `enqueue --wait`
print the stored form.

This module loads no pydantic: a plain report imports `Content` on paths that never store one
(a dry run from the CLI).
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any, TypeVar, cast

R = TypeVar("R")


class _ContentMark:
    def __repr__(self) -> str:
        return "Content"


# `Annotated[list[str], Content]`: the field may hold memory text, ids, keys or paths.
Content = _ContentMark()


@cache
def content_fields(report_type: type) -> frozenset[str]:
    """The fields of a report class (a pydantic model or a plain dataclass) marked `Content`."""
    if dataclasses.is_dataclass(report_type):
        # The annotations are strings (`from __future__ import annotations`): resolved here, in
        # the report's module, with their `Annotated` metadata.
        hints = typing.get_type_hints(report_type, include_extras=True)
        return frozenset(
            f.name
            for f in dataclasses.fields(report_type)
            if any(m is Content for m in getattr(hints[f.name], "__metadata__", ()))
        )
    model: Any = report_type
    return frozenset(name for name, f in model.model_fields.items() if any(m is Content for m in f.metadata))


def is_content(report_type: type, field: str) -> bool:
    return field in content_fields(report_type)


def _is_report(value: Any) -> bool:
    return dataclasses.is_dataclass(value) or hasattr(type(value), "model_fields")


def _blank(value: Any) -> Any:
    return None if value is None else type(value)()


def _stored(value: Any) -> Any:
    if isinstance(value, list):
        return [_stored(v) for v in value]
    return stored_form(value) if _is_report(value) else value


def stored_form(report: R) -> R:
    """`report` with every `Content` field blanked (empty string, list or dict; None stays)."""
    value: Any = report
    report_type: Any = type(value)
    plain = dataclasses.is_dataclass(value)
    names = [f.name for f in dataclasses.fields(value)] if plain else list(report_type.model_fields)
    marked = content_fields(report_type)
    update = {
        name: _blank(field) if name in marked else _stored(field)
        for name in names
        if (field := getattr(value, name)) is not None
    }
    return cast(R, dataclasses.replace(value, **update) if plain else value.model_copy(update=update))
