"""The live status line: its model and text (exact, on a fake clock), the renderer on a fake
terminal (``\\r``, erase, the cursor given back to pytest) and when it draws."""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from faultkit.events import EventKind
from faultkit.plugin.live import LiveStatus, Snapshot, compose, segments
from faultkit.plugin.terminal import LiveLine, live_wanted
from faultkit.records import Event

pytest_plugins = ["pytester"]


class FakeClock:
    def __init__(self) -> None:
        self.t = 500.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Record:
    """What LiveStatus reads of a ledger record."""

    status: str = "ok"


def ev(kind: str, **data: Any) -> Event:
    return Event(t=time.time(), source="observer", kind=kind, node="n", data=data)


def firing(name: str, state: str = "firing", **labels: str) -> Event:
    return ev(f"alert_{state}", alertname=name, labels={"node": "n", **labels}, state=state)


def line(status: LiveStatus, width: int = 200) -> str:
    return compose(segments(status.snapshot()), width)


# --------------------------------------------------------------------------- the model and text


def test_the_line_before_anything_ran_is_the_label_phase_and_time() -> None:
    clock = FakeClock()
    status = LiveStatus("kill[sim-vllm]", clock=clock)
    clock.t += 0.4
    assert line(status) == "kill[sim-vllm] · setup 0.4 s · total 0.4 s"


def test_a_full_line_phase_requests_node_and_alerts() -> None:
    clock = FakeClock()
    status = LiveStatus("kill[sim-vllm]", clock=clock)
    clock.t += 19
    status.phase("recovering")
    status.on_event(ev(EventKind.HEALTH_FAIL, ok=False))
    status.on_event(firing("FaultkitNodeDown"))
    status.on_event(firing("FaultkitHighErrorRatio", "pending"))
    status.on_record(Record("ok"))  # 1.5 s before now: out of the window
    clock.t += 0.5
    for _ in range(3):
        status.on_record(Record("fail"))
    status.on_record(Record("unknown"))  # anything but ok is failed
    status.on_record(Record("ok"))
    clock.t += 1.0
    status.on_record(Record("ok"))
    clock.t += 10.6
    for _ in range(2):
        status.on_record(Record("ok"))
    status.on_record(Record("fail"))
    assert status.snapshot() == Snapshot(
        label="kill[sim-vllm]",
        phase="recovering",
        phase_s=pytest.approx(12.1),  # type: ignore[arg-type]
        total_s=pytest.approx(31.1),  # type: ignore[arg-type]
        ok=2,
        failed=1,
        ready=False,
        firing=("FaultkitNodeDown",),
        pending=("FaultkitHighErrorRatio",),
        alerts_known=True,
    )
    assert line(status) == (
        "kill[sim-vllm] · recovering 12 s · total 31 s · last 1 s: 2 ok, 1 failed"
        " · node NOT READY · firing: FaultkitNodeDown; pending: FaultkitHighErrorRatio"
    )


def test_alerts_resolve_and_prometheus_down_replaces_them() -> None:
    status = LiveStatus("pause[llama]", clock=FakeClock())
    status.on_event(ev(EventKind.HEALTH_OK, ok=True))
    assert line(status).endswith(" · node ready · no alerts")
    status.on_event(firing("FaultkitNodeDown", job="llama"))
    status.on_event(firing("FaultkitNodeDown", instance="x"))  # a second series, one name
    assert line(status).endswith(" · node ready · firing: FaultkitNodeDown")
    status.on_event(firing("FaultkitNodeDown", "resolved", job="llama"))
    assert line(status).endswith(" · firing: FaultkitNodeDown")
    status.on_event(firing("FaultkitNodeDown", "resolved", instance="x"))
    assert line(status).endswith(" · node ready · no alerts")
    status.on_event(ev(EventKind.PROMETHEUS_DOWN, detail="connection refused"))
    assert line(status).endswith(" · node ready · Prometheus down")
    status.on_event(ev(EventKind.PROMETHEUS_UP))
    assert line(status).endswith(" · node ready · no alerts")


