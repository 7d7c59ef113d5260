"""The erasure verifier's text matching: the needles of an erased subject of N messages (its
snippets and hash prefixes) counted over 2 MB of stored text, and its snippets over the same
bytes (the raw-bytes check). Baseline: the same matching for a subject of 10 messages over the
same text. Target: at most 5x that, at every subject size: the cost follows the text, not what
the subject said (an erasure's subject may be thousands of messages). Also reported: the
regular expression of the alternation the verifier used before (up to 1,000 messages; above,
one run would take minutes), and one `bytes.count` of one snippet, the least a pass costs."""

from __future__ import annotations

import re
from collections.abc import Callable

from bench.runner import Context, Row, at_most, info, timed

NAME = "verify_match"
MESSAGES = {"tiny": 200, "small": 1_000, "medium": 4_000, "large": 16_000}
HAYSTACK_CHARS = 2_000_000
CEILING = 5.0
BASELINE_MESSAGES = 10
REGEX_UP_TO = 1_000
WORDS = [f"w{i:03d}{chr(97 + i % 26)}" for i in range(900)]


def missing() -> str | None:
    return None


def _message(seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + k * 13) % len(WORDS)] for k in range(8 + seed % 9)) + f" n{seed}"


def _data(messages: int) -> tuple[list[str], str]:
    subject = [_message(i) for i in range(messages)]
    stored: list[str] = []
    size = 0
    i = 0
    while size < HAYSTACK_CHARS:
        # Mostly other people's text, one line in fifty the subject's.
        line = subject[i % messages] if i % 50 == 0 else _message(10**6 + i)
        stored.append(f'{{"line":{i},"text":"{line}"}}')
        size += len(stored[-1]) + 1
        i += 1
    return subject, "\n".join(stored)


def _matching(contents: list[str], text: str, data: bytes) -> Callable[[], float]:
    from daemon.retention.needles import VerifySubject, compile_needles

    needles = compile_needles(VerifySubject(contents=tuple(contents)))

    def run() -> float:
        return timed(lambda: (needles.hits(text), needles.raw.starts(data) if needles.raw else None))

    return run


def run(ctx: Context) -> list[Row]:
    from daemon.retention.needles import snippets

    messages = MESSAGES[ctx.scale]
    contents, text = _data(messages)
    data = text.encode()
    probe = snippets(contents[:1])[0].encode()
    figure = f"needles of {messages:,} messages over {len(data) / 1e6:.1f} MB"
    fns = [_matching(contents, text, data), _matching(contents[:BASELINE_MESSAGES], text, data)]
    fns.append(lambda: timed(lambda: data.count(probe)))
    if messages <= REGEX_UP_TO:
        old = re.compile("|".join(re.escape(s) for s in sorted(snippets(contents), key=len, reverse=True)))
        fns.append(
            lambda: timed(lambda: sum(1 for _ in old.finditer(text)) + sum(1 for _ in old.finditer(text)))
        )
    new, base, single, *former = ctx.interleaved(*fns)
    rows = [
        at_most(
            NAME, figure + ": time", "s", new, base, CEILING, note=f"baseline: {BASELINE_MESSAGES} messages"
        ),
        info(NAME, "one bytes.count of one snippet over the same bytes", "s", single),
    ]
    if former:
        rows.append(
            info(
                NAME,
                figure + ": the former regular expression of the snippets alone, text and bytes",
                "s",
                former[0],
                new,
            )
        )
    return rows
