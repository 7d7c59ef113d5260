"""After a forget: job values in Redis that name what it forgot are deleted, text other
sessions also hold spares a value, and the other sessions are read only when a value could be
spared that way. Real Redis, real transcripts."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import orjson

from memoryd.ops.forget_redis import purge_forgotten_from_redis
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings


class TranscriptOpens:
    """The transcript files opened while active (an audit hook sees every open, on every
    thread; the reader opens them relative to their directory's descriptor)."""

    active: TranscriptOpens | None = None
    _installed = False

    def __init__(self) -> None:
        self.names: list[str] = []
        if not TranscriptOpens._installed:
            sys.addaudithook(TranscriptOpens._hook)
            TranscriptOpens._installed = True

    @staticmethod
    def _hook(event: str, args: tuple[Any, ...]) -> None:
        counter = TranscriptOpens.active
        if counter is not None and event == "open" and isinstance(args[0], str | Path):
            name = Path(args[0]).name
            if name.endswith(".jsonl"):
                counter.names.append(name)

    def __enter__(self) -> TranscriptOpens:
        TranscriptOpens.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        TranscriptOpens.active = None


def _agent(tmp_path: Path, tag: str) -> tuple[Any, SessionStoreBuilder, str, str]:
    root = tmp_path / "sessions"
    b = SessionStoreBuilder(root, "main")
    only = f"Remember that the {tag} quokka ledger balances on the ninth tram stop."
    shared = f"Remember that the {tag} orchard rota changes every Monday morning."
    b.add("agent:main:zed", "zed-1", [Msg("user", only), Msg("user", shared)])
    b.add("agent:main:omar", "omar-1", [Msg("user", shared)])
    for i in range(5):
        b.add(f"agent:main:other-{i}", f"other-{i}", [Msg("user", f"Unrelated session {i} about {tag}.")])
    return make_settings(tmp_path, root), b, only, shared


async def test_a_forget_no_redis_value_names_reads_no_other_sessions_transcript(tmp_path, redis):
    tag = uuid.uuid4().hex
    settings, b, _, _ = _agent(tmp_path, tag)
    with TranscriptOpens() as opens:
        assert await purge_forgotten_from_redis(settings, redis, "main", ["zed-1"]) == 0
    assert set(opens.names) <= {"zed-1.jsonl"}  # none at all when Redis holds no job value


async def test_a_value_quoting_forgotten_text_goes_and_one_quoting_shared_text_stays(tmp_path, redis):
    tag = uuid.uuid4().hex
    settings, b, only, shared = _agent(tmp_path, tag)
    quoting_only, quoting_shared = f"arq:result:test-{tag}-only", f"arq:result:test-{tag}-shared"
    await redis.set(quoting_only, orjson.dumps({"s": True, "r": {"text": only}}), px=600_000)
    await redis.set(quoting_shared, orjson.dumps({"s": True, "r": {"text": shared}}), px=600_000)
    try:
        with TranscriptOpens() as opens:
            assert await purge_forgotten_from_redis(settings, redis, "main", ["zed-1"]) == 1
        assert await redis.exists(quoting_only) == 0
        assert await redis.exists(quoting_shared) == 1  # omar's session holds that text too
        assert "omar-1.jsonl" in opens.names
    finally:
        await redis.delete(quoting_only, quoting_shared)
