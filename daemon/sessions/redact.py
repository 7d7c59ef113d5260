"""Secrets out of memory: the one rule for text that enters memoryd from outside.

Every message line exported from a transcript (ingestion, backfill, transcript indexing) and
every object written through the memory tool passes through `redact_secrets` before anything
is stored, hashed or indexed, so a credential pasted into a conversation never reaches the
session corpus, a staged entry, `MEMORY.md`, a diary, an index chunk or an FTS segment. The
reference writes `OPENAI_API_KEY=***` for `OPENAI_API_KEY=sk-…`; the rules below keep the
name of an assignment and mask its value the same way, and mask a bare credential whole.

Rules (docs/operator-guide.md, "Secrets in transcripts", lists them for operators):
* PEM private key blocks (`-----BEGIN … PRIVATE KEY-----` up to its END line, or to the end
  of the text when it was cut);
* a password in a URL (`scheme://user:pass@host` -> `scheme://user:***@host`);
* assignments whose name says credential (`OPENAI_API_KEY=…`, `token=…`, `db.password: …`,
  `"client_secret": "…"`): the value is masked, the name kept;
* `Authorization: Bearer|Basic …` and a bare `Bearer <token>`;
* provider key formats: OpenAI/Anthropic `sk-…` (`sk-proj-`, `sk-ant-`), Stripe
  `sk_live_`/`rk_live_`/`sk_test_`/`rk_test_`/`whsec_`, AWS access key ids (`AKIA…`, `ASIA…`),
  GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab `glpat-`, Slack
  `xox[baprs]-`/`xapp-`, Google `AIza…`, npm `npm_`, Hugging Face `hf_`, and JWTs
  (`eyJ….eyJ….…`).

It runs on every message, so each rule first tests for a substring its matches must contain
(most text meets no regular expression at all). The result is stable: redacting redacted text changes nothing.
"""

from __future__ import annotations

import re

MASK = "***"
# How far past a caller's cut a message is read before masking: longer than any credential
# the rules match by its shape, so a secret that starts before the cut is masked, not split.
REDACT_LOOKAHEAD = 256

