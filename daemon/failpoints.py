"""Failpoints: a test and chaos hook that makes a named step fail on purpose.

    MEMORYD_FAILPOINTS=forget.index,forget.corpus memoryd forget …

Each multi-step operation calls `failpoint("<name>")` at the boundaries whose crash
behaviour it promises (forget: forget.mark, forget.index, forget.state, forget.preimages,
forget.memory_files, forget.corpus, forget.origins). Unset in production: the check is one
environment lookup.
"""

from __future__ import annotations

import os

from daemon.errors import OperationFailed

ENV_VAR = "MEMORYD_FAILPOINTS"


class FailpointTriggered(OperationFailed):
    """Raised by an armed failpoint; an OperationFailed so every caller handles it as a real fault."""


def failpoint(name: str) -> None:
    armed = os.environ.get(ENV_VAR)
    if armed and name in {n.strip() for n in armed.split(",")}:
        raise FailpointTriggered(f"failpoint {name} triggered ({ENV_VAR})")
