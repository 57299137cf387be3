"""Make untrusted text (server answers, logs, labels) safe to put in markdown and mermaid.

Everything that came from a server, a container log or Prometheus labels is untrusted: it
may contain backticks that close a fence, pipes that split a table cell, HTML that GitHub
would interpret, mermaid syntax, or secrets. Every helper here first **redacts** secrets
(API keys, ``Authorization:`` header values, ``sk-...``-looking tokens, ``?api_key=``
query values) and then escapes for its destination.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization / Proxy-Authorization header values, whatever the scheme
    (re.compile(r"(?i)\b((?:proxy-)?authorization)\s*[:=]\s*[^\r\n]+"), rf"\1: {REDACTED}"),
    # bearer tokens standing alone
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), f"Bearer {REDACTED}"),
    # OpenAI-style keys: sk-..., sk-proj-..., also hf_ tokens
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    # key=value / "key": "value" pairs whose name says secret
    (
        re.compile(
            r"(?i)\b([\w-]*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|hf[_-]?token"
            r"|client[_-]?secret|secret[_-]?key|password|passwd)|token|secret)\b"
            r"(\"?\s*[:=]\s*\"?)([^\s\"',;&}]+)"
        ),
        rf"\1\2{REDACTED}",
    ),
)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def redact(text: str) -> str:
    """Replace secrets in ``text`` by ``[REDACTED]``; strip ANSI codes and control chars."""
    text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+!|~])")


def inline(text: object, max_len: int = 300) -> str:
    """Untrusted text for one line of markdown (also safe inside a table cell).

    Redacts, collapses newlines, HTML-escapes ``& < >``, backslash-escapes markdown
    punctuation (backticks, pipes, emphasis, links) and truncates to ``max_len`` chars.
    """
    s = redact(str(text))
    s = " ".join(s.split())
    if len(s) > max_len:
        s = s[: max_len - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _INLINE_SPECIAL.sub(r"\\\1", s)


def code(text: object, max_len: int = 300) -> str:
    """Untrusted text as inline code: ``<code>`` with HTML escaping.

    A backtick span cannot hold every string safely inside a table (pipes split cells even
    inside backticks on GitHub), so this uses ``<code>`` with entities, which GitHub renders
    the same way and which no input can break out of.
    """
    s = redact(str(text))
    s = " ".join(s.split())
    if len(s) > max_len:
        s = s[: max_len - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("|", "&#124;").replace("`", "&#96;").replace("\\", "&#92;")
    s = s.replace("*", "&#42;").replace("_", "&#95;").replace("[", "&#91;").replace("]", "&#93;")
    return f"<code>{s}</code>"


def fenced(text: str, lang: str = "text", max_lines: int = 60) -> str:
    """Untrusted multi-line text as a fenced code block no content can close early.

    The fence is one backtick longer than the longest backtick run in the text (at least
    three). Secrets are redacted; only the last ``max_lines`` lines are kept.
    """
    s = redact(text)
    lines = s.splitlines()
    if len(lines) > max_lines:
        lines = ["…", *lines[-max_lines:]]
    s = "\n".join(lines)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


_MERMAID_OK = re.compile(r"[^A-Za-z0-9 .,+=/%-]")


def mermaid_label(text: object, max_len: int = 60) -> str:
    """Untrusted text for a mermaid label: only ``[A-Za-z0-9 .,+=/%-]`` survive.

    Colons, semicolons, quotes, brackets, ``#`` and newlines all carry meaning in mermaid
    syntax; they become spaces (underscores become spaces too). Never empty.
    """
    s = redact(str(text))
    s = _MERMAID_OK.sub(" ", s)
    s = " ".join(s.split())[:max_len].strip()
    return s or "event"
