"""Which sessions of an agent changed: hints the file watcher leaves for the live sweep and index
sync jobs that this same process runs, so that they stat and plan those sessions, not all.

A hint lives in this process's memory only. A job carries a generation number, never a session
id (Redis keeps a job's arguments until it runs and would be one more copy that forget and
erase must reach); the worker looks the generation up here. A job that finds no hint (run by
another process, after a restart, or after a forget dropped it) considers every session, as a
scheduled sweep does. Nothing here is logged, stored or sent anywhere.

    hints.note(family, agent, ids)   # ids changed; None: anything may have (sessions.json, ...)
    gen = hints.seal(family, agent)  # what was noted, for the job about to be enqueued
    hints.lookup(gen)                # in the job: the ids to consider, or None for all
    hints.finish(family, agent, gen) # the job ended: its ids (to hand on), and forgotten here
    hints.drop_all()                 # a forget or an erasure ran: no hint names any session now
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

# How many sealed hints are kept per (family, agent): a job normally ends before the next is
# sealed, so more means jobs lost with Redis; an older one, if it runs after all, sweeps in full.
MAX_SEALED = 4


class LiveHints:
    """Per (family, agent): the sessions noted since the last seal (None: all), and the sealed
    hints of the jobs not finished yet, by generation."""

    def __init__(self) -> None:
        # The watcher and the jobs run on one event loop; the lock keeps a foreground tool safe too.
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], set[str] | None] = {}
        self._sealed: dict[int, tuple[tuple[str, str], frozenset[str]]] = {}
        # Generations start at the clock, so a job left in Redis by an earlier process never
        # matches a hint of this one (it then sweeps in full).
        self._next = time.time_ns()

    def note(self, family: str, agent: str, ids: Iterable[str] | None) -> None:
        key = (family, agent)
        with self._lock:
            if ids is None:
                self._pending[key] = None
                return
            current = self._pending.setdefault(key, set())
            if current is not None:
                current.update(ids)

    def seal(self, family: str, agent: str) -> int | None:
        """A generation naming what was noted since the last seal, or None when the job must
        consider every session (something other than a transcript changed, or nothing was noted)."""
        key = (family, agent)
        with self._lock:
            ids = self._pending.pop(key, None)
            if ids is None:
                return None
            self._next += 1
            generation = self._next
            self._sealed[generation] = (key, frozenset(ids))
            mine = [g for g, (k, _) in self._sealed.items() if k == key]
            for old in mine[:-MAX_SEALED]:
                del self._sealed[old]
            return generation

    def lookup(self, generation: int | None) -> frozenset[str] | None:
        """The sessions the job of `generation` considers; None: all of them."""
        if generation is None:
            return None
        with self._lock:
            found = self._sealed.get(generation)
        return None if found is None else found[1]

    def finish(self, family: str, agent: str, generation: int | None) -> frozenset[str] | None:
        """The ended job's sessions (None: all), no longer kept here."""
        if generation is None:
            return None
        with self._lock:
            found = self._sealed.pop(generation, None)
        return None if found is None or found[0] != (family, agent) else found[1]

    def drop_all(self) -> None:
        """Forget every session named here: pending hints become "consider all", sealed ones go
        (a job that looks its generation up then sweeps in full)."""
        with self._lock:
            for key in self._pending:
                self._pending[key] = None
            self._sealed.clear()

    def held_ids(self) -> set[str]:
        """Every session id held here (what a test checks a forget leaves behind)."""
        with self._lock:
            held = {i for ids in self._pending.values() if ids for i in ids}
            held.update(i for _, ids in self._sealed.values() for i in ids)
        return held
