"""Path tricks in ids and paths, and symlinks in the workspace and the corpus directory.

An id that validation accepts always names exactly one file or directory inside its parent; a
symlink anywhere memoryd writes is refused with an error naming the path, and the file it points
to is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths
from memoryd.errors import MemorydError, UsageError
from memoryd.fileio import ABSENT, commit_file
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.ids import session_id_problem, validate_agent_id
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.settings import load_settings
from tests.builders import conversation

EXAMPLES = 500
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRICKS = [
    "..",
    ".",
    "../x",
    "x/..",
    "a/b",
    "a\\b",
    "/abs",
    "~",
    "~root",
    "x\x00",
    "x\n",
    "..\u2215x",
    "\u2024\u2024",
    "%2e%2e",
    "x" * 600,
    "",
    " ",
    "CON",
    "-rf",
    ".hidden",
    "a..b",
    "\udcff",
]
ids = st.one_of(
    st.sampled_from(TRICKS),
    st.text(max_size=40),
    st.lists(st.sampled_from(TRICKS + ["a", "/", "."]), max_size=5).map("".join),
)


@FUZZ
@given(value=ids)
def test_an_accepted_session_id_names_one_file_inside_the_sessions_directory(value):
    if session_id_problem(value) is not None:
        return
    base = Path("/srv/sessions")
    path = base / f"{value}.jsonl"
    assert path.parent == base and os.path.normpath(path) == str(path)
    value.encode("utf-8")


@FUZZ
@given(value=ids)
def test_an_accepted_agent_id_keeps_its_state_under_the_state_dir(value):
    try:
        validate_agent_id(value)
    except UsageError as exc:
        assert "\n" not in str(exc).replace("\\n", "")
        return
    s = load_settings(None, state_dir="/srv/state", sessions_root="/srv/sessions")
    paths = agent_paths(s, value)
    assert paths.state_dir.parent == Path("/srv/state/agents")
    assert os.path.normpath(paths.db_path) == str(paths.db_path)


# --- symlinks where memoryd writes -------------------------------------------------------------


def test_a_symlinked_parent_inside_the_workspace_is_refused_and_its_target_untouched(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "MEMORY.md").write_text("not memoryd's\n")
    os.symlink(outside, ws / "memory")
    with pytest.raises(UsageError, match="symlink"):
        commit_file(ws / "memory" / "MEMORY.md", "x", expected_hash=None, root=ws)
    with pytest.raises(UsageError, match="outside the workspace"):
        commit_file(tmp_path / "elsewhere.md", "x", expected_hash=ABSENT, root=ws)
    assert (outside / "MEMORY.md").read_text() == "not memoryd's\n"
    assert sorted(p.name for p in outside.iterdir()) == ["MEMORY.md"]


async def test_a_symlinked_corpus_directory_fails_the_sweep_and_writes_nothing_through_it(
    settings, store_builder, redis
):
    store_builder.add("agent:main:main", "s1", conversation("orchard", "s1", 4))
    outside = settings.state_dir.parent / "outside-corpus"
    outside.mkdir()
    corpus = agent_paths(settings, "main").corpus_dir
    corpus.parent.mkdir(parents=True)
    os.symlink(outside, corpus)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        try:
            report = await run_ingest_sweep(rt)
        except MemorydError as exc:
            assert "symlink" in str(exc)
        else:
            assert report.messages_staged == 0 and any("symlink" in e for e in report.errors)
        staged = await rt.require_store().read(
            lambda c: c.execute("SELECT count(*) FROM short_term_entries").fetchone()[0]
        )
    assert list(outside.iterdir()) == []
    assert staged == 0  # nothing staged whose corpus line could not be written


async def test_a_symlinked_memory_file_is_skipped_by_forget_and_its_target_untouched(
    settings, store_builder, redis
):
    store_builder.add("agent:main:main", "s1", conversation("orchard", "s1", 4))
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    ws = settings.workspace_for("main")
    outside = settings.state_dir.parent / "elsewhere.md"
    text = "- Session ID: s1; a note that lives outside the workspace\n"
    outside.write_text(text)
    os.symlink(outside, ws / "MEMORY.md")
    async with agent_runtime(settings, "main", redis=redis) as rt:
        # The memory-file scan skips symlinks (lstat): the link is not memoryd's file to rewrite.
        report = await run_forget(rt, ForgetRequest(agent="main", sessions=["s1"]))
    assert report.artifacts.memory_files == 0  # nothing rewritten through the link
    assert outside.read_text() == text and (ws / "MEMORY.md").is_symlink()
    # the forgotten record was committed first, so the session stays excluded after the refusal
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        rows = await rt.require_store().read(
            lambda c: c.execute("SELECT session_id FROM memory_session_tombstones").fetchall()
        )
    assert rows == [("s1",)]
