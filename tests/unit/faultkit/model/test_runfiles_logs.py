"""Cutting ``container.json``'s logs from a ``docker logs --timestamps`` answer
(faultkit.model.runfiles): the lines Docker stamped in a window, and the start-up lines
from the container's last start — the one cut the runner and the postmortem share."""

from __future__ import annotations

from datetime import UTC, datetime

from faultkit.model.runfiles import STARTUP_LOG_LINES, stamped_lines, startup_lines

T = 1_796_600_000.0


def stamp(t: float) -> str:
    """Docker's stamp: RFC 3339, nanoseconds, UTC."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def answer(*lines: tuple[float, str]) -> str:
    return "".join(f"{stamp(t)} {text}\n" for t, text in lines)


def test_the_start_up_lines_are_the_first_ones_from_the_last_start_with_their_stamps() -> None:
    log = answer((T - 1.0, "before the start"),
                 *((T + k / 10, f"line {k}") for k in range(STARTUP_LOG_LINES + 5)))
    lines = startup_lines(log, T).splitlines()
    assert len(lines) == STARTUP_LOG_LINES
    assert lines[0] == f"{stamp(T)} line 0"  # stamped at the start itself: kept
    assert lines[-1] == f"{stamp(T + (STARTUP_LOG_LINES - 1) / 10)} line {STARTUP_LOG_LINES - 1}"
    assert "before the start" not in "\n".join(lines)


def test_the_start_up_lines_end_at_until_and_none_is_empty() -> None:
    log = answer((T, "started"), (T + 1.0, "ready"), (T + 2.0, "after the window"))
    assert startup_lines(log, T, T + 1.0) == f"{stamp(T)} started\n{stamp(T + 1.0)} ready"
    assert startup_lines(log, T + 5.0) == ""
    assert startup_lines("", T) == ""


def test_a_piece_split_off_at_a_carriage_return_goes_with_its_line() -> None:
    """A progress bar is one Docker line with carriage returns in it: the pieces after the
    first carry no stamp of their own, and are kept or dropped with the line they are of
    (nor does their text read as a stamp)."""
    log = answer((T - 1.0, "old 10%\rold 100%"), (T + 1.0, "Loading 50%\rLoading 100%"),
                 (T + 2.0, "ready"))
    assert stamped_lines(log, T) == [
        f"{stamp(T + 1.0)} Loading 50%", "Loading 100%", f"{stamp(T + 2.0)} ready"]
    assert stamped_lines(log, T, keep_stamps=False) == ["Loading 50%", "Loading 100%", "ready"]
    assert stamped_lines(log, T - 1.0, T - 1.0) == [f"{stamp(T - 1.0)} old 10%", "old 100%"]
