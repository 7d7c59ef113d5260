"""The agents this host serves now (ServedAgents), in the worker's context under SERVED.

arq hands each job a shallow copy of the worker's context, so a plain value put there at a
heartbeat would not reach a job already running; this one object is shared by every job's copy,
and the service updates it in place: a job waiting for its agent (memoryd.runtime.jobs) sees it
served the moment the heartbeat finds it. A context without it (a plain arq Worker given only
worker_kwargs) serves every agent whose store is on the host."""

from __future__ import annotations

from dataclasses import dataclass, field

SERVED = "served"  # the ctx key


@dataclass
class ServedAgents:
    agents: frozenset[str] = frozenset()
    refused: dict[str, str] = field(default_factory=dict)  # agent -> why its store did not open
