"""What the CLI-level unit tests share: the one line a bad-input exit prints."""

from __future__ import annotations

from click.testing import Result


def one_error_line(result: Result) -> str:
    """The single stderr line of a bad-input exit: exit status 2, exactly one line,
    ``Error: …``, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("Error: ")
    return lines[0]
