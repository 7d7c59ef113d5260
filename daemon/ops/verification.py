"""The verifier with the index's embedder: retention's verifier sits below the index, so the
embedder it compares stored vectors with is handed in here, above both."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from redis.asyncio import Redis

    from memoryd.retention.needles import VerifySubject
    from memoryd.retention.receipts import Verification
    from memoryd.retention.verify import Embedder
    from memoryd.settings import Settings


def embedder_of(settings: Settings) -> Embedder | None:
    """The configured embedder (None: FTS only, no vectors are stored)."""
    from memoryd.index.embedder import make_embedder

    return make_embedder(settings.index.embedding)


async def run_verify(
    settings: Settings,
    redis: Redis,
    subject: VerifySubject | None = None,
    *,
    receipt_id: str | None = None,
    agents: Sequence[str] | None = None,
) -> Verification:
    """Run every erasure check now (memoryd.retention.verify), embeddings with the configured embedder."""
    from memoryd.retention.verify import run_verify as verify

    return await verify(
        settings, redis, subject, embedder=embedder_of(settings), receipt_id=receipt_id, agents=agents
    )
