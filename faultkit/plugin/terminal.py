"""The live status line on pytest's terminal: drawn below pytest's row, gone before it writes.

:class:`LiveLine` draws the current test's :class:`~faultkit.experiment.live.LiveStatus`
about four times a second (and at once on a phase change). It shares the terminal with
pytest, which writes a test's id (``-v``) or its file name and dots (``-q``) and then, on
that same row, the test's result. So the line never touches pytest's row: it opens a row
below it (``\\n``), rewrites itself there in place (``\\r`` + text + clear-to-end-of-line),
and before pytest writes anything — a test's start, each of its reports, its end, a
traceback for ``--pdb`` (the hook wrappers of :class:`LiveHooks`) — it erases itself and
puts the cursor back on pytest's row, at the column where pytest left it. pytest's output
then reads exactly as it does without the line. It writes to a duplicate of the terminal's
file descriptor, taken between tests: pytest's capture redirects descriptor 1 while a test
runs, never this one, so nothing of the line reaches a test's captured output or JUnit XML.

When it draws (:func:`live_wanted`): with ``--faultkit-live`` (``$FAULTKIT_LIVE``, ini
``faultkit_live``) ``auto``, the default, when pytest writes to a terminal — the decision
:func:`faultkit.runtime.progress.is_live` makes for the CLI: a tty, not ``CI``, not ``TERM=dumb`` —
with the tests' output captured (not ``-s``, not ``--capture=tee-sys``) and without live
logging (``log_cli``), whose lines would be written into it; ``on`` draws whatever the
stream; ``off`` never. An xdist worker never draws: its output is not a terminal (the
controller prints its results). Where it does not draw, nothing replaces it — no plain
lines per phase either: pytest's ``-v`` writes a test's id and its result on one row, and a
line in between would split them. CI logs keep pytest's output as it always was; each
run's timeline is in its run directory.

Not :mod:`rich`, which :mod:`faultkit.runtime.progress` uses for the CLI: ``rich.live`` owns the
region it redraws, where this line must give pytest's row back exactly as it found it. The
CLI's decision (:func:`~faultkit.runtime.progress.is_live`) and time format are reused.

Light (pytest, the standard library and :mod:`faultkit.experiment.live`): the plugin's entry
module imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from typing import TextIO

import pytest

from faultkit.experiment.live import LiveStatus, render
from faultkit.runtime.progress import is_live

__all__ = ["INTERVAL_S", "LiveHooks", "LiveLine", "live_wanted", "start_live"]

#: how often the line is redrawn, seconds
INTERVAL_S = 0.25

#: to the start of the row, and clear from the cursor to the end of the row
_CR, _CLEAR_EOL = "\r", "\x1b[K"
#: the cursor one row up
_UP = "\x1b[A"


def _column(n: int) -> str:
    """The cursor to column ``n`` (1-based) of its row."""
    return f"\x1b[{n}G"


class LiveLine:
    """Draws the attached :class:`LiveStatus` on ``stream`` (see the module docstring).

    ``column()`` is how far pytest has written on its current row (the terminal writer's
    ``width_of_current_line``); ``width()`` the terminal's width in columns. A background
    thread redraws every ``interval_s`` (started by the first :meth:`attach`); a phase
    change redraws at once. The line is redrawn only when its text changed. A write that
    fails (a closed terminal) turns the line off for the rest of the session; it never
    fails a test.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        column: Callable[[], int],
        width: Callable[[], int],
        markup: bool = False,
        interval_s: float | None = INTERVAL_S,
        owns_stream: bool = False,
    ) -> None:
        self.stream = stream
        self.column = column
        self.width = width
        self.markup = markup
        self.interval_s = interval_s
        self._owns_stream = owns_stream
        self._lock = threading.RLock()
        self._status: LiveStatus | None = None
        self._holds = 0
        self._shown: str | None = None  # the text on screen, None: nothing drawn
        self._below: int | None = None  # pytest's column, when the line has a row below it
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what is shown
    def attach(self, status: LiveStatus) -> None:
        """Show ``status`` (one test at a time: it replaces the previous one)."""
        with self._lock:
            if self._closed:
                return
            if self._status is not None:
                self._status.on_change = None
            self._status = status
            status.on_change = self.refresh
            self._start_thread()
        self.refresh()

    def detach(self, status: LiveStatus) -> None:
        """Stop showing ``status`` and erase the line."""
        with self._lock:
            status.on_change = None
            if self._status is status:
                self._status = None
                self._erase()

    def refresh(self) -> None:
        """Draw the attached status now (unless held, closed or unchanged)."""
        with self._lock:
            if self._closed or self._holds or self._status is None:
                return
            width = self.width() - 1  # never the last column: the terminal would wrap
            text = render(self._status.snapshot(), width, markup=self.markup)
            if text == self._shown:
                return
            out = ""
            if self._shown is None:
                col = self.column()
                if col >= width:
                    return  # pytest's row fills the width: no column to come back to
                if col > 0:
                    out, self._below = "\n", col
                else:
                    self._below = None
            self._write(out + _CR + text + _CLEAR_EOL)
            self._shown = text

    # -- getting out of pytest's way
    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Erase the line and draw nothing until the block ends (pytest writes in it)."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def hold(self) -> None:
        with self._lock:
            self._holds += 1
            self._erase()

    def release(self) -> None:
        with self._lock:
            self._holds = max(0, self._holds - 1)

    def _erase(self) -> None:
        if self._shown is None:
            return
        out = _CR + _CLEAR_EOL
        if self._below is not None:
            out += _UP + _column(self._below + 1)
        self._shown, self._below = None, None
        self._write(out)

    def close(self) -> None:
        """Erase the line, stop the thread and close the stream if it is this line's own;
        idempotent."""
        with self._lock:
            if self._closed:
                return
            self._erase()
            self._closed = True
            self._status = None
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        if self._owns_stream:
            with contextlib.suppress(OSError, ValueError):
                self.stream.close()

    # -- plumbing
    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, never fail a test
            self._closed = True
            self._stop.set()

    def _start_thread(self) -> None:
        if self.interval_s is None or self._thread is not None:
            return
        stop, interval = self._stop, self.interval_s

        def run() -> None:
            while not stop.wait(interval):
                self.refresh()

        self._thread = threading.Thread(target=run, name="faultkit-live", daemon=True)
        self._thread.start()


