"""The index and reset reports (CLI JSON and job results; field order is the JSON order).

The search and entry reports are plain data (daemon/index/search_report.py: a search loads no
pydantic).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memoryd.stored_form import Content


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class SourceNote(_Model):
    """One file or session the run did not (or no longer) index, and why."""

    path: Annotated[str, Content]
    source: str
    session_id: Annotated[str | None, Content] = None
    reason: str


class FileCounts(_Model):
    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    discarded: int = 0


class IndexReport(_Model):
    agent_id: str
    force: bool
    ok: bool = True  # False when prepared work was discarded at publication (see `discarded`)
    provider: str
    model: str
    vector_backend: str | None = None  # "sqlite-vec" | "numpy" | None (FTS only)
    revision_before: int = 0
    revision_after: int = 0
    files: FileCounts = Field(default_factory=FileCounts)
    chunks_written: int = 0
    chunks_removed: int = 0
    embeddings_computed: int = 0
    embeddings_cached: int = 0
    discarded: list[SourceNote] = Field(default_factory=list)  # refused by the pre-publish checks
    removed: list[SourceNote] = Field(default_factory=list)
    skipped: list[SourceNote] = Field(default_factory=list)
    warnings: Annotated[list[str], Content] = Field(default_factory=list)


class ResetReport(_Model):
    """`memoryd reset`: what was dropped from the derived index (lineage and forgotten records stay)."""

    agent_id: str
    index_sources: int
    index_chunks: int
    fts_rows: int
    vector_rows: int
    embedding_cache_rows: int
