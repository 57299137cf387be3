"""Escaping and redaction of untrusted text (reports.text)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reports.text import REDACTED, code, fenced, inline, redact
from tests.unit.reports_helpers import cells


def test_redacts_authorization_header_and_bearer() -> None:
    out = redact("GET /v1/models\nAuthorization: Bearer abcdef123456789\nHost: x")
    assert "abcdef123456789" not in out
    assert f"Authorization: {REDACTED}" in out
    assert "Host: x" in out
    assert "zz9988776655" not in redact("sent bearer zz9988776655 to server")


def test_redacts_sk_tokens_and_named_keys() -> None:
    assert "sk-proj-AbCdEf0123456789" not in redact("key=sk-proj-AbCdEf0123456789 ok")
    assert "s3cr3tvalue" not in redact('{"api_key": "s3cr3tvalue"}')
    assert "s3cr3tvalue" not in redact("curl -H 'X-API-Key: s3cr3tvalue'")
    assert "s3cr3tvalue" not in redact("http://h/v1?api_key=s3cr3tvalue&x=1")
    assert "hf_abcdefghijklmnopqrstuv" not in redact("token hf_abcdefghijklmnopqrstuv")


def test_redaction_keeps_token_counts() -> None:
    text = "max_tokens=500 prompt_tokens: 12 n_ctx=4096"
    assert redact(text) == text


def test_inline_cannot_break_a_table_or_inject_html() -> None:
    hostile = "a | b `code` <script>alert(1)</script> *em* [x](http://e) \n| new row"
    out = inline(hostile)
    assert "<script>" not in out
    assert "&lt;script&gt;" in out
    assert "\n" not in out
    assert len(cells(f"| {out} | z |")) == 2
    assert "`" not in out.replace("\\`", "")


def test_code_cannot_be_closed_or_split() -> None:
    out = code("x</code><b>|`y`")
    assert out.startswith("<code>")
    assert out.endswith("</code>")
    assert out.count("</code>") == 1
    assert "|" not in out
    assert "`" not in out
    assert "<b>" not in out


def test_fenced_uses_a_fence_longer_than_any_backtick_run() -> None:
    body = "before\n````\nstill inside\n```\nend Authorization: Basic dXNlcjpwYXNz"
    out = fenced(body)
    fence = out.split("\n", 1)[0].removesuffix("text")
    assert len(fence) == 5
    assert out.endswith("\n" + fence)
    inner = out.split("\n")[1:-1]
    assert all(not line.startswith(fence) for line in inner)
    assert "dXNlcjpwYXNz" not in out


def test_fenced_keeps_the_last_lines() -> None:
    out = fenced("\n".join(f"line {i}" for i in range(100)), max_lines=10)
    assert "line 99" in out
    assert "line 89" not in out
    assert "line 90" in out


@given(st.text())
def test_inline_is_always_one_safe_cell(text: str) -> None:
    out = inline(text)
    assert "\n" not in out
    assert "<" not in out
    assert ">" not in out
    assert len(cells(f"| {out} | tail |")) == 2
