"""Scoped retention, legal holds and verified erasure (seed 001, DESIGN §5).

Entry points live in `memoryd.retention.api`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Submodules that load on first use as an attribute of the package, as an import of them would.
# The forget report's `verification` names its model as `retention.receipts.Verification`, in an
# annotation that only pydantic and the stored form evaluate: a dry run, which has none, loads
# neither the model nor pydantic.
_ON_FIRST_USE = frozenset({"receipts"})


def __getattr__(name: str) -> ModuleType:
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
