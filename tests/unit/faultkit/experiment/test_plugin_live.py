"""The live status line: its model and text (exact, on a fake clock), the renderer on a fake
terminal (``\\r``, erase, the cursor given back to pytest), when it draws, the experiment
feeding it, and the plugin in real pytest sessions — one on a pseudo-terminal, read back
through a small terminal emulator — with nothing in captured output or JUnit XML."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from fcntl import ioctl
from pathlib import Path
from typing import Any

import pytest

from faultkit.experiment.live import LiveStatus, Part, Snapshot, compose, render
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from faultkit.plugin.terminal import LiveLine, live_wanted

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
    return render(status.snapshot(), width)


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


def test_a_narrow_terminal_loses_the_total_time_then_the_name_then_the_end() -> None:
    clock = FakeClock()
    status = LiveStatus("kill[sim-vllm]", clock=clock)
    status.phase("recovering")
    clock.t += 31
    status.on_record(Record("fail"))
    status.on_event(ev(EventKind.HEALTH_FAIL, ok=False))
    status.on_event(firing("FaultkitNodeDown"))
    full = (
        "kill[sim-vllm] · recovering 31 s · total 31 s · last 1 s: 0 ok, 1 failed"
        " · node NOT READY · firing: FaultkitNodeDown"
    )
    assert line(status, 200) == full
    assert line(status, len(full)) == full
    no_total = full.replace(" · total 31 s", "")
    assert line(status, len(full) - 1) == no_total
    assert line(status, len(no_total)) == no_total
    no_name = (
        "recovering 31 s · last 1 s: 0 ok, 1 failed · node NOT READY · firing: FaultkitNodeDown"
    )
    assert line(status, len(no_total) - 1) == no_name
    assert line(status, len(no_name)) == no_name
    assert line(status, 40) == "recovering 31 s · last 1 s: 0 ok, 1 fai…"
    assert len(line(status, 40)) == 40


def test_a_long_line_is_cut_to_the_width_with_an_ellipsis() -> None:
    parts = [
        Part("label", "kill[sim-vllm]"),
        Part("phase", "inject 1.0 s", "bold"),
        Part("total", "total 9.0 s"),
    ]
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
    term = Term(pytest_row="", width=30)
    live = term.line()
    live.attach(LiveStatus("kill[sim-vllm]", clock=FakeClock()))
    assert term.take() == "\rkill[sim-vllm] · setup 0.0 s\x1b[K"  # 28: the total went
    term.width = 11
    live.refresh()
    drawn = term.take()
    assert drawn == "\rsetup 0.0…\x1b[K"
    assert len(screen(drawn)[0]) == 10


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


# --------------------------------------------------------------------------- the experiment


async def test_an_experiment_feeds_its_phases_requests_and_observations(
    tmp_path: Path,
) -> None:
    """A real run_action against a loopback server (no Docker, Prometheus unreachable)."""
    from faultkit.experiment import Experiment
    from faultkit.inventory import Inventory, Node
    from faultkit.load.fakeserver import serve
    from faultkit.load.profile import LoadProfile
    from faultkit.rundir import RunDir

    runner, port = await serve()
    try:
        node = Node(
            name="n",
            engine="vllm",
            base_url=f"http://127.0.0.1:{port}",
            model="ok",
            slo={"recovery_hold_s": 0.5, "recovery_s_max": 5},
        )
        inventory = Inventory(nodes=[node], prometheus={"url": "http://127.0.0.1:1"})
        status = LiveStatus("action[n]")
        seen: list[Snapshot] = []
        status.on_change = lambda: seen.append(status.snapshot())
        exp = Experiment(
            scenario="action",
            node=node,
            inventory=inventory,
            run=RunDir(tmp_path),
            load_profile=LoadProfile(rate=10, output_tokens=4, input_tokens=8),
            live=status,
        )

        async def action(_: Experiment) -> None:
            await asyncio.sleep(0.3)

        await exp.run_action("noop", action, describe="nothing", baseline_s=1.0)
        exp.check()
    finally:
        await runner.cleanup()
    assert [s.phase for s in seen] == [
        "preflight",
        "baseline",
        "inject",
        "hold",
        "revert",
        "recovering",
        "drain",
        "measure",
        "verdict",
    ]
    after_baseline = seen[2]
    assert after_baseline.ok is not None and after_baseline.ok > 0, after_baseline
    assert after_baseline.ready is True
    assert after_baseline.prometheus_down is True  # http://127.0.0.1:1


# --------------------------------------------------------------------------- the plugin in pytest

SCENARIO = """
import pytest

PHASES = ["preflight", "baseline", "inject", "hold", "revert", "recovering", "drain",
          "measure", "verdict"]


class Record:
    status = "ok"


def drive(live, name):
    for phase in PHASES:
        live.phase(phase)
        print(f"captured {name} {phase}")
        live.on_record(Record())


def test_one(faultkit_live):
    drive(faultkit_live, "one")


def test_two(faultkit_live):
    drive(faultkit_live, "two")


def test_three(faultkit_live):
    drive(faultkit_live, "three")
    assert False, "the scenario failed"
