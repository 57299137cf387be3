"""``--current-context-limit TOKENS`` (ini ``faultkit_current_context_limit``, environment
``FAULTKIT_CURRENT_CONTEXT_LIMIT``) and its fixture ``faultkit_current_context_limit``: the
value in effect (command line > environment > ini), ``None`` when not given, and a bad
value as one usage error at start-up, in a pytester session of the real plugin."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

SHOWS_IT = """\
def test_shows(faultkit_current_context_limit):
    print("LIMIT", repr(faultkit_current_context_limit))
"""
ENV = "FAULTKIT_CURRENT_CONTEXT_LIMIT"
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv(ENV, raising=False)
    pytester.makeini(INI)
    pytester.makepyfile(test_limit=SHOWS_IT)
    return pytester


def _limit(pytester: pytest.Pytester, *args: str) -> str:
    result = pytester.runpytest("-p", "no:cacheprovider", "-s", *args)
    assert result.ret == pytest.ExitCode.OK, result.outlines
    (shown,) = re.findall(r"LIMIT (\S+)", result.stdout.str())
    return str(shown)


def test_none_unless_given(session: pytest.Pytester) -> None:
    assert _limit(session) == "None"


def test_the_command_line_over_the_environment_over_the_ini(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.makeini(INI + "faultkit_current_context_limit = 1024\n")
    assert _limit(session) == "1024"
    monkeypatch.setenv(ENV, "2048")
    assert _limit(session) == "2048"
    assert _limit(session, "--current-context-limit", "4096") == "4096"


def test_an_empty_value_is_none_given(session: pytest.Pytester) -> None:
    assert _limit(session, "--current-context-limit=") == "None"


@pytest.mark.parametrize("bad", ["0", "-4096", "4k", "4096.0", "lots", " ", "٤٠٩٦"])
def test_a_bad_value_is_one_usage_error(session: pytest.Pytester, bad: str) -> None:
    result = session.runpytest("-p", "no:cacheprovider", f"--current-context-limit={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: --current-context-limit: {bad!r} is not a context limit: give the tokens "
        "one request may hold on the node's current config, a whole number above 0 (e.g. 4096)"
    ], result.errlines


def test_a_bad_environment_value_names_the_variable(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "big")
    result = session.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any(line.startswith(f"ERROR: ${ENV}: 'big' is not a context limit")
               for line in result.errlines), result.errlines


def test_the_option_is_documented_in_the_faultkit_group(session: pytest.Pytester) -> None:
    result = session.runpytest("--help")
    text = "\n".join(result.outlines)
    assert "--current-context-limit" in text and "faultkit_current_context_limit" in text
