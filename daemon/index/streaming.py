"""Publishing batches as they are prepared, in one transaction for as many as fit.

    await publish_streamed(store, batches, ctx, fence, on_commit)

The event loop iterates `batches` (their preparation: a worker process or a thread) and hands
each to the store's thread, where `publish_stream` (publish.py) writes it inside a transaction
that stays open for the next one. A run's batches then share one commit and one FTS5 flush
instead of one each, and the first batch is written while the next ones are still prepared. A
transaction ends when its batches hold `max_chunks` chunks (the next one takes the rest) or
the batches end.

`batches` must not use the store: its thread waits in the open transaction for them. (A run
with an embedder reads the embedding cache between batches, so it publishes batch by batch.)

At most MAX_WAITING batches wait for the store's thread: while publication is slower than
preparation, the event loop stops taking batches, and the worker waits on its pipe, instead of
a large first sync holding most of its prepared text in memory at once.

If iterating the batches fails or is cancelled, the open transaction rolls back: every file is
still written whole or not at all, and the transactions committed before it stay.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio

from memoryd.index.publish import PreparedFile, PublishContext, StreamOutcome, publish_stream
from memoryd.store.db import FenceToken, Store

Batch = Sequence[PreparedFile]
MAX_WAITING = 8  # batches handed over and not yet taken (groups of 256 KiB of transcript)


class StreamStopped(Exception):
    """The batches stopped before their end (an error or a cancellation of the run)."""


_END = object()
_STOPPED = object()


class _Feed:
    """Batches put by the event loop and taken, blocking, on the store's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._items: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._loop = loop
        self._room: asyncio.Future[None] | None = None  # set when the store's thread takes one
        self._stopped = False  # the batches still waiting are not published

    def put(self, batch: Batch) -> None:
        self._items.put(batch)

    async def room(self, write: asyncio.Task[StreamOutcome]) -> None:
        """Until fewer than MAX_WAITING batches wait, or `write` ended (it takes no more)."""
        while self._items.qsize() >= MAX_WAITING and not write.done():
            self._room = self._loop.create_future()
            either: list[asyncio.Future[Any]] = [write, self._room]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)

    def _made_room(self) -> None:
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    def end(self) -> None:
        self._items.put(_END)

    def stop(self) -> None:
        self._stopped = True
        self._items.put(_STOPPED)  # wakes a take that waits

    def take(self) -> Batch | None:
        item = self._items.get()
        if self._stopped or item is _STOPPED:
            self._items.put(_STOPPED)  # for any later take
            raise StreamStopped("the index run's batches stopped; its open transaction rolls back")
        if item is _END:
            self._items.put(item)
            return None
        try:
            self._loop.call_soon_threadsafe(self._made_room)
        except RuntimeError:
            pass  # the event loop has closed: nobody waits for room any more
        return item  # type: ignore[return-value]


async def publish_streamed(
    store: Store,
    batches: AsyncIterator[Batch],
    ctx: PublishContext,
    fence: FenceToken,
    max_chunks: int,
    on_commit: Callable[[StreamOutcome], None],
) -> None:
    """Publish `batches` as they come; `on_commit` hears of each committed transaction."""
    feed = _Feed(asyncio.get_running_loop())

    def begin(ctx: PublishContext) -> asyncio.Task[StreamOutcome]:
        return asyncio.ensure_future(store.write(publish_stream, feed.take, ctx, max_chunks, fence=fence))

    def committed(result: StreamOutcome, ctx: PublishContext) -> PublishContext:
        on_commit(result)
        if ctx.rebuild_revision is None:
            return ctx
        return replace(ctx, rebuild_revision=result.revision)  # the next transaction's fence

    write = begin(ctx)
    try:
        async for batch in batches:
            await feed.room(write)
            if write.done():  # it took its share: the next transaction takes the rest
                ctx = committed(write.result(), ctx)
                write = begin(ctx)
            feed.put(batch)
        feed.end()
        while not (result := await write).ended:
            ctx = committed(result, ctx)
            write = begin(ctx)
        committed(result, ctx)
    except BaseException:
        feed.stop()
        with anyio.CancelScope(shield=True):
            await asyncio.wait([write])  # rolled back on the store's thread
        if not write.cancelled():
            write.exception()  # retrieved: the error that ends the run is the one raised here
        raise
