"""A model endpoint for consolidation tests (a local HTTP server of the test's own that answers
like an OpenAI chat-completions endpoint), an honest model, and a workspace seeded with an
entry the model can merge: shared by the consolidation and the OpenClaw behaviour tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.dreaming.consolidation import normalize_fact
from memoryd.dreaming.memory_file import parse_entries
from memoryd.dreaming.promote import run_promote
from tests.conftest import make_settings
from tests.dream_kit import OPEN_GATES, Stager, stage
from tests.local_http import JsonEndpoint, Request

Reply = Callable[[dict[str, Any]], tuple[int, str]]


class ModelServer(JsonEndpoint):
    """Answers like an OpenAI chat-completions endpoint: `reply(payload)` gets the candidates
    payload the prompt carries and returns (status, assistant content)."""

    def __init__(self, reply: Reply):
        def answer(request: Request) -> tuple[int, Any]:
            status, content = reply(json.loads(request.body["messages"][1]["content"]))
            message = {"role": "assistant", "content": content}
            return status, {
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message}],
            }

        super().__init__(answer)


def honest_model(payload: dict[str, Any]) -> tuple[int, str]:
    """Merges a candidate into an existing entry stating the same fact, adds it otherwise."""
    memory = payload["currentMemory"]
    entries = [e.text for e in parse_entries(memory)]
    lines = memory.split("\n")
    ops = []
    for c in payload["candidates"]:
        same = [e for e in entries if normalize_fact(e) == normalize_fact(c["text"])]
        if same:
            ops.append(
                {
                    "candidateKey": c["key"],
                    "action": "merged",
                    "resultEntry": c["resultEntry"],
                    "priorEntries": same,
                }
            )
            lines = [c["resultEntry"] if ln in same else ln for ln in lines]
        else:
            ops.append(
                {
                    "candidateKey": c["key"],
                    "action": "added",
                    "resultEntry": c["resultEntry"],
                    "priorEntries": [],
                }
            )
            lines.append(c["resultEntry"])
    return 200, json.dumps({"memory": "\n".join(lines), "operations": ops})


def with_model(tmp_path: Path, sessions_root: Path, unique: str, url: str):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        dreaming={"consolidation": {"base_url": url, "timeout_s": 5}},
    )


async def seed_mergeable(rt) -> tuple[str, str]:
    """MEMORY.md with a promoted entry (session a) and three hand-written ones; a new staged
    candidate (session b) stating the same fact."""
    s = Stager(rt.paths.workspace)
    old = s.add("User: The deploy window is Friday.", ["a"])
    await stage(rt, s)
    plain = await run_promote(rt, OPEN_GATES)  # no model configured yet for this workspace's first entry
    assert [p.entry_key for p in plain.promoted] == [old]
    memory = rt.paths.workspace / "MEMORY.md"
    memory.write_text(
        memory.read_text() + "\n- the boiler is serviced in March\n- Nora prefers tea\n"
        "- the wifi password rotates monthly\n"
    )
    new = s.add("User: the deploy window is friday.", ["b"], day="2026-11-22")
    await stage(rt, s)
    return old, new
