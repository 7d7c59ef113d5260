"""Redis connections from `redis_url` (redis://, rediss:// for TLS, user:password@ for ACL/AUTH).
Sentinel and Cluster deployments pass through redis-py's URL handling unchanged."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from daemon.errors import OperationFailed
from daemon.redaction import redact_url as redact_url  # named here by its callers


def redis_from_url(url: str) -> Redis:
    redis: Redis = Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)
    return redis


async def connect_redis(url: str) -> Redis:
    """Connect and PING; raise OperationFailed naming the (redacted) URL if Redis is unusable."""
    client = redis_from_url(url)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        raise OperationFailed(f"redis_url {redact_url(url)}: cannot reach Redis: {exc}") from None
    return client