def test_the_requests_part_shows_zero_once_load_has_been_seen() -> None:
    clock = FakeClock()
    status = LiveStatus("pause[llama]", clock=clock)
    assert "last 1 s" not in line(status)
    status.on_record(Record("ok"))
    clock.t += 5  # a hang: nothing finishes
    assert " · last 1 s: 0 ok, 0 failed" in line(status)


def test_the_fault_s_own_events_move_the_phase_and_each_change_is_told_once() -> None:
    clock = FakeClock()
    status = LiveStatus(clock=clock)
    told: list[str] = []
    status.on_change = lambda: told.append(status.current_phase)
    status.phase("baseline")
    status.phase("inject")
    clock.t += 2
    status.on_event(ev(EventKind.INJECT_START))  # already "inject": its clock keeps running
    assert status.snapshot().phase_s == 2
    for kind in (EventKind.ACT, EventKind.EFFECT, EventKind.INJECT_END, EventKind.REVERT_START):
        status.on_event(ev(kind))
    assert told == ["baseline", "inject", "hold", "revert"]
    assert line(status) == "revert 0.0 s · total 2.0 s"  # no label: no label part


def test_the_record_window_stays_bounded_without_a_reader() -> None:
    clock = FakeClock()
    status = LiveStatus(clock=clock)
    for _ in range(10_000):
        clock.t += 0.01
        status.on_record(Record())
    assert len(status._finished) <= 101  # only the last second is kept


def test_a_long_line_is_cut_to_the_width_with_an_ellipsis() -> None:
    parts = [("kill[sim-vllm]", ""), ("inject 1.0 s", "bold"), ("total 9.0 s", "")]
    assert compose(parts, 100) == "kill[sim-vllm] · inject 1.0 s · total 9.0 s"
    assert compose(parts, 20) == "kill[sim-vllm] · in…"
    assert len(compose(parts, 20)) == 20
    assert compose(parts, 16) == "kill[sim-vllm] …"
    assert compose(parts, 0) == ""
    styled = compose(parts, 100, markup=True)
    assert styled == "kill[sim-vllm] · \x1b[1minject 1.0 s\x1b[0m · total 9.0 s"
    # the styles do not count towards the width
    assert re.sub(r"\x1b\[\d*m", "", compose(parts, 35, markup=True)) == compose(parts, 35)


# --------------------------------------------------------------------------- a terminal emulator


def screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: rows of text. Understands what pytest and the
    live line write: text, ``\\n``, ``\\r``, CSI ``K`` (to the end of the row), ``A`` (up),
    ``G`` (to a column), SGR colours (ignored) and OSC sequences (ignored)."""
    rows: list[list[str]] = [[]]
    r = c = 0
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\x1b":
            csi = re.match(r"\x1b\[([\d;?]*)([A-Za-z])", raw[i:])
            if csi:
                arg, op = csi.group(1), csi.group(2)
                n = int(arg) if arg.isdigit() else 1
                if op == "K":
                    del rows[r][c:]
                elif op == "A":
                    r = max(0, r - n)
                elif op == "G":
                    c = n - 1
                elif op != "m":
                    raise AssertionError(f"unexpected escape sequence {csi.group(0)!r}")
                i += csi.end()
                continue
            osc = re.match(r"\x1b\].*?(\x07|\x1b\\)", raw[i:], re.S)
            if osc:
                i += osc.end()
                continue
            raise AssertionError(f"unexpected escape at {raw[i : i + 10]!r}")
        if ch == "\r":
            c = 0
        elif ch == "\n":  # as the terminal driver writes it (onlcr): to the next row's start
            r, c = r + 1, 0
            while len(rows) <= r:
                rows.append([])
        else:
            row = rows[r]
            while len(row) < c:
                row.append(" ")
            if c < len(row):
                row[c] = ch
            else:
                row.append(ch)
            c += 1
        i += 1
    return ["".join(row).rstrip() for row in rows]


def test_the_emulator_reads_what_it_is_given() -> None:
    assert screen("ab\rX\x1b[K\ncd\x1b[A\x1b[3Gz") == ["X z", "cd"]
    assert screen("\x1b]9;4;1;50\x1b\\\x1b[32m.\x1b[0m\r\n") == [".", ""]


# --------------------------------------------------------------------------- the renderer


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@dataclass
class Term:
    """A fake terminal: what pytest has written on its row (``column``) and the width."""

    out: FakeTTY = field(default_factory=FakeTTY)
    pytest_row: str = "test_scenarios.py "
    width: int = 80

    def line(self, **kwargs: Any) -> LiveLine:
        return LiveLine(
            self.out,
            column=lambda: len(self.pytest_row),
            width=lambda: self.width,
            interval_s=None,
            **kwargs,
        )

    def take(self) -> str:
        text = self.out.getvalue()
        self.out.seek(0)
        self.out.truncate()
        return text


def test_the_line_opens_a_row_below_pytest_s_redraws_in_place_and_gives_the_row_back() -> None:
    term, clock = Term(), FakeClock()
    live = term.line()
    status = LiveStatus("kill[n]", clock=clock)
    live.attach(status)
    assert term.take() == "\n\rkill[n] · setup 0.0 s · total 0.0 s\x1b[K"
    live.refresh()
    assert term.take() == ""  # unchanged: nothing written
    clock.t += 1.25
    status.phase("baseline")  # a phase change redraws at once
    assert term.take() == "\rkill[n] · baseline 0.0 s · total 1.2 s\x1b[K"
    with live.held():
        # erased, and the cursor back where pytest left it (column 19, 1-based)
        assert term.take() == "\r\x1b[K\x1b[A\x1b[19G"
        status.phase("inject")
        clock.t += 1
        live.refresh()
        assert term.take() == ""  # held: pytest is writing
    live.refresh()
    assert term.take() == "\n\rkill[n] · inject 1.0 s · total 2.2 s\x1b[K"
    live.detach(status)
    assert term.take() == "\r\x1b[K\x1b[A\x1b[19G"
    status.phase("report")
    live.refresh()
    assert term.take() == ""  # detached: nothing more


def test_pytest_s_row_reads_as_if_the_line_had_never_been_there() -> None:
    term, clock = Term(), FakeClock()
    term.out.write(term.pytest_row)
    live = term.line()
    status = LiveStatus("kill[n]", clock=clock)
    live.attach(status)
    for phase in ("preflight", "baseline", "inject", "hold"):
        clock.t += 3
        status.phase(phase)
    assert screen(term.out.getvalue()) == [
        "test_scenarios.py",
        "kill[n] · hold 0.0 s · total 12 s",
    ]
    with live.held():
        term.out.write(".")  # what pytest writes for the test
    live.detach(status)
    term.out.write("\n")
    assert screen(term.out.getvalue()) == ["test_scenarios.py .", ""]


def test_on_an_empty_row_the_line_uses_it_and_erases_it() -> None:
    term = Term(pytest_row="")
    live = term.line()
    status = LiveStatus("x", clock=FakeClock())
    live.attach(status)
    assert term.take() == "\rx · setup 0.0 s · total 0.0 s\x1b[K"
    live.hold()
    assert term.take() == "\r\x1b[K"
    live.release()


def test_the_line_is_cut_to_the_terminal_width_minus_one() -> None:
    term = Term(width=30)
    live = term.line()
    live.attach(LiveStatus("kill[sim-vllm]", clock=FakeClock()))
    drawn = term.take()
    assert drawn == "\n\rkill[sim-vllm] · setup 0.0 s…\x1b[K"
    assert len(screen(drawn)[1]) == 29


def test_no_line_when_pytest_s_row_fills_the_terminal() -> None:
    term = Term(pytest_row="x" * 79, width=80)
    live = term.line()
    live.attach(LiveStatus("x", clock=FakeClock()))
    assert term.take() == ""


def test_markup_colours_the_phase() -> None:
    term = Term()
    live = term.line(markup=True)
    live.attach(LiveStatus("x", clock=FakeClock()))
    assert term.take() == "\n\rx · \x1b[1msetup 0.0 s\x1b[0m · total 0.0 s\x1b[K"


def test_close_erases_stops_and_is_idempotent() -> None:
    term = Term()
    live = term.line()
    status = LiveStatus("x", clock=FakeClock())
    live.attach(status)
    term.take()
    live.close()
    live.close()
    assert term.take() == "\r\x1b[K\x1b[A\x1b[19G"
    status.phase("inject")
    live.attach(status)
    live.refresh()
    assert term.take() == ""


def test_a_broken_terminal_turns_the_line_off_without_raising() -> None:
    term = Term()
    live = term.line()
    status = LiveStatus("x", clock=FakeClock())
    term.out.close()
    live.attach(status)  # the write fails: no exception
    status.phase("inject")
    live.refresh()
    live.close()


def test_the_thread_redraws_while_nothing_else_happens() -> None:
    clock = FakeClock()
    out = FakeTTY()
    live = LiveLine(out, column=lambda: 0, width=lambda: 80, interval_s=0.01)
    live.attach(LiveStatus("x", clock=clock))
    try:
        clock.t += 5
        deadline = time.monotonic() + 10
        while "setup 5.0 s" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        live.close()
    assert "\rx · setup 5.0 s · total 5.0 s\x1b[K" in out.getvalue()


# --------------------------------------------------------------------------- when it draws


@pytest.mark.parametrize(
    ("mode", "tty", "env", "worker", "capture", "log_cli", "wanted"),
    [
        ("auto", True, {}, False, "fd", False, True),
        ("auto", True, {}, False, "sys", False, True),
        ("auto", False, {}, False, "fd", False, False),  # a pipe, a file
        ("auto", True, {"CI": "true"}, False, "fd", False, False),
        ("auto", True, {"TERM": "dumb"}, False, "fd", False, False),
        ("auto", True, {}, False, "no", False, False),  # -s: the test writes to the terminal
        ("auto", True, {}, False, "tee-sys", False, False),
        ("auto", True, {}, False, "fd", True, False),  # log_cli writes during the test
        ("auto", True, {}, True, "fd", False, False),  # an xdist worker
        ("on", False, {"CI": "true"}, False, "no", True, True),
        ("on", True, {}, True, "fd", False, False),  # a worker has no terminal, even with on
        ("off", True, {}, False, "fd", False, False),
    ],
)
def test_when_the_line_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    tty: bool,
    env: dict[str, str],
    worker: bool,
    capture: str,
    log_cli: bool,
    wanted: bool,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    stream = FakeTTY() if tty else io.StringIO()
    assert live_wanted(mode, stream, worker=worker, capture=capture, log_cli=log_cli) is wanted


def test_a_debugger_ends_the_line_and_pytest_s_pdb_traceback_is_written_clean() -> None:
    from faultkit.plugin.terminal import LiveHooks

    term = Term()
    live = term.line()
    hooks = LiveHooks(live)
    status = LiveStatus("x", clock=FakeClock())
    live.attach(status)
    term.take()
    wrapper = hooks.pytest_exception_interact()
    next(wrapper)  # pytest writes the traceback now
    assert term.take() == "\r\x1b[K\x1b[A\x1b[19G"
    status.phase("inject")
    assert term.take() == ""
    hooks.pytest_enter_pdb()
    with pytest.raises(StopIteration):
        wrapper.send(None)
    status.phase("hold")
    live.refresh()
    assert term.take() == ""  # closed for good
