"""Where a background loop's unexpected error was raised, as its one log line says it."""

from __future__ import annotations

import json

import anyio
import pytest

from memoryd.runtime.supervise import innermost, raised_at


def _from_a_library() -> None:
    json.loads("{")


def test_the_line_names_memoryds_frames_and_the_library_that_raised():
    with pytest.raises(ValueError) as info:
        _from_a_library()
    # This test file is not memoryd's code: only the library's frame is named.
    where = raised_at(info.value)
    assert where.endswith(f"json/decoder.py:{info.traceback[-1].lineno + 1}"), where
    assert " > " not in where


def test_a_task_groups_error_is_named_by_its_first_leaf():
    async def fail() -> None:
        raise KeyError("a session key")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)

    with pytest.raises(BaseExceptionGroup) as info:
        anyio.run(main)
    leaf = innermost(info.value)
    assert isinstance(leaf, KeyError)
    assert "a session key" not in raised_at(leaf)
