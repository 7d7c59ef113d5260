"""The purge metrics count purges: a dry run removes nothing and a payload refused before it
ran attempted nothing, so neither is a purge (nor a failed one, which would fire
MemorydPurgeFailing)."""

from __future__ import annotations

from memoryd.runtime import metrics
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.wire import queue_name
from memoryd.settings import Settings
from tests.builders import SessionStoreBuilder, conversation
from tests.worker_harness import run_jobs


def _purges() -> dict[str, float]:
    def value(name: str, labels: dict[str, str]) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    return {
        "complete": value("memoryd_purges_total", {"family": "forget", "outcome": "complete"}),
        "failed": value("memoryd_purges_total", {"family": "forget", "outcome": "failed"}),
        "fts": value("memoryd_purged_artifacts_total", {"family": "forget", "artifact": "ftsRows"}),
        "lines": value(
            "memoryd_purged_artifacts_total", {"family": "forget", "artifact": "sessionCorpusLines"}
        ),
    }


async def test_dry_runs_and_refused_payloads_are_not_counted_as_purges(
    settings: Settings, store_builder: SessionStoreBuilder, unique: str
) -> None:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    queue = queue_name(settings.daemon.host_id)
    before = _purges()
    async with MemorydClient.connect(settings) as client:
        for payload in (
            {"agent": "main", "sessions": ["direct-1"], "dry_run": True},
            {"agent": "main", "sessions": ["direct-1"], "noSuchField": 1},  # refused by the model
            {"agent": "elsewhere", "sessions": ["direct-1"]},  # not an agent of this host
        ):
            job = await client.enqueue("forget", payload, queue=queue)
            assert not job.deduplicated
    await run_jobs(settings, queue)
    assert _purges() == before
