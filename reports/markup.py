"""Markdown that reads cleanly as plain text and still renders as written.

Untrusted text (server answers, log lines, labels, ids) goes through :func:`text` or
:func:`code`; both redact secrets first (:func:`reports.text.redact`). They escape only
what would change how the markdown renders, so ``bad_input`` stays ``bad_input`` and
``127.0.0.1:18001 [Connection refused]`` stays as it is:

- ``|`` always (it would split a table cell; ``\\|`` renders as ``|`` in and out of tables),
- backticks, ``*``, ``~``, ``$`` and a backslash before punctuation (code spans,
  emphasis, strikethrough, GitHub's math, escapes),
- ``_`` unless it sits between two letters or digits (intraword ``_`` is never emphasis),
- ``<`` that could open an HTML tag or autolink, and ``&`` that could start an entity,
- ``]`` followed by ``(``, ``[`` or ``:`` (a link, reference or definition),
- a first character that would start a block (heading, quote, list) when the text opens
  a line.

Identifiers, PromQL and JSON are shown as code spans (:func:`code`): a backtick fence one
longer than any backtick run inside. :func:`link` writes a relative link whose target is
percent-encoded. All three are safe inside a GFM table cell.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from reports.text import redact

#: ASCII punctuation: a backslash before one of these is an escape in CommonMark
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_TAG_START = re.compile(r"[A-Za-z/!?]")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
#: what starts a block at the start of a line: ATX heading, quote, list item, setext
#: underline or thematic break ("*" and "_" are escaped anyway)
_BLOCK_START = re.compile(r"^(?:#{1,6}(?=\s|$)|>|[-+](?=\s|$)|\d{1,9}[.)](?=\s|$)|=+$|-+$)")
_ALWAYS = {"|": "\\|", "`": "\\`", "*": "\\*", "~": "\\~", "$": "\\$"}


def _one_line(value: object, max_len: int) -> str:
    """Redacted, whitespace collapsed to single spaces, cut to ``max_len`` characters."""
    s = " ".join(redact(str(value)).split())
    return s if len(s) <= max_len else s[: max_len - 1] + "…"


def _escape_char(s: str, i: int) -> str:
    """Character ``s[i]`` escaped for inline markdown, given its neighbours."""
    ch = s[i]
    prev = s[i - 1] if i > 0 else ""
    nxt = s[i + 1] if i + 1 < len(s) else ""
    if ch in _ALWAYS:
        return _ALWAYS[ch]
    if ch == "\\":
        return "\\\\" if nxt in _PUNCT or nxt == "" else ch
    if ch == "_":
        return ch if prev.isalnum() and nxt.isalnum() else "\\_"
    if ch == "<":
        return "&lt;" if _TAG_START.match(nxt) else ch
    if ch == "&":
        return "&amp;" if _ENTITY.match(s, i) else ch
    if ch == "]":
        return "\\]" if nxt in ("(", "[", ":") else ch
    return ch


def text(value: object, max_len: int = 300) -> str:
    """Untrusted text as one line of inline markdown (paragraph, list item or table cell)."""
    s = _one_line(value, max_len)
    out = "".join(_escape_char(s, i) for i in range(len(s)))
    block = _BLOCK_START.match(out)
    if block:  # "# x", "> x", "- x", "1. x" would start a block at the start of a line
        end = block.end() - 1
        out = out[:end] + "\\" + out[end:]
    return out


def code(value: object, max_len: int = 300) -> str:
    """Untrusted text as an inline code span that nothing inside can close or split.

    The fence is one backtick longer than the longest backtick run inside; a space pads
    content that starts or ends with a backtick. ``|`` is written ``\\|``, which GFM tables
    turn back into ``|`` inside code (outside a table it would show the backslash, so use
    :func:`code` in table cells and :func:`code_text` elsewhere).
    """
    return code_text(value, max_len).replace("|", "\\|")


def code_text(value: object, max_len: int = 300) -> str:
    """Like :func:`code`, for use outside a table (pipes left as they are)."""
    s = _one_line(value, max_len)
    if not s:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def href(target: str) -> str:
    """A relative link target, percent-encoded (spaces, parentheses, ``<``/``>``, ``|``…)."""
    return quote(target, safe="/._-~#")


def link(label: str, target: str) -> str:
    """``[label](target)`` for a relative path; ``label`` is escaped as :func:`text`.

    The target is percent-encoded (spaces, parentheses, ``<``/``>``, ``|``…), so any file
    name yields a working link.
    """
    return f"[{text(label)}]({href(target)})"


def trusted(value: str) -> str:
    """Markdown the harness wrote itself (the prevention catalogue): only pipes escaped."""
    return " ".join(value.split()).replace("|", "\\|")
