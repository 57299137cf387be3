"""The kernel's own record of OOM kills: evidence no part of faultkit produced.

When a report says the kernel OOM-killed a node's engine, the truth table checks it against
the kernel log: an ``oom-kill:`` line whose ``task_memcg`` names the node's container (its
ID, also inside a nested Docker host's cgroup path) inside the run's window. Docker's own
event stream cannot serve: the daemon keeps only its last 256 events in memory, and a host
restart forgets them all.

:class:`KernelLog` records ``dmesg --follow`` for the session (the ring buffer may wrap in a
long catalogue); :func:`oom_kills` parses any such text. Kernel times are seconds since
boot, turned into epoch seconds with the boot time read once (``/proc/uptime``).
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_OOM_LINE = re.compile(r"^\[\s*(?P<t>\d+\.\d+)\] oom-kill:.*task_memcg=(?P<memcg>\S+?),"
                       r"task=(?P<task>[^,]+),pid=(?P<pid>\d+)", re.M)


@dataclass(frozen=True)
class OomKill:
    t: float  # epoch seconds
    memcg: str
    task: str


def boot_epoch() -> float:
    """When this machine booted, in epoch seconds (kernel log times count from it)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - uptime


def oom_kills(text: str, booted: float) -> list[OomKill]:
    return [OomKill(booted + float(m.group("t")), m.group("memcg"), m.group("task"))
            for m in _OOM_LINE.finditer(text)]


class KernelLog:
    """``dmesg --follow`` into a file for as long as it is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.booted = boot_epoch()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> KernelLog:
        out = self.path.open("wb")
        self._proc = subprocess.Popen(["dmesg", "--follow"], stdout=out,
                                      stderr=subprocess.DEVNULL)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._proc = None

    def oom_kills(self) -> list[OomKill]:
        text = self.path.read_text(errors="replace") if self.path.exists() else ""
        if not text:  # dmesg could not follow here: read the ring buffer as it is now
            text = subprocess.run(["dmesg"], capture_output=True, text=True,
                                  check=False).stdout
        return oom_kills(text, self.booted)


def oom_killed_in(kills: list[OomKill], container_id: str, since: float,
                  until: float, slack_s: float = 2.0) -> list[OomKill]:
    """The kills of ``container_id``'s processes (a 12-character ID prefix will do) in
    the window, give or take ``slack_s`` for the kernel clock's drift."""
    return [k for k in kills if f"/{container_id}" in k.memcg
            and since - slack_s <= k.t <= until + slack_s]
