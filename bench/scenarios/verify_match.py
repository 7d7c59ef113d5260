"""The erasure verifier's text matching: the needles of an erased subject of N messages (its
snippets and hash prefixes) counted over 2 MB of stored text that quotes ten of its messages
(the same hits at every size), and its snippets over the same bytes (the raw-bytes check).
Baseline: the same matching for a subject of those 10 messages over the same text. Target: at most 5x that, at every subject size: the cost follows the text, not what
the subject said (an erasure's subject may be thousands of messages). Also reported: the
regular expression of the alternation the verifier used before (up to 1,000 messages; above,
one run would take minutes), and one `bytes.count` of one snippet, the least a pass costs."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from bench.runner import Context, Row, at_most, info, timed

NAME = "verify_match"
MESSAGES = {"tiny": 200, "small": 1_000, "medium": 4_000, "large": 16_000}
HAYSTACK_CHARS = 2_000_000
CEILING = 5.0
BASELINE_MESSAGES = 10
REGEX_UP_TO = 1_000
# A vocabulary of 5,000 words drawn with a Zipf-like skew (common words recur, as in chat), so
# the subject's snippets share words and pairs of words with everyone else's text.
WORDS = [f"{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{i:04d}" for i in range(5_000)]
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]


def missing() -> str | None:
    return None


def _message(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choices(WORDS, WEIGHTS, k=8 + seed % 9)) + f" n{seed}"


def _data(messages: int) -> tuple[list[str], str]:
    subject = [_message(i) for i in range(messages)]
    stored: list[str] = []
    size = 0
    i = 0
    while size < HAYSTACK_CHARS:
        # Mostly other people's text; one line in fifty quotes one of the subject's first
        # messages, so a larger subject has more needles but the text the same hits.
        line = subject[i % BASELINE_MESSAGES] if i % 50 == 0 else _message(10**6 + i)
        stored.append(f'{{"line":{i},"text":"{line}"}}')
        size += len(stored[-1]) + 1
        i += 1
    return subject, "\n".join(stored)


def _matching(contents: list[str], text: str, data: bytes) -> Callable[[], float]:
    from memoryd.retention.needles import VerifySubject, compile_needles

    needles = compile_needles(VerifySubject(contents=tuple(contents)))

    def run() -> float:
        return timed(lambda: (needles.hits(text), needles.raw_starts(data)))

    return run


def run(ctx: Context) -> list[Row]:
    from memoryd.retention.needles import snippets

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
