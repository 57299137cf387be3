"""PID 1 of the vLLM node's container: run vLLM in its own process group, make crashes visible.

Usage (inside the container, with the base image's ``python3``; standard library only)::

    python3 /opt/faultkit-vllm/entrypoint.py PROGRAM [ARGS...]

Why it exists — two facts about vLLM (0.32, V1 engine) found on this machine:

1. When the engine core process dies, the API server turns ``/health`` to 503, ends open
   streams with an SSE error event, and then **exits with code 0**. Docker's ``on-failure``
   restart policy ignores exit 0, so a crashed node would stay down.
2. The engine core runs as separate processes. If only the API server is SIGKILLed, those
   processes are orphaned and keep running (and keep their memory).

Contract:

* PROGRAM is started as the leader of a new process group (session).
* SIGTERM, SIGINT, SIGHUP and SIGQUIT are forwarded to the whole group. Once such a
  signal arrived, the stop was requested, and the child's own exit status is passed on
  (``docker stop`` → normally 0 → no restart under ``on-failure``).
* When the child exits, whatever is left of its group is sent SIGTERM, then SIGKILL after
  ``FAULTKIT_VLLM_GRACE_S`` seconds (default 5), and every child is reaped (we are PID 1).
* Exit status: the child's status if non-zero; 128+N if the child died of signal N; and
  **3** if the child exited 0 without a stop having been requested — i.e. vLLM shut itself
  down, which in a server only happens after an engine death. ``on-failure`` then restarts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import FrameType

UNREQUESTED_EXIT = 3
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_PREFIX = "faultkit-vllm-entrypoint:"


def _log(message: str) -> None:
    print(f"{_PREFIX} {message}", file=sys.stderr, flush=True)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def _reap_all() -> None:
    """Collect every exited child without blocking (orphans are re-parented to PID 1)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _drain_group(pgid: int, grace_s: float) -> None:
    """SIGTERM what is left of the group, SIGKILL it after ``grace_s``, reap everything."""
    if not _signal_group(pgid, signal.SIGTERM):
        _reap_all()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap_all()
        if not _group_alive(pgid):
            return
        time.sleep(0.1)
    _log(f"process group {pgid} still alive after {grace_s:g}s: SIGKILL")
    _signal_group(pgid, signal.SIGKILL)
    time.sleep(0.2)
    _reap_all()


def exit_status(returncode: int, stop_requested: bool) -> int:
    """Map the child's ``Popen.returncode`` to this process's exit status (see module doc)."""
    if returncode < 0:
        return 128 + (-returncode)
    if returncode == 0 and not stop_requested:
        return UNREQUESTED_EXIT
    return returncode


def main(argv: list[str]) -> int:
    if not argv:
        _log("usage: entrypoint.py PROGRAM [ARGS...]")
        return 2
    grace_s = float(os.environ.get("FAULTKIT_VLLM_GRACE_S", "5"))
    stop_requested = False
    child = subprocess.Popen(argv, start_new_session=True)
    pgid = child.pid

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stop_requested
        stop_requested = True
        _signal_group(pgid, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)

    while True:  # reap everything (we may be PID 1) until the main child is gone
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            break
    returncode = child.returncode if child.returncode is not None else 1
    _drain_group(pgid, grace_s)
    code = exit_status(returncode, stop_requested)
    if code == UNREQUESTED_EXIT:
        _log("vLLM exited 0 without being asked to stop (engine death?): exiting 3 so the "
             "restart policy acts")
    else:
        _log(f"vLLM exited with {returncode}; exiting {code}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
