"""The lab's own services (Alertmanager, the pager, the blackbox exporter): started in a
session of their own with their output in a log and their PID in a file, waited for until
``/-/ready`` answers, reloaded through ``/-/reload``, and stopped only when the PID in the
file is still the process the testbed started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from testbed._shell import Progress, run
from testbed.errors import TestbedError


def is_ready(url: str) -> bool:
    """``url``/-/ready answers 200 (Prometheus, Alertmanager, the pager, the exporter)."""
    try:
        return httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def write_checked(config: Path, text: str, check: Callable[[Path], list[str]],
                  what: str) -> bool:
    """Make ``config`` hold ``text`` once the command ``check(candidate)`` accepts it; True
    when it changed. A config refused is never written, so an unchanged one was checked
    before."""
    if config.exists() and config.read_text() == text:
        return False
    candidate = config.with_name(config.name + ".new")
    candidate.write_text(text)
    run(check(candidate), what=what)
    os.replace(candidate, config)
    return True


def ensure_serving(url: str, *, what: str, changed: bool, argv: list[str], log: Path,
                   pid_file: Path, progress: Progress, timeout_s: float) -> None:
    """A service at ``url`` running its current config: one that answers is told to reload
    a ``changed`` config; else ``argv`` is started (:func:`start_ready`)."""
    if is_ready(url):
        if changed:
            reload_or_fail(url, what)
        return
    progress(f"starting {what} on {url.removeprefix('http://')} (log: {log})")
    start_ready(argv, what=what, url=url, log=log, pid_file=pid_file, timeout_s=timeout_s)


def start_ready(argv: list[str], *, what: str, url: str, log: Path, pid_file: Path,
                timeout_s: float) -> None:
    """Start ``argv`` in its own session, output to ``log``, PID to ``pid_file``; wait until
    ``url``/-/ready answers 200. TestbedError with the log's tail if it exits or is slow."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError(f"{what} exited with code {proc.returncode} (log: {log}):\n"
                               f"{tail(log)}")
        if is_ready(url):
            return
        time.sleep(0.2)
    raise TestbedError(f"{what} not ready at {url} after {timeout_s:.0f} s (log: {log}):\n"
                       f"{tail(log)}")


def reload_or_fail(url: str, what: str) -> None:
    """Have the running service at ``url`` read its config again."""
    try:
        response = httpx.post(f"{url}/-/reload", timeout=5.0)
    except httpx.HTTPError as exc:
        raise TestbedError(f"{what} at {url} did not answer /-/reload: {exc}") from exc
    if response.status_code != 200:
        raise TestbedError(f"{what} at {url} refused its new config (HTTP "
                           f"{response.status_code}): {response.text.strip()[:300]}")


def tail(log: Path, lines: int = 8) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def stop_by_pid_file(pid_file: Path, marker: bytes) -> bool:
    """SIGTERM (then SIGKILL after 5 s) the process in ``pid_file`` if its command line
    still carries ``marker``; True when one was stopped."""
    if not pid_file.exists():
        return False
    text = pid_file.read_text().strip()
    pid_file.unlink()
    pid = int(text) if text.isdigit() else 0
    if not pid or not is_ours(pid, marker):
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        if not is_ours(pid, marker):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def is_ours(pid: int, marker: bytes) -> bool:
    """``pid`` is alive (not a zombie) and its command line carries ``marker``."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and any(marker in argument for argument in arguments)