"""

#: what only the live line writes (pytest's own output never has it)
LIVE_TEXT = re.compile(
    r" · (setup|preflight|baseline|inject|hold|revert|recovering|drain|"
    r"measure|verdict) \d"
)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("FAULTKIT_HOME", str(pytester.path / "home"))
    for name in ("FAULTKIT_LIVE", "PYTEST_XDIST_WORKER"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_live=SCENARIO)
    return pytester


def _args(pytester: pytest.Pytester, *extra: str) -> list[str]:
    # --dry-run: the plugin sweeps no journal before the tests; junit_logging: the tests'
    # captured output goes into the XML, where the live line must not be
    return [
        "-p",
        "no:cacheprovider",
        "-p",
        "no:warnings",
        "--dry-run",
        f"--junitxml={pytester.path / 'junit.xml'}",
        "-o",
        "junit_logging=all",
        *extra,
    ]


def _junit(pytester: pytest.Pytester) -> str:
    text = (pytester.path / "junit.xml").read_text()
    ET.fromstring(text)  # well-formed
    return text


def _check_junit_and_capture(pytester: pytest.Pytester, output: str) -> None:
    junit = _junit(pytester)
    assert "captured one verdict" in junit and "captured three preflight" in junit
    assert not LIVE_TEXT.search(junit), junit
    # the failed test's captured stdout section, as pytest prints it
    section = output.split("Captured stdout call", 1)[1].split("short test summary", 1)[0]
    assert "captured three measure" in section
    assert not LIVE_TEXT.search(section), section


def _run_on_a_terminal(pytester: pytest.Pytester, *args: str) -> tuple[int, str]:
    """pytest in a subprocess whose stdout and stderr are a 100-column pseudo-terminal;
    everything it wrote there, as written."""
    main, sub = pty.openpty()
    ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "FAULTKIT_")) and k not in ("CI", "COLUMNS", "LINES")
    }
    env.update(TERM="xterm", FAULTKIT_HOME=str(pytester.path / "home"), NO_COLOR="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=pytester.path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=sub,
        stderr=sub,
    )
    os.close(sub)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_q_shows_one_dot_per_test_and_the_line_never_leaks(
    project: pytest.Pytester,
) -> None:
    code, raw = _run_on_a_terminal(project, *_args(project, "-q"))
    assert code == pytest.ExitCode.TESTS_FAILED, raw
    # positive control: the line was drawn (default auto, on a terminal)
    assert re.search(r"one · verdict \d+\.\d s · total [\d.]+ s · last 1 s: [89] ok, 0 failed", raw)
    rows = screen(raw)
    assert re.fullmatch(r"\.\.F +\[100%\]", rows[0]), rows
    assert not any(LIVE_TEXT.search(row) for row in rows), rows
    assert [row for row in rows if row][-1].startswith("1 failed, 2 passed"), rows
    _check_junit_and_capture(project, "\n".join(rows))


def test_on_a_terminal_v_keeps_each_result_on_its_test_s_row(project: pytest.Pytester) -> None:
    code, raw = _run_on_a_terminal(project, *_args(project, "-v"))
    assert code == pytest.ExitCode.TESTS_FAILED, raw
    assert re.search(r"two · verdict \d+\.\d s · total", raw), raw
    rows = screen(raw)
    results = [row for row in rows if row.startswith("test_live.py::")]
    assert [re.sub(r" +\[ *\d+%\]$", "", row) for row in results] == [
        "test_live.py::test_one PASSED",
        "test_live.py::test_two PASSED",
        "test_live.py::test_three FAILED",
    ], rows
    assert not any(LIVE_TEXT.search(row) for row in rows), rows


def test_off_draws_nothing_on_a_terminal(project: pytest.Pytester) -> None:
    code, raw = _run_on_a_terminal(project, *_args(project, "-q", "--faultkit-live=off"))
    assert code == pytest.ExitCode.TESTS_FAILED, raw
    assert not LIVE_TEXT.search(raw), raw
    assert "\x1b[A" not in raw


def test_not_a_terminal_prints_nothing_live(project: pytest.Pytester) -> None:
    result = project.runpytest(*_args(project, "-q"))
    result.assert_outcomes(passed=2, failed=1)
    assert not LIVE_TEXT.search(result.stdout.str()), result.stdout.str()
    result.stdout.fnmatch_lines(["..F *[[]100%[]]"])
    _check_junit_and_capture(project, result.stdout.str())


def test_on_draws_whatever_the_output_and_still_not_into_captures(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(*_args(project, "-q", "--faultkit-live=on"))
    result.assert_outcomes(passed=2, failed=1)
    assert LIVE_TEXT.search(result.stdout.str())  # drawn into pytest's (non-tty) output
    _check_junit_and_capture(project, result.stdout.str())


def test_an_xdist_worker_draws_nothing_even_with_on(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    result = project.runpytest(*_args(project, "-q", "--faultkit-live=on"))
    result.assert_outcomes(passed=2, failed=1)
    assert not LIVE_TEXT.search(result.stdout.str()), result.stdout.str()


def test_the_environment_and_ini_choose_the_mode_and_a_bad_value_names_its_source(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAULTKIT_LIVE", "on")
    result = project.runpytest(*_args(project, "-q"))
    assert LIVE_TEXT.search(result.stdout.str())
    result = project.runpytest(*_args(project, "-q", "--faultkit-live=off"))  # flag > env
    assert not LIVE_TEXT.search(result.stdout.str())
    monkeypatch.setenv("FAULTKIT_LIVE", "sometimes")
    result = project.runpytest(*_args(project, "-q"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*$FAULTKIT_LIVE: 'sometimes' is not a live mode (one of: auto, on, off)*"]
    )
    monkeypatch.delenv("FAULTKIT_LIVE")
    project.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nfaultkit_live = on\n")
    result = project.runpytest(*_args(project, "-q"))
    assert LIVE_TEXT.search(result.stdout.str())


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
