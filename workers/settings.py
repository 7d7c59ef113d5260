"""arq's WorkerSettings for memoryd, for an operator who runs workers with arq's own command:

    MEMORYD_CONFIG=/etc/memoryd/memoryd.toml arq memoryd.workers.settings.WorkerSettings

It consumes this host's queue (`memoryd:queue:<daemon.host_id>`) with the job functions of the
operation registry, JSON on the wire, and the daemon's timeouts, tries and result TTLs. It is a
plain arq Worker: no doorbells (jobs start within `daemon.poll_delay_s`), no open-store pool
(each job opens its agent's store), no scheduler, metrics or sd_notify — `memoryd run` is the
daemon. It serves every agent whose store is on this host; routing to it is still the daemons'
(`memoryd:agents`). Settings are read when arq imports this module; a bad config ends it with
one line.
"""

from __future__ import annotations

from typing import Any

from memoryd.errors import MemorydError
from memoryd.redis_conn import arq_redis_settings
from memoryd.runtime.wire import queue_name
from memoryd.runtime.worker import quiet_job_logs, worker_kwargs
from memoryd.settings import load_settings


async def _on_startup(ctx: dict[str, Any]) -> None:
    # After arq's command has configured logging: its job lines name sessions and people.
    quiet_job_logs()


def worker_settings() -> dict[str, Any]:
    """The keyword arguments of arq's Worker, from memoryd's settings ($MEMORYD_CONFIG)."""
    try:
        settings = load_settings(None)  # $MEMORYD_CONFIG, else the defaults
        redis_settings = arq_redis_settings(settings)  # reads redis.password_file
    except MemorydError as exc:
        raise SystemExit(f"memoryd: error: {exc}") from None
    host = settings.daemon.host_id
    kwargs = worker_kwargs(settings, queue_name(host), {"settings": settings, "host_id": host})
    kwargs["handle_signals"] = True  # arq's command owns this process: SIGTERM/SIGINT end it gracefully
    kwargs["redis_settings"] = redis_settings
    kwargs["on_startup"] = _on_startup
    return kwargs


# arq reads a dict as it reads a settings class's attributes.
WorkerSettings = worker_settings()
