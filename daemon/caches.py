"""What a process keeps between operations so that quiet repeats stay cheap (ProcessCaches).

One object per process, made by whoever runs the operations: the worker makes one beside its
StorePool and hands it to every job's AgentRuntime (`rt.caches`); a one-shot command gets a
fresh one with its runtime, so nothing outlives the command. Each part is a class kept by the
domain module whose reads it saves, made on first use, and says why a stale entry is never
used:

* listings   sessions.json parsed, per agent, while the file's stat holds (sessions/json_store.py)
* decided    admission decided from exactly that listing object and policy (ingest/decided.py)
* stamps     checkpoint stamps, while the store's checkpoint token holds (ingest/checkpoints.py)
* vectors    the last vector matrix, per database, index revision and model (index/vectors.py)

The container knows no part by name, so this module sits below every domain package that keeps
one (the layers contract in pyproject.toml).

Only in memory, never written anywhere. None holds memory text: listings mirror the session
metadata of sessions.json (the source, which memoryd never edits), stamps are checkpoint
fingerprints, and the vector matrix holds embeddings of indexed chunks until the next search
after a purge replaces it (the purge moves the revision).
"""

from __future__ import annotations

from typing import Protocol, TypeVar


class CachePart(Protocol):
    """A part of the process caches: named, sized and clearable."""

    CACHE_NAME: str  # a class attribute of each part

    def __len__(self) -> int: ...

    def clear(self) -> None: ...


P = TypeVar("P", bound=CachePart)


class ProcessCaches:
    def __init__(self) -> None:
        self._parts: dict[type, CachePart] = {}

    def part(self, kind: type[P]) -> P:
        """The process's one instance of `kind`, made on first use."""
        found = self._parts.get(kind)
        if found is None:
            found = self._parts[kind] = kind()
        return found  # type: ignore[return-value]

    def sizes(self) -> dict[str, int]:
        """Entries held by each part made so far (for tests and debugging)."""
        return {part.CACHE_NAME: len(part) for part in self._parts.values()}

    def clear(self) -> None:
        for part in self._parts.values():
            part.clear()
