"""What a process keeps between operations so that quiet repeats stay cheap (ProcessCaches).

One object per process, made by whoever runs the operations: the worker makes one beside its
StorePool and hands it to every job's AgentRuntime (`rt.caches`); a one-shot command gets a
fresh one with its runtime, so nothing outlives the command. Each part is kept by the domain
module whose reads it saves, and says why a stale entry is never used:

* listings   sessions.json parsed, per agent, while the file's stat holds (sessions/json_store.py)
* decided    admission decided from exactly that listing object and policy (ingest/decided.py)
* stamps     checkpoint stamps, while the store's checkpoint token holds (ingest/checkpoints.py)
* vectors    the last vector matrix, per database, index revision and model (index/vectors.py)

Only in memory, never written anywhere. None holds memory text: listings mirror the session
metadata of sessions.json (the source, which memoryd never edits), stamps are checkpoint
fingerprints, and the vector matrix holds embeddings of indexed chunks until the next search
after a purge replaces it (the purge moves the revision).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.index.vectors import VectorMatrices
from daemon.ingest.checkpoints import StampSets
from daemon.ingest.decided import DecidedListings
from daemon.sessions.json_store import ListingCache


@dataclass(eq=False, slots=True)
class ProcessCaches:
    listings: ListingCache = field(default_factory=ListingCache)
    decided: DecidedListings = field(default_factory=DecidedListings)
    stamps: StampSets = field(default_factory=StampSets)
    vectors: VectorMatrices = field(default_factory=VectorMatrices)

    def sizes(self) -> dict[str, int]:
        """Entries held by each part (for tests and debugging)."""
        return {
            "listings": len(self.listings),
            "decided": len(self.decided),
            "stamps": len(self.stamps),
            "vectors": len(self.vectors),
        }

    def clear(self) -> None:
        self.listings.clear()
        self.decided.clear()
        self.stamps.clear()
        self.vectors.clear()
