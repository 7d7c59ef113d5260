"""Embedders: the local hashing one, and the OpenAI-compatible client against a real HTTP
server on localhost (standing in for the external endpoint)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from memoryd.errors import ConfigError, OperationFailed
from memoryd.index.embedder import HashingEmbedder, OpenAIEmbedder, make_embedder
from memoryd.settings import EmbeddingSettings
from tests.local_http import JsonEndpoint, Request


def test_hashing_embedder_is_deterministic_unit_length_and_groups_word_forms() -> None:
    e = HashingEmbedder(256)
    a, b = e.embed_one("deployment schedules"), HashingEmbedder(256).embed_one("deployment schedules")
    assert np.array_equal(a, b)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    related = float(a @ e.embed_one("the deploy schedule"))
    unrelated = float(a @ e.embed_one("green tea in the morning"))
    assert related > 0.3 > unrelated


class _Endpoint:
    def __init__(self, failures: int, status: int = 500):
        self.failures = failures
        self.status = status
        self.batches: list[list[str]] = []
        self.auth: list[str | None] = []


@pytest.fixture
def endpoint() -> Iterator[tuple[str, _Endpoint]]:
    state = _Endpoint(failures=1)

    def answer(request: Request) -> tuple[int, Any]:
        state.auth.append(request.headers.get("Authorization"))
        if state.failures > 0:
            state.failures -= 1
            return state.status, None
        state.batches.append(request.body["input"])
        data = [
            {"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(request.body["input"])
        ]
        return 200, {"data": list(reversed(data))}  # the order must come from "index"

    with JsonEndpoint(answer) as server:
        yield server.url, state


async def test_openai_embedder_batches_and_retries_a_server_error(endpoint, monkeypatch) -> None:
    url, state = endpoint
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test")
    embedder = OpenAIEmbedder(
        EmbeddingSettings(
            provider="openai", base_url=url, batch_size=2, max_retries=2, api_key_env="TEST_EMBED_KEY"
        )
    )
    vectors = await embedder.embed(["a", "bb", "ccc"])
    assert state.batches == [["a", "bb"], ["ccc"]]
    assert state.auth[0] == "Bearer sk-test"
    expected = [np.array([n, 1.0, 0.0]) / np.linalg.norm([n, 1.0, 0.0]) for n in (1, 2, 3)]
    assert all(np.allclose(v, e) for v, e in zip(vectors, expected, strict=True))
    assert "sk-test" not in embedder.provider_key


async def test_openai_embedder_gives_up_with_a_clear_error(endpoint) -> None:
    url, state = endpoint
    state.failures = 10
    embedder = OpenAIEmbedder(EmbeddingSettings(provider="openai", base_url=url, max_retries=1))
    with pytest.raises(OperationFailed, match="gave up after 2 attempts"):
        await embedder.embed(["a"])


async def test_openai_embedder_does_not_retry_a_client_error(endpoint) -> None:
    url, state = endpoint
    state.failures, state.status = 1, 401
    embedder = OpenAIEmbedder(EmbeddingSettings(provider="openai", base_url=url, max_retries=3))
    with pytest.raises(OperationFailed, match="HTTP 401"):
        await embedder.embed(["a"])
    assert len(state.auth) == 1


def test_openai_provider_without_a_base_url_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="index.embedding.base_url"):
        make_embedder(EmbeddingSettings(provider="openai"))
