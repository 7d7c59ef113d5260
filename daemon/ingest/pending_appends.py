"""Corpus appends whose batch never committed (their writer died or lost its lease first), cut
off by the next holder of the workspace lock before it touches the corpus: an ingest before it
appends, a forget before it rewrites a day file. A forget that rewrote the file first would
carry those lines into the new file, where no cut-back finds them (it leaves a replaced file
alone), and the retry would stage them a second time."""

from __future__ import annotations

import logging
from pathlib import Path

from memoryd.ingest.corpus import CorpusAppender
from memoryd.store.corpus_files import clear_pending_appends, pending_appends
from memoryd.store.db import FenceToken, Store

log = logging.getLogger("memoryd.ingest")


async def cut_off_uncommitted(
    agent: str, store: Store, workspace: Path, fence: FenceToken, corpus: CorpusAppender | None = None
) -> int:
    """Under the lease of `fence`: cut every pending append off its day file; bytes removed."""
    pending = await store.read(pending_appends)
    if not pending:
        return 0
    removed = (corpus or CorpusAppender(workspace)).cut_back(pending)
    await store.write(clear_pending_appends, None, fence=fence)
    # A warning only when bytes went: a row whose append never happened is no news, and a CLI
    # command prints warnings on stderr beside its own one line.
    log.log(
        logging.WARNING if removed else logging.INFO,
        "agent %s: cut %d uncommitted corpus bytes off after an interrupted sweep",
        agent,
        removed,
    )
    return removed
