"""iptables and tc inside a container's network namespace or the host's.

Where a command runs is a :data:`faultkit.platform.Netns`: a host PID proven to be the
container's (``nsenter -t PID -n``, the node's engine on this machine), a
:class:`~faultkit.platform.HelperNetns` (a helper container joined to the container's
namespace on the node's own Docker host), or ``None`` (this machine's own namespace).

Every rule the harness adds carries ``-m comment --comment faultkit:<fault-id>`` and every
root qdisc it adds uses handle :data:`QDISC_HANDLE` (``fa17:``), so the sweep can find
and delete exactly what the harness made and nothing else. Needs root (or CAP_NET_ADMIN
and CAP_SYS_ADMIN for ``nsenter``) on this machine for the first and the last; the
helper gets ``NET_ADMIN`` on the node's host.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence

from faultkit.errors import FaultError, FaultUnsupported
from faultkit.platform import HelperNetns, Netns

Proc = subprocess.CompletedProcess[str]

#: Handle of every root qdisc the harness installs ("labels" a qdisc as ours).
QDISC_HANDLE = "fa17:"
COMMENT_PREFIX = "faultkit:"


def comment_for(fault_id: str) -> str:
    return f"{COMMENT_PREFIX}{fault_id}"


def _run(pid: Netns, argv: Sequence[str], *, check: bool = True) -> Proc:
    if isinstance(pid, HelperNetns):
        proc = pid.run(argv)
        if check and proc.returncode != 0:
            raise FaultError(
                f"`{shlex.join(argv)}` in the netns of {pid.container} on {pid.host.url} (a "
                f"helper container) failed (exit {proc.returncode}): {proc.stdout.strip()}")
        return proc
    tool = argv[0]
    if shutil.which(tool) is None:
        raise FaultUnsupported(f"`{tool}` is not installed on this host; install iptables/iproute2")
    full = list(argv) if pid is None else ["nsenter", "-t", str(pid), "-n", *argv]
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FaultError(f"`{shlex.join(full)}` failed: {exc}") from exc
    if check and proc.returncode != 0:
        where = "the host" if pid is None else f"netns of pid {pid}"
        raise FaultError(
            f"`{shlex.join(argv)}` in {where} failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}; the harness needs root on the Docker host"
        )
    return proc


def iptables(pid: Netns, args: Sequence[str], *, check: bool = True) -> Proc:
    """Run ``iptables -w ARGS`` in the namespace (``-w`` waits for the xtables lock)."""
    return _run(pid, ["iptables", "-w", "5", *args], check=check)


def tc(pid: Netns, args: Sequence[str], *, check: bool = True) -> Proc:
    return _run(pid, ["tc", *args], check=check)


def add_rule(pid: Netns, table: str, chain: str, spec: Sequence[str], fault_id: str) -> None:
    """Insert a rule at the top of ``chain``, tagged with the fault's comment."""
    tag = ["-m", "comment", "--comment", comment_for(fault_id)]
    iptables(pid, ["-t", table, "-I", chain, *spec, *tag])


def tagged_rules(pid: Netns, table: str, prefix: str = COMMENT_PREFIX) -> list[str]:
    """``iptables -S`` lines of ``table`` whose comment starts with ``prefix``."""
    out = iptables(pid, ["-t", table, "-S"]).stdout
    return [
        line for line in out.splitlines()
        if line.startswith("-A ")
        and (f"--comment {prefix}" in line or f'--comment "{prefix}' in line)
    ]


def matched_packets(pid: Netns, table: str, comment: str) -> int:
    """Packets matched so far by the rules of ``table`` tagged exactly ``comment``.

    Read from ``iptables -L -v -x -n``, whose lines start with the packet counter and end
    with the rule's ``/* comment */``.
    """
    out = iptables(pid, ["-t", table, "-L", "-v", "-x", "-n"]).stdout
    total = 0
    for line in out.splitlines():
        fields = line.split()
        if f"/* {comment} */" in line and fields and fields[0].isdigit():
            total += int(fields[0])
    return total


def purge_rules(pid: Netns, table: str, comment: str) -> int:
    """Delete every rule of ``table`` tagged ``comment`` (exact or prefix); return how many."""
    removed = 0
    for line in tagged_rules(pid, table, comment):
        argv = shlex.split(line)
        argv[0] = "-D"
        if iptables(pid, ["-t", table, *argv], check=False).returncode == 0:
            removed += 1
    return removed


def interfaces(pid: Netns) -> list[str]:
    """Non-loopback interfaces of the namespace (e.g. ``eth0``)."""
    out = _run(pid, ["ip", "-o", "link", "show"]).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) >= 2:
            name = parts[1].strip().split("@")[0]
            if name and name != "lo":
                names.append(name)
    return names


def root_qdisc_is_ours(pid: Netns, dev: str) -> bool:
    out = tc(pid, ["qdisc", "show", "dev", dev], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == QDISC_HANDLE and "root" in parts:
            return True
    return False


def add_root_qdisc(pid: Netns, dev: str, qdisc: Sequence[str]) -> None:
    """``tc qdisc add dev DEV root handle fa17: QDISC...``; unknown kinds → FaultUnsupported."""
    argv = ["qdisc", "add", "dev", dev, "root", "handle", QDISC_HANDLE, *qdisc]
    proc = tc(pid, argv, check=False)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        if "qdisc kind is unknown" in err:
            raise FaultUnsupported(
                f"this kernel has no `sch_{qdisc[0]}` module ({err}); "
                f"load it (`modprobe sch_{qdisc[0]}`) or use a mode that does not need it"
            )
        raise FaultError(f"`tc qdisc add dev {dev} root {shlex.join(qdisc)}` failed: {err}")


def delete_root_qdisc(pid: Netns, dev: str) -> bool:
    """Delete the root qdisc of ``dev`` if it is ours (handle fa17:); True if one was deleted."""
    if not root_qdisc_is_ours(pid, dev):
        return False
    return tc(pid, ["qdisc", "del", "dev", dev, "root"], check=False).returncode == 0


def netem_available(pid: Netns = None) -> bool:
    """Whether ``tc … netem`` works in the namespace (probes ``lo`` with 0 ms, removed at once)."""
    probe_pid = pid
    proc = tc(probe_pid, ["qdisc", "add", "dev", "lo", "root", "handle", QDISC_HANDLE, "netem",
                          "delay", "0ms"], check=False)
    if proc.returncode == 0:
        tc(probe_pid, ["qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False
