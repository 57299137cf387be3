"""Watching a cut from the clients' side: the moment a node's endpoint stopped answering.

Some faults are confirmed only after the fact. Docker writes its ``disconnect`` event when
the daemon has finished the whole operation (the endpoint left the sandbox, the port
mapping and the proxy went away), not when the node stopped answering. Measured on the
testbed (``bench/partition_cut.py``): the published port stopped answering 4–7 ms after
the API call began, and Docker's event came 115–135 ms after it on an idle machine — and
0.74 s after the cut with the vLLM lane beside it. Dated by that event, a scrape that
failed at the cut is stamped *before* ``t_effect``, and the run reads "not detected"
although monitoring saw the fault at once.

:class:`CutWatch` is the clients' view, taken directly. A thread of its own (so that the
load generator's event loop cannot delay it) sends ``GET <health path> HTTP/1.0`` to the
node's published address back to back while the fault acts. Any status line is an answer;
a refused or reset connection, an end of stream before the status line or no answer within
``timeout_s`` is a failure. :meth:`CutWatch.cut` brackets the cut: the last answer before
the first failure that follows it (the node was reachable then) and that failure (it was
not). ``t_effect`` is the bracket's start (docs/definitions.md, "t_effect"), so no
detection can precede it and every request the cut failed counts as lost.

Every probe goes to the node's own ``base_url``: the address its clients use, on loopback
in the testbed. Times are Unix epoch seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["CutSeen", "CutWatch"]


@dataclass(frozen=True, slots=True)
class CutSeen:
    """The cut, bracketed by two probes (epoch seconds)."""

    #: when the last probe before the first failure got its status line
    last_answer: float
    #: when the first probe after it failed
    first_failure: float
    #: how it failed: ``refused``, ``reset``, ``closed`` (no status line) or ``timeout``
    failure: str
    #: probes sent in all
    probes: int

    @property
    def bracket_s(self) -> float:
        """How wide the bracket is: the cut lies in [last_answer, first_failure]."""
        return self.first_failure - self.last_answer

    def describe(self) -> str:
        return (
            f"the endpoint stopped answering (cut watch: last answer, then {self.failure} "
            f"{self.bracket_s * 1000:.1f} ms later; {self.probes} probes)"
        )


@dataclass(frozen=True, slots=True)
class _Probe:
    sent: float
    done: float
    failure: str | None  # None: answered


class CutWatch:
    """Probe ``host:port`` of ``base_url`` back to back in a thread until :meth:`stop`."""

    def __init__(
        self, base_url: str, path: str = "/health", *, timeout_s: float = 0.25,
        pause_s: float = 0.001,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"cut watch: {base_url!r} is not a plain http:// URL")
        self.address = (url.hostname, url.port or 80)
        self.request = (
            f"GET {path} HTTP/1.0\r\nHost: {url.hostname}\r\nConnection: close\r\n\r\n"
        ).encode()
        self.timeout_s = timeout_s
        self.pause_s = pause_s
        self._probes: list[_Probe] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faultkit-cutwatch", daemon=True)

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> CutSeen | None:
        """Stop probing; the cut it saw (None: no answer followed by a failure)."""
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 1.0)
        return self.cut()

    def wait_answered(self, timeout_s: float) -> bool:
        """Block until one probe was answered (the bracket needs a start); False at timeout."""
        return self._wait(lambda: any(p.failure is None for p in self._probes), timeout_s)

    def wait_cut(self, timeout_s: float) -> CutSeen | None:
        """Block until the cut is seen or ``timeout_s`` passed; the cut, or None."""
        self._wait(lambda: self._cut() is not None, timeout_s)
        return self.cut()

    def cut(self) -> CutSeen | None:
        with self._lock:
            return self._cut()

    # ------------------------------------------------------------------ internals
    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._changed.wait(min(left, 0.05))
            return True

    def _cut(self) -> CutSeen | None:
        last_answer: float | None = None
        for probe in self._probes:
            if probe.failure is None:
                last_answer = probe.done
            elif last_answer is not None:
                return CutSeen(last_answer, probe.done, probe.failure, len(self._probes))
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.time()
            failure = self._probe_once()
            with self._changed:
                self._probes.append(_Probe(sent, time.time(), failure))
                self._changed.notify_all()
            time.sleep(self.pause_s)

    def _probe_once(self) -> str | None:
        try:
            with socket.create_connection(self.address, timeout=self.timeout_s) as sock:
                sock.sendall(self.request)
                head = sock.recv(16)
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timeout"
        except OSError:
            return "reset"
        return None if head.startswith(b"HTTP/") else "closed"
