"""The report fields the reference sorts with `localeCompare` (curatedWrites by path,
sessionResolutions by id) follow the root locale's order on every host (reference W-03:
`MEMORY.md`, `memory/…`, `USER.md`), checked against Node's own `localeCompare`."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.utf16 import locale_key

ASCII = "".join(chr(c) for c in range(0x20, 0x7F))


def test_curated_write_paths_sort_as_the_reference_sorts_them() -> None:
    paths = ["USER.md", "memory/structured.md", "MEMORY.md", "memory/archive.md", "memory/profile.md"]
    assert sorted(paths, key=locale_key) == [
        "MEMORY.md",
        "memory/archive.md",
        "memory/profile.md",
        "memory/structured.md",
        "USER.md",
    ]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node for its localeCompare")
@settings(max_examples=20, deadline=None)
@given(words=st.lists(st.text(alphabet=ASCII, max_size=8), min_size=2, max_size=200, unique=True))
def test_the_order_is_nodes_localecompare_for_any_ascii_text(words) -> None:
    script = (
        "const w=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify([...w].sort((a,b)=>a.localeCompare(b))))"
    )
    node = subprocess.run(
        ["node", "-e", script], input=json.dumps(words), capture_output=True, text=True, check=True
    )
    assert sorted(words, key=locale_key) == json.loads(node.stdout)
