"""Product-side helpers the scenarios share: sweeping every agent of the corpus, counting
transcript opens, and reaching the domain entry points by name."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONTEXT = "memoryd.agent_runtime:agent_runtime"
INGEST = "memoryd.ingest.sweep:run_ingest_sweep"
INDEX = "memoryd.index.sync:run_index_sync"
SEARCH = "memoryd.index.search:run_search"
RUN_FORGET = "memoryd.forget.run:run_forget"
FORGET_REQUEST = "memoryd.forget.request:ForgetRequest"
FORGET_OP = "memoryd.ops.forget:OP"  # the operation: its name, its one validation
RUN_ERASE = "memoryd.ops.erasure:run_erase"
CACHES = "memoryd.caches:ProcessCaches"


def entry(name: str) -> Any:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


async def sweep_agents(settings: Any, agents: list[str], caches: Any = None) -> list[Any]:
    """One sweep of each agent; `caches` is the process's (runtime/caches.py), kept across calls
    as the daemon's worker keeps its own across jobs (None: each runtime gets a fresh one)."""
    from memoryd.agent_runtime import agent_runtime

    run_ingest_sweep = entry(INGEST)
    reports = []
    for agent in agents:
        async with agent_runtime(settings, agent, caches=caches) as rt:
            reports.append(await run_ingest_sweep(rt))
    return reports


def process_caches() -> Any:
    """A fresh process-caches object, as a worker makes at start."""
    return entry(CACHES)()


class OpenCounter:
    """Counts files opened under `root` whose name contains `.jsonl`, while enabled.

    An audit hook sees every open() and os.open(), including ones on other threads, so a
    sweep that reads a transcript cannot hide it.
    """

    def __init__(self, root: Path):
        self.root = str(root)
        self.enabled = False
        self.count = 0
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.enabled and event == "open" and args and isinstance(args[0], str | Path):
            path = str(args[0])
            if path.startswith(self.root) and ".jsonl" in path:
                self.count += 1

    def during(self, fn: Callable[[], Any]) -> Any:
        self.count = 0
        self.enabled = True
        try:
            return fn()
        finally:
            self.enabled = False