# --------------------------------------------------------------------------- in a pytest session


def live_wanted(mode: str, stream: TextIO, *, worker: bool, capture: str, log_cli: bool) -> bool:
    """Whether the session draws live lines (see the module docstring): never in an xdist
    worker or with ``off``; with ``on``, always; with ``auto``, when ``stream`` is a
    terminal (:func:`~faultkit.runtime.progress.is_live`), ``capture`` is ``fd`` or ``sys`` and
    ``log_cli`` is off."""
    if worker or mode == "off":
        return False
    if mode == "on":
        return True
    return capture in ("fd", "sys") and not log_cli and is_live(stream)


def _log_cli(config: pytest.Config) -> bool:
    """pytest's own test: live logging is on (``--log-cli-level`` or ini ``log_cli``)."""
    if config.getoption("log_cli_level", None) is not None:
        return True
    try:
        return bool(config.getini("log_cli"))
    except ValueError:  # -p no:logging: no such ini key
        return False


def _own_stream(stream: TextIO) -> tuple[TextIO, bool]:
    """A stream of this line's own onto ``stream``'s terminal: a duplicate of its file
    descriptor (called between tests, when descriptor 1 is the terminal and not a test's
    captured output), and whether it is one. A stream without a descriptor (pytester's
    in-process runs) is used as it is."""
    try:
        fd = os.dup(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return stream, False
    return os.fdopen(fd, "w", encoding="utf-8", errors="replace"), True


def start_live(config: pytest.Config, mode: str) -> LiveLine | None:
    """The session's live line, with :class:`LiveHooks` registered, if the session draws
    one (:func:`live_wanted`); call it between tests (the plugin does, once collection is
    done)."""
    if config.pluginmanager.get_plugin("terminalreporter") is None:
        return None  # -p no:terminal
    writer = config.get_terminal_writer()
    # pytest keeps the writer's stream private; it is sys.stdout as pytest found it
    target: TextIO = getattr(writer, "_file", None) or sys.stdout
    worker = hasattr(config, "workerinput") or bool(os.environ.get("PYTEST_XDIST_WORKER"))
    capture = str(config.getoption("capture", "no"))
    if not live_wanted(mode, target, worker=worker, capture=capture, log_cli=_log_cli(config)):
        return None
    stream, owned = _own_stream(target)

    def width() -> int:
        # this descriptor's size: during a test pytest's own guess reads descriptor 1,
        # which is then the captured output (and says 80)
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return writer.fullwidth

    line = LiveLine(
        stream,
        column=lambda: writer.width_of_current_line,
        width=width,
        markup=writer.hasmarkup,
        owns_stream=owned,
    )
    config.pluginmanager.register(LiveHooks(line), LiveHooks.NAME)
    return line


class LiveHooks:
    """Keeps pytest's own output clean: the line is erased, and held, while pytest writes a
    test's start, its reports, its end and an exception it hands to ``--pdb``; it is closed
    for good when a debugger starts and when the session ends or is interrupted."""

    NAME = "faultkit-live"

    def __init__(self, line: LiveLine) -> None:
        self.line = line

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self) -> Generator[None, object, object]:
        with self.line.held():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self) -> Generator[None, object, object]:
        with self.line.held():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self) -> Generator[None, object, object]:
        with self.line.held():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_exception_interact(self) -> Generator[None, object, object]:
        with self.line.held():  # --pdb: pytest prints the traceback, then the debugger runs
            return (yield)

    def pytest_enter_pdb(self) -> None:
        # a debugging session owns the terminal from here on (its ends are not always
        # reported: quitting post-mortem never calls pytest_leave_pdb)
        self.line.close()

    def pytest_keyboard_interrupt(self) -> None:
        self.line.close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.line.close()

    def pytest_unconfigure(self) -> None:
        self.line.close()
