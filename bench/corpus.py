"""A synthetic but realistic session store, in the layout memoryd reads (DESIGN §3):

    <root>/agents/<agent>/sessions/sessions.json          sessionKey -> SessionEntry
    <root>/agents/<agent>/sessions/<sessionId>.jsonl      pi v3 transcript (the one writer:
                                                          daemon/sessions/transcript_writer.py)
    <root>/agents/<agent>/sessions/<id>.jsonl.reset.<ts>  retained archives (and .deleted.)

The mix follows what an assistant gateway accumulates: direct chats on several channels,
group chats with several participants, gmail/email/webhook hook sessions, cron runs,
sub-agents, and reset/deleted archives. Message text is Zipf-distributed over a synthetic
vocabulary (so full-text posting lists have a realistic skew) with lengths of 50–2,000
characters. Everything is drawn from one seeded generator, so a scale always produces the
same bytes, and a finished corpus is cached under bench/.cache/<scale>/.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from memoryd.sessions.transcript_writer import Turn, encode_lines, message_line, session_header

CACHE_DIR = Path(os.environ.get("MEMORYD_BENCH_CACHE") or Path(__file__).resolve().parent / ".cache")
CORPUS_VERSION = 2  # bump when the generator's output changes, so stale caches are rebuilt

# Sessions per scale (the 1k / 10k / 100k); "tiny" is for the smoke test.
SCALES: dict[str, int] = {"tiny": 40, "small": 1_000, "medium": 10_000, "large": 100_000}
AGENTS = ("main", "ops", "research", "support")
VOCABULARY_SIZE = 30_000
MIN_MESSAGE_CHARS = 50
MAX_MESSAGE_CHARS = 2_000
DAY_MS = 86_400_000
# One session per agent has exactly this many messages: the forget scenarios' target.
TARGET_MESSAGES = 100

# Share of sessions by kind. Hook sources use the reference's exact names.
KIND_WEIGHTS = (
    ("direct", 0.42),
    ("group", 0.18),
    ("gmail", 0.07),
    ("email", 0.05),
    ("webhook", 0.04),
    ("cron", 0.16),
    ("subagent", 0.05),
    ("heartbeat", 0.03),
)
DIRECT_CHANNELS = ("telegram", "signal", "slack", "discord", "whatsapp", "webchat")
GROUP_CHANNELS = ("slack", "discord", "matrix", "telegram")
FIRST_NAMES = (
    "nora",
    "omar",
    "lena",
    "ravi",
    "mia",
    "jonas",
    "aiko",
    "tomas",
    "ines",
    "kofi",
    "sara",
    "li",
    "marta",
    "yusuf",
    "elena",
    "pablo",
    "hana",
    "felix",
    "zara",
    "ivan",
)
CRON_JOBS = ("daily-digest", "inbox-triage", "backup-check", "standup-notes", "weekly-review")


@dataclass
class Manifest:
    scale: str
    sessions: int
    version: int = CORPUS_VERSION
    messages: int = 0  # message lines in live transcripts
    archive_messages: int = 0
    transcript_bytes: int = 0
    archives: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    agents: dict[str, int] = field(default_factory=dict)  # live sessions per agent
    targets: dict[str, str] = field(default_factory=dict)  # agent -> forget target session id
    participants: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class Corpus:
    root: Path  # the sessions_root
    manifest: Manifest

    def sessions_dir(self, agent: str) -> Path:
        return self.root / "agents" / agent / "sessions"

    def transcripts(self, agent: str | None = None) -> list[Path]:
        """Live transcripts (those sessions.json names), in a stable order."""
        out: list[Path] = []
        for a in [agent] if agent else list(self.manifest.agents):
            d = self.sessions_dir(a)
            entries = orjson.loads((d / "sessions.json").read_bytes())
            out += sorted(d / f"{e['sessionId']}.jsonl" for e in entries.values())
        return out


class _Text:
    """Zipf-distributed words from a fixed synthetic vocabulary."""

    SYLLABLES = (
        "ka",
        "lo",
        "mi",
        "ren",
        "to",
        "sa",
        "vel",
        "dor",
        "an",
        "is",
        "qu",
        "em",
        "bra",
        "ti",
        "no",
        "fel",
        "ur",
        "ga",
        "pe",
        "sol",
        "mar",
        "ix",
        "ho",
        "len",
        "zu",
        "ar",
        "om",
        "ne",
        "ri",
        "cal",
    )
    # Real words near the head of the distribution make "very common term" searches meaningful.
    COMMON = (
        "the",
        "and",
        "to",
        "of",
        "a",
        "in",
        "is",
        "for",
        "that",
        "on",
        "with",
        "it",
        "we",
        "this",
        "be",
        "at",
        "meeting",
        "project",
        "deploy",
        "remember",
        "invoice",
        "report",
        "team",
        "schedule",
    )

    def __init__(self, rng: random.Random):
        self.rng = rng
        words = list(self.COMMON)
        seen = set(words)
        for n in itertools.count():
            if len(words) >= VOCABULARY_SIZE:
                break
            w = "".join(
                self.SYLLABLES[(n // len(self.SYLLABLES) ** i) % len(self.SYLLABLES)]
                for i in range(1 + (n % 3) + (n > 900))
            )
            if w not in seen:
                seen.add(w)
                words.append(w)
        self.words = words
        weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(words))]
        self.cum = list(itertools.accumulate(weights))

    def sentence_block(self, chars: int) -> str:
        # ~6.5 chars per word with its space; draw enough words, then cut at a word boundary.
        words = self.rng.choices(self.words, cum_weights=self.cum, k=chars // 5 + 2)
        out: list[str] = []
        size = 0
        for i, w in enumerate(words):
            if size + len(w) + 1 > chars and size >= MIN_MESSAGE_CHARS - 2:
                break
            out.append(w.capitalize() if i == 0 or out[-1].endswith(".") else w)
            size += len(w) + 1
            if self.rng.random() < 0.08:
                out[-1] += "."
        text = " ".join(out)
        return text if text.endswith(".") else text + "."

    def message(self) -> str:
        # Log-normal lengths (median ~260 chars) clipped to 50–2,000, as chat turns are.
        chars = int(math.exp(self.rng.gauss(5.55, 0.75)))
        return self.sentence_block(min(MAX_MESSAGE_CHARS, max(MIN_MESSAGE_CHARS, chars)))


# --- staged-entry texts (the dreaming benches) -----------------------------------------------------

# "varied": each entry draws its 8-20 words from 3,000 distinct ones, so two entries rarely share
# a word. "low_vocabulary": ordinary chat from 56 common words, so every entry shares words with
# thousands of others (the shape that makes an exact near-duplicate join compare nearly every
# pair). In both, a fifth restate an earlier entry with one word changed, so a near-duplicate
# grouping has groups to find.
TEXTS = ("varied", "low_vocabulary")
VARIED_WORDS = tuple(f"w{i}" for i in range(3_000))
# Everyday chat's few dozen words, which most turns repeat.
_CHAT = (
    "i you the a to and it is that of we for in on this be have do not are with can what just so my "
    "me your was will at but get if about know think like ok yes no all one they there would up out "
    "should good time go going now when then"
)
CHAT_WORDS = tuple(_CHAT.split())


def staged_texts(n: int, rng: random.Random, text: str = "varied") -> list[str]:
    """`n` staged snippets of the kind `text` (TEXTS), drawn from `rng`."""
    if text not in TEXTS:
        raise ValueError(f"text {text!r}: one of {', '.join(TEXTS)}")
    vocabulary = VARIED_WORDS if text == "varied" else CHAT_WORDS
    out: list[str] = []
    for i in range(n):
        if out and rng.random() < 0.2:
            words = rng.choice(out).split()
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        else:
            words = rng.sample(vocabulary, rng.randint(8, 20))
        if text == "varied":  # (the draws of the dream bench before the chat text existed)
            out.append(" ".join([f"note{i}", *words]) if rng.random() < 0.5 else " ".join(words))
        else:
            out.append(" ".join(words))
    return out


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _archive_ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H-%M-%S.") + f"{ms % 1000:03d}Z"


class _Writer:
    def __init__(self, root: Path, manifest: Manifest, rng: random.Random):
        self.root = root
        self.m = manifest
        self.rng = rng
        self.text = _Text(rng)
        self.people = [
            f"{n}{'' if i == 0 else i}" for i in range(max(1, manifest.sessions // 400)) for n in FIRST_NAMES
        ]
        self.now_ms = (int(time.time() * 1000) // DAY_MS) * DAY_MS
        manifest.participants = self.people[:10]
        self.used_keys: set[str] = set()

    def _turn(self, sid: str, i: int, ts: int, role: str, speaker: str | None, owner: bool) -> dict[str, Any]:
        body = self.text.message()
        content: str | list[dict[str, Any]]
        meta: dict[str, Any] = {}
        fields: dict[str, Any] = {}
        if role == "user":
            content = body if speaker is None else f"{speaker}: {body}"
            if owner:
                meta["senderIsOwner"] = True
        elif role == "assistant":
            if self.rng.random() < 0.08:  # a tool call, then its result on the next line
                content = [
                    {"type": "text", "text": body},
                    {
                        "type": "toolCall",
                        "id": f"t{i}",
                        "name": "web_search",
                        "arguments": {"query": " ".join(body.split()[:4])},
                    },
                ]
            elif self.rng.random() < 0.3:
                content = [{"type": "text", "text": body}]
            else:
                content = body
        else:  # toolResult
            content = [{"type": "text", "text": body}]
            fields = {"toolCallId": f"t{i - 1}", "toolName": "web_search", "isError": False}
            meta["resultContentSource"] = "network"
        prefix = sid[:8]
        return message_line(
            f"{prefix}-{i}",
            f"{prefix}-{i - 1}" if i else None,
            Turn(role, content, ts, meta=meta, fields=fields),
            timestamp=_iso(ts),
        )

    def transcript(self, path: Path, sid: str, start_ms: int, n: int, kind: str, speakers: list[str]) -> int:
        lines = [session_header(sid, timestamp=_iso(start_ms))]
        i = 0
        ts = start_ms
        messages = 0
        while messages < n:
            ts += self.rng.randint(2_000, 90_000)
            if messages % 2 == 0:
                speaker = self.rng.choice(speakers) if kind == "group" and speakers else None
                owner = kind in ("direct", "group") and (speaker is None or speaker == speakers[0])
                lines.append(self._turn(sid, i, ts, "user", speaker, owner))
            else:
                line = self._turn(sid, i, ts, "assistant", None, False)
                lines.append(line)
                if isinstance(line["message"]["content"], list) and len(line["message"]["content"]) > 1:
                    i += 1
                    messages += 1
                    lines.append(self._turn(sid, i, ts + 500, "toolResult", None, False))
            i += 1
            messages += 1
        data = encode_lines(lines)
        path.write_bytes(data)
        self.m.transcript_bytes += len(data)
        return messages

    def session(
        self, agent: str, n: int, kind: str, forced_messages: int | None = None
    ) -> tuple[str, dict[str, Any], int, str]:
        rng = self.rng
        sid = (
            f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-"
            f"{0x8000 | rng.getrandbits(14):04x}-{rng.getrandbits(48):012x}"
        )
        start = self.now_ms - rng.randint(1, 30) * DAY_MS + rng.randint(0, DAY_MS - 1)
        entry: dict[str, Any] = {"sessionId": sid, "createdAt": start}
        speakers: list[str] = []
        if kind == "direct":
            person = rng.choice(self.people)
            channel = rng.choice(DIRECT_CHANNELS)
            key = f"agent:{agent}:{channel}:direct:{person}"
            if key in self.used_keys:  # one live window per key: later chats are threads
                key += f":thread:{n}"
            entry.update(
                sessionKind="interactive",
                chatType="direct",
                channel=channel,
                createdVia="channel",
                participants=[{"actorId": person, "namespace": '{"type":"profile"}'}],
                origin={"provider": channel, "chatType": "direct", "from": person},
            )
            messages = int(rng.lognormvariate(2.3, 0.8)) + 2
        elif kind == "group":
            channel = rng.choice(GROUP_CHANNELS)
            speakers = rng.sample(self.people, k=min(len(self.people), rng.randint(3, 7)))
            key = f"agent:{agent}:{channel}:group:room-{n}"
            entry.update(
                sessionKind="interactive",
                chatType="group",
                channel=channel,
                createdVia="channel",
                participants=[
                    {
                        "actorId": p,
                        "namespace": {"type": "remote", "pluginId": channel, "domain": f"{channel}.example"},
                    }
                    for p in speakers
                ],
            )
            messages = int(rng.lognormvariate(2.7, 0.7)) + 2
        elif kind in ("gmail", "email", "webhook"):
            source = kind
            sender = f"{rng.choice(self.people)}@example.com"
            key = f"hook:gmail:{sid[:8]}" if kind == "gmail" else f"hook:{kind}:{sid[:8]}"
            entry.update(
                sessionKind="interactive",
                chatType="direct",
                hookExternalContentSource=source,
                createdVia="plugin",
                origin={"provider": kind, "from": sender},
                participants=[{"actorId": sender, "namespace": '{"type":"observation"}'}],
            )
            messages = rng.randint(2, 6)
        elif kind == "cron":
            job = rng.choice(CRON_JOBS)
            key = f"agent:{agent}:cron:{job}:run:{n}"
            entry.update(sessionKind="cron", createdVia="cron")
            messages = rng.randint(2, 6)
        elif kind == "subagent":
            key = f"agent:{agent}:subagent:{sid[:8]}"
            entry.update(sessionKind="subagent", spawnedBy=f"agent:{agent}:main", createdVia="spawn")
            messages = rng.randint(4, 16)
        else:  # heartbeat
            key = f"agent:{agent}:{sid[:8]}:heartbeat"
            entry.update(sessionKind="heartbeat", createdVia="internal")
            messages = 2
        if forced_messages is not None:
            messages = forced_messages
        self.used_keys.add(key)
        messages = min(messages, 400)
        d = self.root / "agents" / agent / "sessions"
        written = self.transcript(d / f"{sid}.jsonl", sid, start, messages, kind, speakers)
        entry["updatedAt"] = start + written * 45_000
        self.m.messages += written
        self.m.by_kind[kind] = self.m.by_kind.get(kind, 0) + 1
        if rng.random() < 0.08:  # an earlier generation of this session, kept as a reset archive
            self.archive(d, sid, "reset", start - DAY_MS, kind, speakers)
        return key, entry, written, sid

    def archive(self, d: Path, sid: str, reason: str, ms: int, kind: str, speakers: list[str]) -> None:
        name = f"{sid}.jsonl.{reason}.{_archive_ts(ms)}"
        before = self.m.messages
        self.m.archive_messages += self.transcript(
            d / name, sid, ms - 3_600_000, self.rng.randint(2, 12), kind, speakers
        )
        self.m.messages = before
        self.m.archives += 1


def generate(root: Path, scale: str, *, sessions: int | None = None, seed: int = 20261129) -> Manifest:
    """Write a corpus of `sessions` sessions (default: the scale's) under `root`; return its manifest."""
    started = time.perf_counter()
    total = sessions if sessions is not None else SCALES[scale]
    manifest = Manifest(scale=scale, sessions=total)
    rng = random.Random(seed)
    w = _Writer(root, manifest, rng)
    kinds = [k for k, _ in KIND_WEIGHTS]
    weights = [wt for _, wt in KIND_WEIGHTS]
    per_agent = {
        a: max(1, round(total * share)) for a, share in zip(AGENTS, (0.4, 0.25, 0.2, 0.15), strict=True)
    }
    per_agent["main"] += total - sum(per_agent.values())
    for agent, count in per_agent.items():
        d = root / "agents" / agent / "sessions"
        d.mkdir(parents=True, exist_ok=True)
        store: dict[str, dict[str, Any]] = {}
        _, entry, _, sid = w.session(agent, 0, "direct", forced_messages=TARGET_MESSAGES)
        entry.update(
            channel="signal", participants=[{"actorId": "bench-target", "namespace": '{"type":"profile"}'}]
        )
        store[f"agent:{agent}:signal:direct:bench-target"] = entry
        manifest.targets[agent] = sid
        for n in range(1, count):
            kind = rng.choices(kinds, weights=weights)[0]
            key, entry, _, sid = w.session(agent, n, kind)
            if rng.random() < 0.03:  # deleted sessions: only a .deleted archive remains
                p = d / f"{sid}.jsonl"
                p.rename(d / f"{sid}.jsonl.deleted.{_archive_ts(entry['updatedAt'])}")
                manifest.archives += 1
                continue
            store[key] = entry
        (d / "sessions.json").write_bytes(orjson.dumps(store, option=orjson.OPT_INDENT_2))
        manifest.agents[agent] = len(store)
    manifest.messages = _count_live_messages(root, manifest)
    manifest.seconds = round(time.perf_counter() - started, 2)
    return manifest


def _count_live_messages(root: Path, manifest: Manifest) -> int:
    corpus = Corpus(root, manifest)
    total = 0
    for path in corpus.transcripts():
        with open(path, "rb") as fh:
            total += sum(1 for line in fh if line.startswith(b'{"type":"message"'))
    return total


def ensure_corpus(scale: str, cache_dir: Path = CACHE_DIR) -> Corpus:
    """The cached corpus of `scale`, generated first if missing or from another generator version."""
    base = cache_dir / scale
    manifest_path = base / "manifest.json"
    if manifest_path.exists():
        data = orjson.loads(manifest_path.read_bytes())
        if data.get("version") == CORPUS_VERSION:
            return Corpus(base / "sessions", Manifest(**data))
    tmp = cache_dir / f".{scale}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    manifest = generate(tmp / "sessions", scale)
    (tmp / "manifest.json").write_bytes(orjson.dumps(asdict(manifest), option=orjson.OPT_INDENT_2))
    shutil.rmtree(base, ignore_errors=True)
    tmp.rename(base)
    return Corpus(base / "sessions", manifest)
