"""Embedding providers (settings.index.embedding.provider):

* `none`    — no vectors; search is FTS only (the default).
* `hashing` — a built-in local embedder: signed feature hashing of words and character
              trigrams into `dims` buckets, L2-normalised. Deterministic, no download, works
              offline; it finds inflected and compound forms ("deploy" ~ "deployment") that
              exact-token FTS misses. Not a language model: it does not know synonyms.
* `openai`  — an OpenAI-compatible `POST {base_url}/embeddings` (httpx), batched, retried
              with backoff on 429/5xx and transport errors.

Vectors are returned as float32 unit vectors, so cosine similarity is a dot product.
Embedding is slow work: callers run it outside the workspace lock.
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import anyio

from memoryd.errors import ConfigError, OperationFailed
from memoryd.redaction import redact_text, redact_url
from memoryd.settings import EmbeddingSettings

if TYPE_CHECKING:
    import httpx
    import numpy as np

# httpx and numpy are imported by the functions that use them: a search without an embedder
# (the default) loads this module for `make_embedder` and `model_name` only, and its start-up
# should not pay for the HTTP client (about 55 ms, it loads its CLI and rich) or numpy (35 ms).

FTS_ONLY_MODEL = "fts-only"  # the model name chunks carry when no embedder is configured
_WORD_RE = re.compile(r"\w+", re.UNICODE)
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
HASHING_WORD_CACHE = 200_000  # distinct words whose features are kept (~100 MB at most)


class Embedder(Protocol):
    provider: str
    model: str
    provider_key: str  # identifies the endpoint in the cache key (never a secret)

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]: ...


def unit(vector: np.ndarray) -> np.ndarray:
    import numpy as np

    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class HashingEmbedder:
    provider = "hashing"
    provider_key = "local"

    def __init__(self, dims: int):
        self.dims = dims
        self.model = f"hashing-v1-d{dims}"
        # Words repeat (Zipf): hashing each distinct word's features once makes this ~5x faster.
        self._features: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._features.get(word)
        if hit is not None:
            return hit
        import numpy as np

        padded = f"#{word}#"
        features = [f"w:{word}"] + [padded[i : i + 3] for i in range(len(padded) - 2)]
        buckets: list[int] = []
        weights: list[float] = []
        for j, feature in enumerate(features):
            h = zlib.crc32(feature.encode("utf-8"))
            buckets.append(h % self.dims)
            # The sign bit keeps collisions from adding up; whole words weigh more than trigrams.
            weights.append((1.0 if (h >> 31) & 1 else -1.0) * (1.0 if j == 0 else 0.5))
        if len(self._features) >= HASHING_WORD_CACHE:
            self._features.clear()
        hit = self._features[word] = (
            np.asarray(buckets, dtype=np.intp),
            np.asarray(weights, dtype=np.float64),
        )
        return hit

    def embed_one(self, text: str) -> np.ndarray:
        import numpy as np

        parts = [self._word(word) for word in _WORD_RE.findall(text.lower())]
        if not parts:
            return np.zeros(self.dims, dtype=np.float32)
        buckets = np.concatenate([b for b, _ in parts])
        weights = np.concatenate([w for _, w in parts])
        return unit(np.bincount(buckets, weights, minlength=self.dims))

    def embed_sync(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.embed_one(t) for t in texts]

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        # CPU-bound: keep the event loop (lock renewal, other jobs) responsive.
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))


class OpenAIEmbedder:
    provider = "openai"

    def __init__(self, settings: EmbeddingSettings, *, transport: httpx.AsyncBaseTransport | None = None):
        if not settings.base_url:
            raise ConfigError("index.embedding.base_url: required when index.embedding.provider = 'openai'")
        self.base_url = settings.base_url.rstrip("/")
        self.model = settings.model
        self.batch_size = settings.batch_size
        self.timeout_s = settings.timeout_s
        self.max_retries = settings.max_retries
        self.api_key = os.environ.get(settings.api_key_env, "")
        self.provider_key = hashlib.sha256(self.base_url.encode("utf-8")).hexdigest()[:16]
        self._transport = transport

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        import httpx

        out: list[np.ndarray] = []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with httpx.AsyncClient(
            timeout=self.timeout_s, headers=headers, transport=self._transport
        ) as client:
            for start in range(0, len(texts), self.batch_size):
                out += await self._request(client, list(texts[start : start + self.batch_size]))
        return out

    async def _request(self, client: httpx.AsyncClient, batch: list[str]) -> list[np.ndarray]:
        import httpx

        url = f"{self.base_url}/embeddings"
        shown = redact_url(url)  # what messages name: no userinfo password, no secret query value
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await anyio.sleep(min(8.0, 0.25 * 2 ** (attempt - 1)))
            try:
                response = await client.post(url, json={"model": self.model, "input": batch})
            except httpx.TransportError as exc:
                problem = redact_text(f"{type(exc).__name__}: {exc}")
                continue
            if response.status_code in RETRY_STATUSES:
                problem = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise OperationFailed(
                    f"embedding endpoint {shown}: HTTP {response.status_code}: {response.text[:200]}"
                )
            return self._parse(shown, response, len(batch))
        raise OperationFailed(
            f"embedding endpoint {shown}: gave up after {self.max_retries + 1} attempts ({problem})"
        )

    @staticmethod
    def _parse(url: str, response: httpx.Response, expected: int) -> list[np.ndarray]:
        import numpy as np

        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: item.get("index", 0))
            vectors = [unit(np.asarray(item["embedding"], dtype=np.float32)) for item in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise OperationFailed(f"embedding endpoint {url}: malformed response ({exc})") from None
        if len(vectors) != expected:
            raise OperationFailed(f"embedding endpoint {url}: {len(vectors)} vectors for {expected} inputs")
        return vectors


def make_embedder(settings: EmbeddingSettings) -> Embedder | None:
    if settings.provider == "hashing":
        return HashingEmbedder(settings.dims)
    if settings.provider == "openai":
        return OpenAIEmbedder(settings)
    return None


def model_name(embedder: Embedder | None) -> str:
    return embedder.model if embedder is not None else FTS_ONLY_MODEL
