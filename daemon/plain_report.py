"""Reports as plain data: slotted dataclasses with their JSON form, and no pydantic to load.

A command that runs as a fresh process each time (an agent's search, the forget preview an
operator runs before each forget) reports through these, so its start-up does not pay for
pydantic. A report class is also the one declaration of its schema: pydantic reads it where a
schema or a validation is wanted (the docs generator, the MCP tool listing, a job's result
read back; through `TypeAdapter`), with the camelCase aliases and the attribute docstrings as
descriptions that `__pydantic_config__` asks for.

`to_json` gives the JSON form: camelCase keys in field order, nested reports and lists
converted, a pydantic model inside (a forget's verification) dumped by alias. A field declared
with `OMIT_NONE` or `OMIT_EMPTY` metadata is left out when None, or when empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _is_none(value: Any) -> bool:
    return value is None


def _is_empty(value: Any) -> bool:
    return not value


# Field metadata (`field(default=None, metadata=OMIT_NONE)`): the field's key is left out of
# the JSON form when its value is None, or (OMIT_EMPTY) when it is None or empty.
OMIT_NONE: Mapping[str, Any] = MappingProxyType({"omit_if": _is_none})
OMIT_EMPTY: Mapping[str, Any] = MappingProxyType({"omit_if": _is_empty})

# Values `to_json` gives back as they are, told by their exact type (the common case, first).
_SCALARS = frozenset({str, int, float, bool, type(None), dict})

# (field name, JSON key, omission test) per report class, worked out once: an agent's search is
# converted per call, and `fields()` plus the camel-casing of every key cost more than the
# conversion itself.
_KEYS: dict[type, tuple[tuple[str, str, Callable[[Any], bool] | None], ...]] = {}


def _json(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, PlainReport):
        return value.to_json()
    if isinstance(value, list):
        return [_json(v) for v in value]
    dump = getattr(value, "model_dump", None)  # a pydantic model inside a plain report
    return value if dump is None else dump(mode="json", by_alias=True)


class PlainReport:
    __slots__ = ()
    # Read by pydantic only (a TypeAdapter over the dataclass); a plain dict, so no import.
    __pydantic_config__: Mapping[str, Any] = {"alias_generator": camel, "use_attribute_docstrings": True}

    def to_json(self) -> dict[str, Any]:
        """The report's JSON form (by alias, in field order; omitted fields left out)."""
        keys = _KEYS.get(type(self))
        if keys is None:
            keys = _KEYS[type(self)] = tuple(
                (f.name, camel(f.name), f.metadata.get("omit_if"))
                for f in fields(self)  # type: ignore[arg-type]
            )
        out: dict[str, Any] = {}
        for name, key, omit_if in keys:
            value = getattr(self, name)
            if omit_if is None or not omit_if(value):
                out[key] = _json(value)
        return out


def report_json(report: Any) -> dict[str, Any]:
    """The JSON form of a report, plain (`to_json`) or a pydantic model (its dump by alias, in
    field order), as the CLI prints it and a job stores it."""
    data: dict[str, Any] = _json(report)
    return data
