"""Make untrusted text (server answers, logs, labels) safe to put in markdown.

Everything that came from a server, a container log or Prometheus labels is untrusted: it
may contain backticks that close a fence, pipes that split a table cell, HTML that GitHub
would interpret, or secrets. Every helper here first **redacts** secrets
and then escapes for its destination.

What :func:`redact` replaces by ``[REDACTED]``:

- ``Authorization:``/``Proxy-Authorization:`` values and ``Bearer`` tokens;
- ``sk-…``/``rk-…``/``pk-…`` keys and ``hf_…`` tokens wherever they stand;
- the value of any key whose name says secret (``api_key``, ``x-api-key``, ``password``,
  ``token``, ``secret``, and ``*_KEY``/``*_SECRET``/``*_TOKEN``/``*_PASSWORD`` env names)
  in every form a log or a config shows it: ``api_key=x``, ``api_key='x'`` (vLLM's
  ``args: Namespace(...)`` line), ``"api_key": "x"``, ``'api_key': ['x']`` (a list),
  ``HF_TOKEN=x``, ``X-API-Key: x``, ``?api_key=x``;
- the argument after a secret flag: ``--api-key x``, ``--api-key=x``, and as a list item,
  ``["--api-key", "x"]`` (JSON, Python, YAML flow) or a YAML block list (``- --api-key``
  then ``- x``);
- the *values* of secrets known at run time (``extra``, e.g. :func:`known_secrets`),
  wherever they appear, whatever surrounds them.

``None``/``null`` values are kept: they say no secret was set. :func:`redact_data`
applies the same to JSON-like data (mappings, lists, strings) before it is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faultkit.inventory import Inventory

REDACTED = "[REDACTED]"
#: known secret values shorter than this are not replaced (they would shred the text)
MIN_SECRET_LEN = 4

#: a key name that says its value is secret (in text: ``\b`` on both sides)
_SECRET_KEY = (
    r"(?:[\w-]*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|hf[_-]?token"
    r"|client[_-]?secret|secret[_-]?key|password|passwd)"
    r"|\w*_(?:secret|password|passwd|credentials?)|token|secret"
    # env style, upper case only: HF_TOKEN, MY_KEY (a field like t_first_token is no secret)
    r"|(?-i:[A-Z0-9_]*_(?:KEY|TOKEN|PWD)))"
)
#: a command-line flag whose argument is secret (``--api-key``, ``--hf-token``, ``--token``,
#: ``--db-password``), not one that merely ends in "token" (``--kv-bytes-per-token``)
_SECRET_FLAG = (
    r"--(?:[\w-]*?(?:api[_-]?key|apikey|secret|password|passwd)"
    r"|(?:\w+[_-])*(?:hf|hub|gh|github|api|auth|access|refresh|session|bearer|admin|service)"
    r"[_-]?token|token)(?![\w-])"
)
#: a value that says "no secret": kept
_NO_VALUE = r"(?!(?:None|null|nil)\b)"

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization / Proxy-Authorization header values, whatever the scheme
    (re.compile(r"(?i)\b((?:proxy-)?authorization)\s*[:=]\s*[^\r\n]+"), rf"\1: {REDACTED}"),
    # bearer tokens standing alone
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), f"Bearer {REDACTED}"),
    # OpenAI-style keys: sk-..., sk-proj-..., also hf_ tokens
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    # secret key = a list: 'api_key': ['x'], api_key=['x', 'y']
    (re.compile(rf"(?i)\b({_SECRET_KEY})\b(['\"]?\s*[:=]\s*)\[[^\]]*\]"), rf"\1\2{REDACTED}"),
    # secret key = a quoted value: api_key='x y', "api_key": "x", HF_TOKEN="x"
    (
        re.compile(rf"(?i)\b({_SECRET_KEY})\b(['\"]?\s*[:=]\s*)(['\"]){_NO_VALUE}[^'\"\r\n]*\3"),
        rf"\1\2\3{REDACTED}\3",
    ),
    # secret key = a bare value: api_key=x, X-API-Key: x, HF_TOKEN=x, ?api_key=x&
    (
        re.compile(rf"(?i)\b({_SECRET_KEY})\b(['\"]?\s*[:=]\s*){_NO_VALUE}([^\s\"',;&}}){{}}\]\[]+)"),
        rf"\1\2{REDACTED}",
    ),
    # --api-key x (the = form is a bare value above)
    (re.compile(rf"(?i)(?<![\w-])({_SECRET_FLAG})([ \t]+)(['\"]?)(?!-)[^\s'\"]+\3"),
     rf"\1\2\3{REDACTED}\3"),
    # list item after a secret flag: ["--api-key", "x"], ['--token', 'x'], [--api-key, x]
    (re.compile(rf"(?i)(['\"]?{_SECRET_FLAG}['\"]?\s*,\s*)(['\"]?)(?!-)[^'\",\]\s]+\2"),
     rf"\1\2{REDACTED}\2"),
    # YAML block list: "- --api-key" then "- x" on the next line
    (re.compile(rf"(?im)(^[ \t]*-[ \t]+['\"]?{_SECRET_FLAG}['\"]?[ \t]*\r?\n[ \t]*-[ \t]+)"
                rf"(['\"]?)[^\s'\"]+\2"),
     rf"\1\2{REDACTED}\2"),
)
#: a name (env variable, mapping key) whose value is secret: HF_TOKEN, VLLM_API_KEY, password
_SECRET_NAME = re.compile(
    r"(?i)api[_-]?key|apikey|secret|password|passwd|credential|authorization|bearer"
    r"|(?:access|auth|hf)[_-]?token|^(?:key|token|pwd)$"
    # env style, upper case only: HF_TOKEN, GH_TOKEN, SERVICE_KEY (not first_token)
    r"|(?-i:(?:^|_)(?:KEY|TOKEN|PWD)$)"
)
#: ...but a name that *refers* to a secret is not one: api_key_env, HF_TOKEN_PATH, key_file
_REFERENCE_NAME = re.compile(r"(?i)[_.-](?:env|file|path|dir|name|id|url|type)$")
_FLAG = re.compile(rf"(?i){_SECRET_FLAG}")

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def is_secret_name(name: str) -> bool:
    """True when ``name`` (an env variable or a mapping key) says its value is a secret.

    ``HF_TOKEN``, ``VLLM_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``password``, ``x-api-key``
    are; ``PYTHONPATH``, ``MAX_TOKENS``, ``TOKENIZERS_PARALLELISM``, ``MONKEY`` are not, nor
    are names that refer to a secret kept elsewhere (``api_key_env``, ``HF_TOKEN_PATH``).
    """
    return bool(_SECRET_NAME.search(name)) and not _REFERENCE_NAME.search(name)


def known_secrets(inventory: Inventory, environ: Mapping[str, str] | None = None) -> set[str]:
    """The secret values this run knows, to redact wherever they appear.

    Every node's API key (the value of the variable its ``api_key_env`` names, read from
    ``environ``, default ``os.environ``) and every serving-config ``env`` value whose name
    looks secret (:func:`is_secret_name`). Empty values are left out.
    """
    env = os.environ if environ is None else environ
    values = {env.get(n.api_key_env, "") for n in inventory.nodes if n.api_key_env}
    for config in inventory.serving_configs.values():
        values.update(v for k, v in config.env.items() if is_secret_name(k))
    return {v for v in values if v}


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace secrets in ``text`` by ``[REDACTED]``; strip ANSI codes and control chars.

    ``extra``: secret values known at run time (:func:`known_secrets`); each one of at
    least :data:`MIN_SECRET_LEN` characters is replaced wherever it occurs, longest first.
    """
    text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    for value in sorted({v for v in extra if len(v) >= MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def failed_start(reason: str, log: str, inventory: Inventory) -> tuple[str, str]:
    """Why a candidate config never became ready — the rollout's ``reason`` with the line
    of its container's ``log`` that says why the engine stopped
    (:func:`faultkit.docker.containers.last_words`) — and that log; both redacted."""
    from faultkit.docker.containers import last_words

    safe = redact(log, known_secrets(inventory)) if log else ""
    said = last_words(safe)
    return (f"{reason}; its last log line: {said!r}" if said else reason), safe


def redact_data(data: Any, extra: Iterable[str] = ()) -> Any:
    """A copy of JSON-like ``data`` with its secrets redacted (for files the harness writes).

    Strings go through :func:`redact`; a mapping value under a secret-looking key
    (:func:`is_secret_name`: an env variable ``HF_TOKEN``, a key ``api_key``) is replaced
    whole unless it is empty or None; in a list, the item after a secret flag
    (``["--api-key", "x"]``, a container's command) is replaced. Other values are kept.
    """
    secrets = frozenset(extra)
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, Mapping):
        return {
            key: REDACTED if _secret_entry(key, value) else redact_data(value, secrets)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        out = []
        for i, item in enumerate(data):
            after_flag = i > 0 and isinstance(data[i - 1], str) and _FLAG.fullmatch(data[i - 1])
            out.append(REDACTED if after_flag and isinstance(item, str) else
                       redact_data(item, secrets))
        return out
    return data


def _secret_entry(key: object, value: object) -> bool:
    """A mapping entry whose whole value is a secret: secret-looking key, non-empty value."""
    return (isinstance(key, str) and is_secret_name(key) and value not in (None, "", [], {})
            and not isinstance(value, bool | Mapping))


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


