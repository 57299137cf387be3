"""The :class:`Platform` interface: everything a fault does to a node, in one small set of
verbs (the package docstring, :mod:`faultkit.platform`, says why and lists them)."""

from __future__ import annotations

import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from faultkit.docker.containers import ContainerSpec, ContainerState
from faultkit.docker.host import DockerHost
from faultkit.errors import FaultRefused
from faultkit.platform.helpers import HELPER_LABEL, Netns

__all__ = ["Platform"]


class Platform(ABC):
    """What a fault does to a node, one per Docker host: the Docker-API verbs (concrete,
    through the node's own engine, ``host``) and the host-kernel verbs (abstract: each
    implementation reaches the node's kernel its own way)."""

    def __init__(self, url: str, host: DockerHost) -> None:
        self.url = url
        self.host = host

    # the container, read through the node's Docker API --------------------------------
    def inspect(self, container: str) -> dict[str, Any]:
        """The container's ``docker inspect`` attributes, read now."""
        return self.host.inspect(container)

    def state(self, container: str) -> ContainerState:
        """Status, exit code, OOMKilled, restart count and PID, read now."""
        return self.host.state(container)

    def host_pid(self, container: str) -> int:
        """The main process's PID as the engine reports it; raises if it is not running
        (``kill docker_kill=true`` compares it after the kill: no proof is needed to read)."""
        return self.host.host_pid(container)

    def events(self, container: str, since: float, until: float) -> list[dict[str, Any]]:
        """The engine's own events for the container between two epoch times, oldest first
        (a ``die`` carries the exit code that a restart has already reset in ``state``)."""
        return self.host.events(container, since, until)

    def last_exit_code(self, container: str, since: float) -> int | None:
        """The exit code of the container's last ``die`` since ``since`` (epoch seconds),
        None without one: its state's ``ExitCode`` reads 0 again once the restart policy
        starts it, so a crash looping at start-up would read "exit 0" there."""
        codes = [((e.get("Actor") or {}).get("Attributes") or {}).get("exitCode")
                 for e in self.events(container, since, time.time()) if e.get("Action") == "die"]
        known = [int(c) for c in codes if c is not None and str(c).lstrip("-").isdigit()]
        return known[-1] if known else None

    def logs(self, container: str, *, tail: int = 200, since: float | None = None) -> str:
        """The container's last log lines (a failed rollout's candidate keeps them)."""
        return self.host.logs(container, tail=tail, since=since)

    def endpoints(self, container: str) -> dict[str, dict[str, Any]]:
        """Network name → endpoint settings: what a reconnect must restore."""
        return self.host.endpoints(container)

    def spec_of(self, container: str) -> ContainerSpec:
        """The container's config as a spec, to recreate it as it was."""
        return self.host.spec_of(container)

    def memory_limits(self, container: str) -> tuple[int, int]:
        """(memory, memory+swap) limits in bytes, exactly as a restore must set them."""
        return self.host.memory_limits(container)

    def memory_usage(self, container: str) -> int:
        """Memory used now, in bytes (a squeeze sets its limit below it)."""
        return self.host.memory_usage(container)

    def running_names(self, label: str | None = None) -> list[str]:
        """The running containers on the node's host (``label``: only those carrying it):
        a host-wide fault names what it reaches before it acts."""
        return self.host.running_names(label)

    def engine_answers(self, timeout_s: float = 2.0) -> bool:
        """Whether the node's engine answers now, asked on a fresh connection (a restarting
        host drops the one ``host`` keeps); never raises."""
        return DockerHost(self.url, timeout_s=timeout_s).ping()

    # the container, acted on through the node's Docker API ----------------------------
    def pause(self, container: str) -> None:
        """Freeze every process of the container (its port stays open)."""
        self.host.pause(container)

    def stop(self, container: str, *, timeout_s: int = 10) -> None:
        """A graceful stop: SIGTERM, SIGKILL after ``timeout_s`` (a manual stop)."""
        self.host.stop(container, timeout_s=timeout_s)

    def start(self, container: str) -> None:
        """Start the container (one its restart policy left down)."""
        self.host.start(container)

    def restart(self, container: str, *, timeout_s: int = 10) -> None:
        """Stop (grace ``timeout_s``) and start the container again."""
        self.host.restart(container, timeout_s=timeout_s)

    def docker_kill(self, container: str, signal: str = "SIGKILL") -> None:
        """Kill through the engine: a *manual* stop that no restart policy undoes (unlike
        :meth:`crash`)."""
        self.host.docker_kill(container, signal)

    def remove(self, container: str, *, force: bool = True) -> None:
        """Remove the container (a rollout replaces it)."""
        self.host.remove(container, force=force)

    def create(self, spec: ContainerSpec, *, start: bool = True) -> None:
        """Create the container ``spec`` describes, and start it unless ``start`` is False."""
        self.host.create(spec, start=start)

    def disconnect(self, container: str, network: str) -> None:
        """Cut the container off one network (a partition that refuses connections)."""
        self.host.disconnect(container, network)

    def connect(self, container: str, network: str, *, aliases: list[str] | None = None,
                ipv4_address: str | None = None, links: list[str] | None = None) -> None:
        """Attach the container to a network with these aliases, address and links."""
        self.host.connect(container, network, aliases=aliases, ipv4_address=ipv4_address,
                          links=links)

    def set_memory_limits(self, container: str, memory: int, memswap: int) -> None:
        """Set both memory limits exactly (the kernel OOM-kills a process over them)."""
        self.host.set_memory_limits(container, memory, memswap)

    def exec(self, container: str, command: list[str]) -> tuple[int, str]:
        """Run ``command`` inside the running container; (exit code, output)."""
        return self.host.exec(container, command)

    # the node's kernel ------------------------------------------------------------------
    @property
    @abstractmethod
    def uses_helpers(self) -> bool:
        """True when acts run in helper containers on the node's host (journal their sweep)."""

    @abstractmethod
    def netns(self, container: str, fault_id: str) -> Netns:
        """Where to run iptables/tc for ``container`` (running; its PID proven where used).

        Raises :class:`FaultError` when the container is not running, :class:`FaultRefused`
        when a local PID is not proven to be the container's."""

    @abstractmethod
    def processes(self, container: str, fault_id: str) -> tuple[int, list[tuple[int, str]]]:
        """(main PID, every process of the container as (PID, command line)), PIDs as the
        node's host sees them; refused unless each is proven to be the container's."""

    @abstractmethod
    def signal_processes(self, container: str, pids: Sequence[int], sig: signal.Signals,
                         fault_id: str) -> list[int]:
        """Send ``sig`` to each of ``pids`` that is (still) a process of ``container``: a
        crash, as the kernel or an OOM kill would end it (the restart policy applies).

        The pids signalled: one that exited after it was listed is skipped, not refused (a
        fault's first signal may end its siblings); one alive but not proven the
        container's is refused (:class:`FaultRefused`)."""

    @abstractmethod
    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        """Whether every one of ``pids`` has exited (or is a zombie) within ``within_s``."""

    @abstractmethod
    def wait_stopped(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        """Whether every one of ``pids`` is stopped by a signal (state ``T``: a SIGSTOP took
        hold) within ``within_s``."""

    def crash(self, container: str, fault_id: str,
              sig: signal.Signals = signal.SIGKILL) -> int:
        """Signal the container's main process (``kill``: a crash); the PID signalled."""
        main, _ = self.processes(container, fault_id)
        if not self.signal_processes(container, [main], sig, fault_id):
            raise FaultRefused(f"refused: the main process of {container!r} (pid {main}) "
                               "exited before its signal. Nothing was done.")
        return main

    def helper_steps(self, fault_id: str) -> list[dict[str, Any]]:
        """Undo steps that remove the helpers a fault may leave behind (none locally)."""
        if not self.uses_helpers:
            return []
        return [{"op": "helpers_remove", "host": self.url, "container": None,
                 "label": f"{HELPER_LABEL}={fault_id}"}]
