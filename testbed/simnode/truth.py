"""Ground truth: the simulator's own account of what happened, as JSON lines.

Each line is ``{"t": <epoch seconds>, "event": <name>, ...}`` and is flushed as written, so
a test or scenario reading the file after a crash sees every event before it. Events:
``started``, ``ready``, ``oom``, ``dead``, ``request_accepted``, ``request_finished``,
``request_dropped``, ``rejected`` (see ``testbed/simnode/__init__.py``).
"""

from __future__ import annotations

import json
import os
import time
from typing import IO, Any


class TruthLog:
    """Append-only JSON-lines writer; a no-op when ``path`` is ``None``."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the process

    def emit(self, event: str, **fields: Any) -> None:
        if self._fh is None:
            return
        line = json.dumps({"t": time.time(), "event": event, **fields}, separators=(",", ":"))
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
