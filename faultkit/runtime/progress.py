"""Live progress for long steps: a spinner line on a terminal, plain lines elsewhere.

::

    progress = Progress(prefix="[testbed] ")
    with progress.step("building llama-server (cmake)") as s:
        ...
        s.update("[ 34%] Building C object ggml.c.o")

On a terminal (``live=True``) one line shows a spinner, the step, its elapsed time and the
latest sub-status, redrawn in place (``rich``). Otherwise (``live=False``; the default when
the stream is not a terminal, ``CI`` is set or ``TERM=dumb``) it writes plain lines: one at
the start, at most one every ``heartbeat_s`` (30 s) with the elapsed time and the latest
sub-status, and one at the end with the total time. A step that raises reports its text and
elapsed time, then the exception propagates. Steps may nest; the innermost is shown.

A :class:`Progress` is also a ``Callable[[str], None]``: ``progress("message")`` prints one
line (above the live line on a terminal). :func:`step` opens a step on either kind.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: plain mode: at most one "still …" line per this many seconds of a step
HEARTBEAT_S = 30.0


def format_elapsed(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``2 min 30 s``, ``1 h 5 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def is_live(stream: TextIO) -> bool:
    """Whether a live line suits ``stream``: a terminal, not CI, not ``TERM=dumb``."""
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed stream
        return False


def one_line(text: str, width: int = 160) -> str:
    """The last non-empty segment of ``text`` (split on newlines and ``\\r``), shortened."""
    for part in reversed(text.replace("\r", "\n").split("\n")):
        part = part.strip()
        if part:
            return part if len(part) <= width else part[: width - 1] + "…"
    return ""


class Step:
    """One running step: :meth:`update` sets its sub-status."""

    def __init__(self, owner: Progress, text: str, started: float) -> None:
        self.owner = owner
        self.text = text
        self.started = started
        self.status = ""
        self.last_line = started

    def update(self, status: str) -> None:
        """Set the latest sub-status (e.g. a subprocess's last output line)."""
        line = one_line(status)
        if line:
            self.status = line
        self.owner._tick()

    def elapsed(self) -> float:
        return self.owner.clock() - self.started


class Progress:
    """Reports steps to ``stream`` (default ``sys.stderr``), live or as plain lines.

    ``live=None`` chooses by :func:`is_live`. ``prefix`` (a string or a function returning
    one, e.g. a timestamp) starts every plain line. ``clock`` is for tests. ``tick_s`` is
    how often a background thread checks for a due plain heartbeat while a step is silent
    (``None``: only :meth:`Step.update` checks).
    """

    def __init__(
        self,
        *,
        live: bool | None = None,
        stream: TextIO | None = None,
        prefix: str | Callable[[], str] = "",
        clock: Callable[[], float] = time.monotonic,
        heartbeat_s: float = HEARTBEAT_S,
        tick_s: float | None = 1.0,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = is_live(self.stream) if live is None else live
        self._prefix = prefix
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.tick_s = tick_s
        self._steps: list[Step] = []
        self._lock = threading.RLock()
        self._live: Any = None  # rich.live.Live while a step runs on a terminal
        self._console: Any = None
        self._spinner: Any = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    # plain lines ----------------------------------------------------------------------
    def prefix(self) -> str:
        return self._prefix() if callable(self._prefix) else self._prefix

    def __call__(self, message: str) -> None:
        """One line of its own (above the live line on a terminal)."""
        with self._lock:
            if self._live is not None:
                self._live.console.print(message, markup=False, highlight=False)
            else:
                self._write(message)

    def _write(self, message: str) -> None:
        self.stream.write(f"{self.prefix()}{message}\n")
        self.stream.flush()

    # steps ----------------------------------------------------------------------------
    @contextmanager
    def step(self, text: str, *, report_end: bool = True) -> Iterator[Step]:
        """Run one step: start line/spinner, sub-status via the yielded :class:`Step`, end line.

        ``report_end=False`` leaves out the "done in" line (a command that prints its own
        summary); a failure is always reported.
        """
        s = Step(self, text, self.clock())
        with self._lock:
            self._steps.append(s)
            if self.live:
                self._start_live()
            else:
                self._write(f"{text} …")
                self._start_ticker()
        try:
            yield s
        except BaseException:
            self._finish(s, f"{text}: FAILED after {format_elapsed(s.elapsed())}", ok=False)
            raise
        done = f"{text}: done in {format_elapsed(s.elapsed())}" if report_end else None
        self._finish(s, done, ok=True)

    def _finish(self, s: Step, line: str | None, *, ok: bool) -> None:
        with self._lock:
            if s in self._steps:
                self._steps.remove(s)
            if self._live is not None:
                if line is not None:
                    mark = "✓" if ok else "✗"
                    self._live.console.print(f"{mark} {line}", markup=False, highlight=False)
                if not self._steps:
                    self._live.stop()
                    self._live = None
            else:
                if line is not None:
                    self._write(line)
                if not self._steps:
                    self._stop.set()

    def _tick(self) -> None:
        """Plain mode: write a heartbeat for the innermost step if one is due."""
        if self.live:
            return
        with self._lock:
            if not self._steps:
                return
            s = self._steps[-1]
            now = self.clock()
            if now - s.last_line < self.heartbeat_s:
                return
            s.last_line = now
            status = f", {s.status}" if s.status else ""
            self._write(f"… still {s.text}: {format_elapsed(now - s.started)}{status}")

    def _start_ticker(self) -> None:
        if self.tick_s is None or (self._ticker is not None and self._ticker.is_alive()):
            return
        self._stop = threading.Event()
        stop, interval = self._stop, self.tick_s

        def run() -> None:
            while not stop.wait(interval):
                self._tick()

        self._ticker = threading.Thread(target=run, name="faultkit-progress", daemon=True)
        self._ticker.start()

    # the live line --------------------------------------------------------------------
    def _start_live(self) -> None:
        if self._live is not None:
            return
        from rich.console import Console
        from rich.live import Live

        self._console = self._console or Console(file=self.stream, highlight=False)
        self._live = Live(
            get_renderable=self._render,
            console=self._console,
            refresh_per_second=8,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def _render(self) -> Any:
        from rich.spinner import Spinner
        from rich.text import Text

        if not self._steps:
            return Text("")
        s = self._steps[-1]
        line = Text(f"{s.text}  ", style="bold")
        line.append(format_elapsed(s.elapsed()), style="cyan")
        if s.status:
            line.append(f"  {s.status}", style="dim")
        line.no_wrap = True
        line.overflow = "ellipsis"
        if self._spinner is None:
            self._spinner = Spinner("dots")
        self._spinner.update(text=line)
        return self._spinner


class _NullStep:
    """The step :func:`step` hands out for a plain ``Callable[[str], None]`` reporter."""

    status = ""

    def update(self, status: str) -> None:
        line = one_line(status)
        if line:
            self.status = line


StepLike = Step | _NullStep


@contextmanager
def step(report: Callable[[str], None], text: str) -> Iterator[StepLike]:
    """A step on ``report``: a :class:`Progress`'s own, or one plain line for any callable."""
    if isinstance(report, Progress):
        with report.step(text) as s:
            yield s
        return
    report(text)
    yield _NullStep()
