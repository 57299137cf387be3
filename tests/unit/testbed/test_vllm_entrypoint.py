"""The vLLM node's PID-1 wrapper (testbed/vllm/entrypoint.py), exercised on the host.

The wrapper must (1) turn an unrequested exit 0 into exit 3 so Docker's on-failure policy
restarts the node, (2) forward stop signals to the whole process group and pass the
child's status on, and (3) kill what is left of the group when the main child dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.vllm import entrypoint

ENTRYPOINT = Path(entrypoint.__file__)


def _run_wrapper(script: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    child = tmp_path / "child.py"
    child.write_text(script)
    return subprocess.Popen(
        [sys.executable, str(ENTRYPOINT), sys.executable, str(child), str(tmp_path)],
        env={**os.environ, "FAULTKIT_VLLM_GRACE_S": "1"},
        stderr=subprocess.PIPE,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def _wait_file(path: Path, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


# A child that starts a grandchild ignoring SIGTERM (like vLLM's engine core, which
# outlives the API server) in its own process group, records its pid, then does `ACTION`.
CHILD = """
import os, signal, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1])
grand = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
(out / "grandchild").write_text(str(grand.pid))
{action}
"""


@pytest.mark.parametrize(
    ("returncode", "stop_requested", "expected"),
    [(0, False, 3), (0, True, 0), (1, False, 1), (1, True, 1), (-9, False, 137), (-15, True, 143)],
)
def test_exit_status_mapping(returncode: int, stop_requested: bool, expected: int) -> None:
    assert entrypoint.exit_status(returncode, stop_requested) == expected


def test_unrequested_exit_zero_becomes_3_and_orphans_are_killed(tmp_path: Path) -> None:
    proc = _run_wrapper(CHILD.format(action="time.sleep(0.3); sys.exit(0)"), tmp_path)
    _, err = proc.communicate(timeout=20)
    grandchild = int(_wait_file(tmp_path / "grandchild"))
    assert proc.returncode == entrypoint.UNREQUESTED_EXIT
    assert b"without being asked to stop" in err
    assert not _alive(grandchild), "the wrapper left the engine-like grandchild running"


def test_sigterm_is_forwarded_and_status_passed_on(tmp_path: Path) -> None:
    action = (
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "(out / 'ready').write_text('1')\n"
        "time.sleep(60)"
    )
    proc = _run_wrapper(CHILD.format(action=action), tmp_path)
    _wait_file(tmp_path / "ready")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    grandchild = int(_wait_file(tmp_path / "grandchild"))
    assert proc.returncode == 0, "a requested stop must not look like a failure"
    assert not _alive(grandchild)


def test_child_killed_by_signal_exits_128_plus_n_and_drains_group(tmp_path: Path) -> None:
    action = "(out / 'ready').write_text(str(os.getpid()))\ntime.sleep(60)"
    proc = _run_wrapper(CHILD.format(action=action), tmp_path)
    child_pid = int(_wait_file(tmp_path / "ready"))
    grandchild = int(_wait_file(tmp_path / "grandchild"))
    os.kill(child_pid, signal.SIGKILL)  # "SIGKILL of the API server alone"
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGKILL
    assert b"SIGKILL" in err  # the grandchild ignored SIGTERM and had to be killed
    assert not _alive(grandchild)


def test_nonzero_exit_is_passed_on(tmp_path: Path) -> None:
    proc = _run_wrapper(CHILD.format(action="sys.exit(1)"), tmp_path)
    proc.communicate(timeout=20)
    assert proc.returncode == 1
