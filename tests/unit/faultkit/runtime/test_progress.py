"""faultkit.runtime.progress: plain lines (exact, with a fake clock) and the live line."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from faultkit.runtime.progress import Progress, format_elapsed, is_live, one_line, step
from testbed._shell import run, stream
from testbed.errors import TestbedError


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def plain(clock: FakeClock) -> tuple[Progress, io.StringIO]:
    out = io.StringIO()
    return Progress(live=False, stream=out, prefix="[t] ", clock=clock, tick_s=None), out


def test_plain_mode_start_heartbeats_at_most_every_30_s_and_end() -> None:
    clock = FakeClock()
    progress, out = plain(clock)
    with progress.step("building llama-server (cmake)") as s:
        clock.t += 5
        s.update("[  1%] Building C object ggml.c.o\n")  # too early for a heartbeat
        clock.t += 145
        s.update("[120/212] compiling ggml-cpu.c")  # 150 s: due
        clock.t += 10
        s.update("[130/212] compiling ops.cpp")  # 10 s after the last line: not due
        clock.t += 20
        s.update("")  # an empty line keeps the latest status; 30 s: due
        clock.t += 132
    assert out.getvalue().splitlines() == [
        "[t] building llama-server (cmake) …",
        "[t] … still building llama-server (cmake): 2 min 30 s, [120/212] compiling ggml-cpu.c",
        "[t] … still building llama-server (cmake): 3 min 0 s, [130/212] compiling ops.cpp",
        "[t] building llama-server (cmake): done in 5 min 12 s",
    ]


def test_plain_mode_failure_names_the_step_and_elapsed_time_then_raises() -> None:
    clock = FakeClock()
    progress, out = plain(clock)

    def fail() -> None:
        with progress.step("debootstrap") as s:
            clock.t += 63
            s.update("I: Retrieving Packages")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail()
    assert out.getvalue().splitlines() == [
        "[t] debootstrap …",
        "[t] … still debootstrap: 1 min 3 s, I: Retrieving Packages",
        "[t] debootstrap: FAILED after 1 min 3 s",
    ]


def test_plain_messages_and_nested_steps() -> None:
    clock = FakeClock()
    progress, out = plain(clock)
    progress("hello")
    with progress.step("outer"):
        clock.t += 1
        with progress.step("inner"):
            clock.t += 2
    assert out.getvalue().splitlines() == [
        "[t] hello",
        "[t] outer …",
        "[t] inner …",
        "[t] inner: done in 2.0 s",
        "[t] outer: done in 3.0 s",
    ]


def test_background_ticker_writes_heartbeats_while_a_step_is_silent() -> None:
    out = io.StringIO()
    progress = Progress(live=False, stream=out, heartbeat_s=0.05, tick_s=0.01)
    import time

    with progress.step("waiting"):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "waiting …" and lines[-1].startswith("waiting: done in")
    assert any(line.startswith("… still waiting: ") for line in lines[1:-1])


def test_live_mode_draws_the_step_and_prints_a_final_line() -> None:
    out = io.StringIO()
    progress = Progress(live=True, stream=out, tick_s=None)
    with progress.step("building") as s:
        s.update("[ 34%] Building ggml.c")
        rendered = progress._render()
        assert "building" in str(rendered.text) and "[ 34%] Building ggml.c" in str(rendered.text)
        progress("a message above the live line")
    with pytest.raises(ValueError, match="bad"), progress.step("failing"):
        raise ValueError("bad")
    text = out.getvalue()
    assert "a message above the live line" in text
    assert "✓ building: done in" in text
    assert "✗ failing: FAILED after" in text


def test_mode_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert is_live(Tty())
    assert not is_live(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not is_live(Tty())
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TERM", "dumb")
    assert not is_live(Tty())
    assert Progress(stream=Tty()).live is False


def test_format_elapsed_and_one_line() -> None:
    assert format_elapsed(0.42) == "0.4 s"
    assert format_elapsed(42.9) == "42 s"
    assert format_elapsed(312) == "5 min 12 s"
    assert format_elapsed(3900) == "1 h 5 min"
    assert one_line("Collecting torch\r 50%\r100%  \n") == "100%"
    assert one_line("  \n") == ""


def test_step_on_a_plain_callable_is_one_line() -> None:
    said: list[str] = []
    with step(said.append, "installing") as s:
        s.update("Collecting x")
    assert said == ["installing"]


# the testbed's streaming helper -------------------------------------------------------
_SCRIPT = (
    "import sys, time\n"
    "print('[ 10%] Building a', flush=True)\n"
    "print('warning: b', file=sys.stderr, flush=True)\n"
    "sys.stdout.write('Collecting c\\r[ 99%] d\\n'); sys.stdout.flush()\n"
    "sys.stdout.write('no newline at the end')\n"
)


def test_stream_passes_each_line_on_and_copies_everything_to_the_log(tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "build.log"
    with log.open("wb") as sink:
        code, output = stream([sys.executable, "-c", _SCRIPT], sink=sink, on_line=lines.append)
    assert code == 0
    assert lines == [
        "[ 10%] Building a",
        "warning: b",
        "Collecting c",
        "[ 99%] d",
        "no newline at the end",
    ]
    assert log.read_bytes().decode() == output
    assert output == "[ 10%] Building a\nwarning: b\nCollecting c\r[ 99%] d\nno newline at the end"


def test_run_streamed_feeds_a_step_and_fails_with_the_log_tail(tmp_path: Path) -> None:
    clock = FakeClock()
    progress, _out = plain(clock)
    log = tmp_path / "logs" / "x.log"
    with progress.step("building") as s:
        run([sys.executable, "-c", "print('step 1'); print('step 2')"], what="x", log=log,
            on_line=s.update)
        assert s.status == "step 2"
    assert log.read_text() == "step 1\nstep 2\n"
    script = "import sys; print('compiling'); print('error: bad', file=sys.stderr); sys.exit(3)"
    with pytest.raises(TestbedError, match=r"(?s)x failed with exit code 3 .*error: bad"):
        run([sys.executable, "-c", script], what="x", log=log, on_line=lambda _l: None)
    assert "error: bad" in log.read_text()
    with pytest.raises(TestbedError, match="command not found"):
        run(["/nonexistent/cmd"], what="x", on_line=lambda _l: None)
