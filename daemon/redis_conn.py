"""Redis connections from `redis_url` (redis://, rediss:// for TLS, user:password@ for ACL/AUTH).
Sentinel and Cluster deployments pass through redis-py's URL handling unchanged."""

from __future__ import annotations

import re

from redis.asyncio import Redis
from redis.exceptions import RedisError

from daemon.errors import OperationFailed


def redis_from_url(url: str) -> Redis:
    return Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)


_QUERY_PASSWORD_RE = re.compile(r"(?i)([?&]password=)[^&#]*")


def redact_url(url: str) -> str:
    """The URL without its password (user:password@ or ?password=), for messages and logs."""
    url = _QUERY_PASSWORD_RE.sub(r"\1***", url)
    if "@" not in url:
        return url
    scheme, rest = url.split("://", 1) if "://" in url else ("", url)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if user else '***'}@{host}"


async def connect_redis(url: str) -> Redis:
    """Connect and PING; raise OperationFailed naming the (redacted) URL if Redis is unusable."""
    client = redis_from_url(url)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        raise OperationFailed(f"redis_url {redact_url(url)}: cannot reach Redis: {exc}") from None
    return client
