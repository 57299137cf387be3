"""Ground truth: the simulator's own account of what happened, as JSON lines.

Each line is ``{"t": <epoch seconds>, "event": <name>, ...}``, written with one ``write``
on an append-only descriptor as it happens, so a test or scenario reading the file after a
crash sees every event before it. Events: ``started``, ``ready``, ``oom``, ``dead``,
``request_accepted``, ``request_finished``, ``request_dropped``, ``rejected`` (see
``testbed/simnode/__init__.py``).

**A line cut short.** A process killed while it writes can leave its last line
unfinished: the kernel stops a write at a page boundary once a fatal signal is pending (a
CI run's memory squeeze left ``…,"max_tokens"`` of a ``request_accepted``). The writer
starts a new process's lines on a line of their own, and :func:`parse_truth` reads such a
fragment as what it is — the dying process's last, unfinished event — and refuses any
other unreadable line.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

#: how every line begins (the writer puts ``t`` first)
LINE_START = '{"t":'


class TruthLog:
    """Append-only JSON-lines writer; a no-op when ``path`` is ``None``."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fd: int | None = None
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if _ends_unfinished(path):
                os.write(self._fd, b"\n")  # the previous process died mid-line

    def emit(self, event: str, **fields: Any) -> None:
        if self._fd is None:
            return
        line = json.dumps({"t": time.time(), "event": event, **fields}, separators=(",", ":"))
        os.write(self._fd, (line + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _ends_unfinished(path: str) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return False
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


class TruthFileError(ValueError):
    """A truth line that no death explains: the file is not the simulator's account."""


def parse_truth(text: str) -> tuple[list[dict[str, Any]], int]:
    """The events of a truth file, and how many lines were cut short by a death.

    A line that is not JSON is accepted only as a death's fragment: the file's last line, or
    followed by the next process's ``started`` — on the same line when a writer before this
    module's fix appended it there, or on the next line. Anything else raises
    :class:`TruthFileError`.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    events: list[dict[str, Any]] = []
    cut_short = 0
    for number, line in enumerate(lines, 1):
        try:
            events.append(json.loads(line))
            continue
        except json.JSONDecodeError:
            pass
        appended = _appended_event(line)
        if appended is not None:
            following: dict[str, Any] | None = appended
        elif number < len(lines):
            try:
                following = json.loads(lines[number])
            except json.JSONDecodeError:
                following = None
        else:
            following = {"event": "started"}  # the last line: its writer died writing it
        if following is None or following.get("event") != "started":
            raise TruthFileError(
                f"truth line {number} is not JSON, and no restart follows it: {line[:120]!r}")
        cut_short += 1
        if appended is not None:
            events.append(appended)
    return events, cut_short


def _appended_event(line: str) -> dict[str, Any] | None:
    start = line.rfind(LINE_START, 1)
    if start < 0:
        return None
    try:
        event: dict[str, Any] = json.loads(line[start:])
    except json.JSONDecodeError:
        return None
    return event
