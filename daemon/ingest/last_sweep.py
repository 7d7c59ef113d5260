"""When an agent's last ingest sweep ended, in a file beside its store: a quiet sweep (nothing
changed) writes no checkpoint, so the checkpoints cannot tell. A time, never memory text."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.failpoints import failpoint
from memoryd.fileio import atomic_temp, make_private_dirs, remove_leftover_temps

FILE_NAME = "last-sweep"


def record_sweep(agent_state_dir: Path, at_ms: int) -> None:
    make_private_dirs(agent_state_dir)
    path = agent_state_dir / FILE_NAME
    # One temporary file per write: two sweeps of an agent can end at once in one process (a
    # live one and a requested one), and a shared name let one rename the other's.
    remove_leftover_temps(agent_state_dir, of=FILE_NAME)
    with atomic_temp(path) as tmp:
        tmp.write_text(f"{at_ms}\n", encoding="ascii")
        failpoint("ingest.last_sweep.write")
        os.replace(tmp, path)  # a reader sees the old time or the new one, never half of one


def last_sweep_ms(agent_state_dir: Path) -> int | None:
    try:
        return int((agent_state_dir / FILE_NAME).read_text(encoding="ascii").strip())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