# Assignment names: a name is a credential's when one of its parts (split at `_`, `.`, `-`)
# ends with one of these words (`accessToken`, `client_secret`, `DB_PASSWORD`)...
_CRED_ENDINGS = ("token", "secret", "password", "passwd", "pwd", "credential", "credentials")
# ...or is `key` with a qualifier (`api_key`, `apiKey`, `private.key`), or an upper-case
# environment variable's `…KEY` part (`OPENAI_API_KEY`). `key` alone is too common ("sort key").
_KEY_QUALIFIERS = frozenset(
    [
        "api",
        "access",
        "secret",
        "private",
        "client",
        "signing",
        "encryption",
        "master",
        "auth",
        "app",
        "service",
        "account",
    ]
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_MAX = 128  # a longer run of name characters is not a variable name
_LOWER_HINTS = ("key", "token", "secret", "passw", "pwd", "credential")
_PARTS = re.compile(r"[_.-]")
_SEPARATOR = re.compile(r"[=:]")
# An assignment's value: one quoted word, or a bare run up to whitespace or a delimiter.
_VALUE = re.compile(r"""\s*(?:"[^"\s]*"|'[^'\s]*'|[^\s"'&,;]+)""")

_PEM = re.compile(
    r"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----).*?"
    r"(?:(-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)|\Z)",
    re.DOTALL,
)
# scheme://user:password@host: the password runs to the last '@' before whitespace or a '/',
# so an '@' inside it is masked too.
_URL_PASSWORD = re.compile(r"(://[^\s/:@]+:)[^\s/]+(?=@)")
_BEARER = re.compile(r"((?:Bearer|bearer|Basic)\s+)[A-Za-z0-9._~+/=-]{16,}")

# Provider key formats, each with a literal its match contains. A text is tested for the
# literal (a substring test) before the regex runs; the literals are grouped by a character
# they share, so a text without "-" or "_" skips most of them in one test. The lookbehinds
# reject a match inside a longer word ("task-force" is not `sk-…`).
_B = r"(?<![A-Za-z0-9_-])"
_Providers = tuple[tuple[str, re.Pattern[str]], ...]


def _providers(*pairs: tuple[str, str]) -> _Providers:
    return tuple((hint, re.compile(pattern)) for hint, pattern in pairs)


_WITH_DASH = _providers(
    ("sk-", _B + r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"),
    ("glpat-", _B + r"glpat-[A-Za-z0-9_-]{20,}"),
    ("xox", _B + r"xox[baprs]-[A-Za-z0-9-]{10,}"),
    ("xapp-", _B + r"xapp-[A-Za-z0-9-]{10,}"),
)
_WITH_UNDERSCORE = _providers(
    ("k_", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("whsec_", _B + r"whsec_[A-Za-z0-9]{16,}"),
    ("gh", _B + r"gh[pousr]_[A-Za-z0-9]{30,}"),
    ("github_pat_", _B + r"github_pat_[A-Za-z0-9_]{22,}"),
    ("npm_", _B + r"npm_[A-Za-z0-9]{36}"),
    ("hf_", _B + r"hf_[A-Za-z0-9]{30,}"),
)
_WITH_CAPITAL_A = _providers(
    # AWS access key ids (long-term AKIA, temporary ASIA); other AWS ids name, not unlock.
    ("AKIA", _B + r"AKIA[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("ASIA", _B + r"ASIA[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("AIza", _B + r"AIza[0-9A-Za-z_-]{35}"),
)
_JWT = re.compile(_B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")


def _redact_providers(text: str, providers: _Providers) -> str:
    for hint, pattern in providers:
        if hint in text:
            text = pattern.sub(MASK, text)
    return text


def _is_credential_name(name: str) -> bool:
    parts = _PARTS.split(name)
    previous = ""
    for part in parts:
        lower = part.lower()
        if lower.endswith(_CRED_ENDINGS):
            return True
        if lower.endswith("key"):
            if lower == "key" and previous in _KEY_QUALIFIERS:
                return True
            if lower[:-3] in _KEY_QUALIFIERS:
                return True
            if part.endswith("KEY") and part.isupper() and (len(parts) > 1 or part == "KEY"):
                return True
        previous = lower
    return False


def _redact_assignments(text: str) -> str:
    """NAME=value, NAME: value, "name": "value" with a credential's name: the value masked."""
    out: list[str] = []
    done = 0  # text[:done] is already in `out`
    for sep in _SEPARATOR.finditer(text):
        at = sep.start()
        if at < done:
            continue  # inside a value already masked
        after = at + 1
        if text.startswith("//", after):
            continue  # a URL's scheme, not an assignment
        if text[at] == ":" and text.startswith("=", after):
            after += 1  # :=
        end = at
        while end > done and text[end - 1] == " ":
            end -= 1
        if end > done and text[end - 1] in "\"'":
            end -= 1
        start = end
        while start > done and text[start - 1] in _NAME_CHARS and end - start <= _NAME_MAX:
            start -= 1
        if start == end or end - start > _NAME_MAX or not _is_credential_name(text[start:end]):
            continue
        if start > done and text[start - 1] in "\"'":
            start -= 1
        value = _VALUE.match(text, after)
        if value is None:
            continue
        spaces = len(value.group(0)) - len(value.group(0).lstrip())
        body = value.group(0)[spaces:]
        quote = body[0] if body[0] in "\"'" and len(body) > 1 else ""
        out.append(text[done : after + spaces])
        out.append(f"{quote}{MASK}{quote}")
        done = value.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _pem(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}{match.group(2) or ''}"


def redact_secrets(text: str) -> str:
    """`text` with every credential the rules above recognise replaced by `***`."""
    # Each rule runs only when a character or substring all its matches hold is present; the
    # tests are ordered so that plain prose is done after a handful of substring searches.
    if "-" in text:
        if "-----BEGIN" in text:
            text = _PEM.sub(_pem, text)
        text = _redact_providers(text, _WITH_DASH)
    if "_" in text:
        text = _redact_providers(text, _WITH_UNDERSCORE)
    if "@" in text and "://" in text:
        text = _URL_PASSWORD.sub(rf"\g<1>{MASK}", text)
    if "=" in text or ":" in text:
        lower = text.lower()
        if any(hint in lower for hint in _LOWER_HINTS):
            text = _redact_assignments(text)
    if "earer " in text or "Basic " in text:
        text = _BEARER.sub(rf"\g<1>{MASK}", text)
    if "A" in text:
        text = _redact_providers(text, _WITH_CAPITAL_A)
    if "eyJ" in text:
        text = _JWT.sub(MASK, text)
    return text
