"""Docker access for nodes: the only module that touches ``docker.errors``.

One :class:`DockerHost` per engine URL (``unix://``, ``tcp://``, ``ssh://``). It finds a
node's container, reads its state (status, exit code, OOMKilled, restart count, times),
its main process's host PID, its logs and labels, and performs the container operations
faults need. Docker SDK exceptions are translated into :mod:`faultkit.errors` with a
message that says what to do, and marked ``transient`` when trying again may help (a 5xx
answer, the engine unreachable, a read timeout).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from faultkit.constants import LABEL_OWNER, LOCAL_DOCKER
from faultkit.docker.containers import (
    ContainerSpec,
    ContainerState,
    _spec_from_attrs,
    spec_from_json,
    spec_to_json,
    state_from_attrs,
)
from faultkit.docker.system import SystemOps
from faultkit.errors import ContainerNotFound, DockerError, DockerUnavailable
from faultkit.probes.clockread import ClockReading, read_clock

__all__ = [
    "ContainerSpec",
    "ContainerState",
    "DockerHost",
    "docker_host",
    "spec_from_json",
    "spec_to_json",
    "state_from_attrs",
]


class DockerHost(SystemOps):
    """A Docker engine reachable at ``url``; cheap to create, connects lazily."""

    def __init__(
        self, url: str = LOCAL_DOCKER, *, timeout_s: float = 30.0
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        self._client: docker.DockerClient | None = None

    # connection -----------------------------------------------------------------------
    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            with self._mapped():
                client = docker.DockerClient(base_url=self.url, timeout=int(self._timeout_s))
                client.ping()
            self._client = client
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def ping(self) -> bool:
        """True when the engine answers; never raises."""
        try:
            _ = self.client
        except DockerError:
            return False
        return True

    @contextlib.contextmanager
    def _mapped(self, container: str | None = None) -> Iterator[None]:
        """Translate docker SDK / transport exceptions into faultkit errors."""
        try:
            yield
        except docker.errors.NotFound as exc:
            if container is not None:
                raise ContainerNotFound(self.url, container, self._names_or_empty()) from exc
            raise DockerError(f"{self.url}: not found: {exc.explanation or exc}") from exc
        except docker.errors.APIError as exc:
            raise DockerError(f"{self.url}: Docker API error: {exc.explanation or exc}",
                              transient=exc.is_server_error() or _restarting(exc)) from exc
        except docker.errors.DockerException as exc:
            raise DockerUnavailable(self.url, str(exc)) from exc
        except (requests.exceptions.ConnectionError, FileNotFoundError) as exc:
            raise DockerUnavailable(self.url, str(exc)) from exc
        except PermissionError as exc:  # the socket's mode: waiting will not change it
            raise DockerUnavailable(self.url, str(exc), transient=False) from exc
        except requests.exceptions.ReadTimeout as exc:
            raise DockerError(f"{self.url}: Docker engine did not answer in time: {exc}",
                              transient=True) from exc

    def _names_or_empty(self) -> list[str]:
        try:
            return [c.name for c in self.client.containers.list(all=True)]
        except Exception:  # best effort: only used to improve an error message
            return []

    def clock_reading(self) -> ClockReading:
        """The engine's clock − this machine's: ``docker info``'s ``SystemTime`` against
        the midpoint of the fastest of a few requests
        (:func:`faultkit.probes.clockread.read_clock`).
        Docker's events are stamped by that clock."""
        from faultkit.model.timestamps import parse_rfc3339

        def system_time() -> float:
            with self._mapped():
                info = self.client.info()
            stamp = parse_rfc3339(str(info.get("SystemTime") or ""))
            if stamp is None:
                raise DockerError(f"{self.url}: `docker info` reports no SystemTime")
            return stamp

        return read_clock(system_time)

    # lookup -------------------------------------------------------------------------
    def container(self, name: str) -> Container:
        with self._mapped(container=name):
            return self.client.containers.get(name)

    def exists(self, name: str) -> bool:
        try:
            self.container(name)
        except ContainerNotFound:
            return False
        return True

    def inspect(self, name: str) -> dict[str, Any]:
        with self._mapped(container=name):
            attrs: dict[str, Any] = self.client.api.inspect_container(name)
            return attrs

    def state(self, name: str) -> ContainerState:
        return state_from_attrs(self.inspect(name))

    def host_pid(self, name: str) -> int:
        """The host PID of the container's main process; raises if it is not running."""
        st = self.state(name)
        if not st.pid:
            raise DockerError(f"container {name!r} is not running (status {st.status}); no PID")
        return st.pid

    def logs(self, name: str, *, tail: int | str = 200, since: float | None = None,
             timestamps: bool = False) -> str:
        """The container's log lines (``tail``: the last N, or ``"all"``) written since
        ``since`` (epoch seconds); ``timestamps`` prefixes each with the RFC 3339 time Docker
        received it (nanoseconds, UTC), whatever the engine's own format."""
        with self._mapped(container=name):
            raw = self.client.api.logs(
                name, stdout=True, stderr=True, tail=tail, since=since if since else None,
                timestamps=timestamps,
            )
        return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)

    def events(self, name: str, since: float, until: float) -> list[dict[str, Any]]:
        """Docker's own events for container ``name`` between two epoch times (die with its
        exit code, oom, start, kill with its signal, pause, …) and the network events that
        name it (``disconnect``/``connect``, ``Type`` ``network``), oldest first."""
        window: dict[str, Any] = {"since": int(since), "until": int(until) + 1, "decode": True}
        with self._mapped(container=name):
            container_id = self.client.api.inspect_container(name)["Id"]
            own = [e for e in self.client.events(filters={"container": name}, **window)
                   if e.get("Type") == "container"]
            networks = [e for e in self.client.events(filters={"type": "network"}, **window)
                        if ((e.get("Actor") or {}).get("Attributes") or {}).get("container")
                        == container_id]
        return sorted([*own, *networks], key=lambda e: int(e.get("timeNano") or 0))

    def exec(self, name: str, command: list[str]) -> tuple[int, str]:
        """Run ``command`` inside the running container; (exit code, output)."""
        with self._mapped(container=name):
            code, output = self.client.containers.get(name).exec_run(command, demux=False)
        text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else ""
        return int(code if code is not None else -1), text

    def labelled(self, key: str = LABEL_OWNER, value: str | None = None) -> list[Container]:
        selector = key if value is None else f"{key}={value}"
        with self._mapped():
            containers: list[Container] = self.client.containers.list(
                all=True, filters={"label": selector}
            )
            return containers

    # operations used by faults and the testbed -------------------------------------------
    def pause(self, name: str) -> None:
        with self._mapped(container=name):
            self.client.api.pause(name)

    def unpause(self, name: str) -> None:
        with self._mapped(container=name):
            self.client.api.unpause(name)

    def stop(self, name: str, *, timeout_s: int = 10) -> None:
        with self._mapped(container=name):
            self.client.api.stop(name, timeout=timeout_s)

    def start(self, name: str) -> None:
        with self._mapped(container=name):
            self.client.api.start(name)

    def restart(self, name: str, *, timeout_s: int = 10) -> None:
        with self._mapped(container=name):
            self.client.api.restart(name, timeout=timeout_s)

    def docker_kill(self, name: str, signal: str = "SIGKILL") -> None:
        """``docker kill``: a *manual* stop — Docker's restart policy does not act on it.

        Docker refuses to kill a container its restart policy is bringing back (409 "is
        restarting"); that is retried for up to :data:`RESTARTING_WAIT_S` (the policy's
        back-off between restarts grows to a minute), then raised saying so."""
        retrying = Retrying(stop=stop_after_delay(RESTARTING_WAIT_S), wait=wait_fixed(0.25),
                            retry=retry_if_exception(_is_restarting), reraise=True)
        try:
            for attempt in retrying:
                with attempt, self._mapped(container=name):
                    self.client.api.kill(name, signal=signal)
        except DockerError as exc:
            if _is_restarting(exc):
                raise DockerError(
                    f"{exc}; it was still restarting after {RESTARTING_WAIT_S:g} s (its restart "
                    "policy keeps bringing it back): try again once it runs, or stop it",
                    transient=True,
                ) from exc
            raise

    def remove(self, name: str, *, force: bool = True) -> None:
        with self._mapped(container=name):
            self.client.api.remove_container(name, force=force, v=False)

    def create(self, spec: ContainerSpec, *, start: bool = True) -> Container:
        """Create (and by default start) a container from ``spec`` (ports bind to ``bind_ip``)."""
        restart: dict[str, Any] = {"Name": spec.restart_policy}
        if spec.restart_policy == "on-failure" and spec.restart_max_retries:
            restart["MaximumRetryCount"] = spec.restart_max_retries
        with self._mapped():
            container: Container = self.client.containers.create(
                spec.image,
                list(spec.command) or None,
                name=spec.name,
                environment=dict(spec.env),
                mem_limit=spec.memory,
                memswap_limit=spec.memory,
                shm_size=spec.shm_size,
                cpu_shares=spec.cpu_shares,
                restart_policy=restart if spec.restart_policy != "no" else None,
                ports={f"{c}/tcp": (spec.bind_ip, h) for c, h in spec.ports.items()},
                volumes=dict(spec.volumes),
                network=spec.network,
                labels=dict(spec.labels),
                init=True,
            )
            if start:
                container.start()
            return container

    def ensure_network(self, name: str, labels: Mapping[str, str]) -> None:
        """Create a bridge network ``name`` unless it exists."""
        with self._mapped():
            if not self.client.networks.list(names=[name]):
                self.client.networks.create(name, driver="bridge", labels=dict(labels))

    def remove_labelled(self, key: str = LABEL_OWNER) -> tuple[list[str], list[str]]:
        """Remove every container and network carrying label ``key``; return their names."""
        containers = [c.name for c in self.labelled(key)]
        for name in containers:
            with contextlib.suppress(ContainerNotFound):
                self.remove(name)
        with self._mapped():
            networks = self.client.networks.list(filters={"label": key})
            names = [n.name for n in networks]
            for network in networks:
                network.remove()
        return containers, names

    # fault kit additions ---------------------------------------------------------------
    def spec_of(self, name: str) -> ContainerSpec:
        """The container's current config as a :class:`ContainerSpec` (first network only)."""
        return _spec_from_attrs(self.inspect(name))

    def endpoints(self, name: str) -> dict[str, dict[str, Any]]:
        """network name → endpoint settings (Aliases, IPAMConfig, Links…) from inspect."""
        attrs = self.inspect(name)
        return dict(attrs.get("NetworkSettings", {}).get("Networks") or {})

    def disconnect(self, name: str, network: str) -> None:
        with self._mapped(container=name):
            self.client.api.disconnect_container_from_network(name, network, force=True)

    def connect(
        self,
        name: str,
        network: str,
        *,
        aliases: list[str] | None = None,
        ipv4_address: str | None = None,
        links: list[str] | None = None,
    ) -> None:
        with self._mapped(container=name):
            self.client.api.connect_container_to_network(
                name,
                network,
                aliases=aliases or None,
                ipv4_address=ipv4_address or None,
                links=links or None,
            )

    def memory_limits(self, name: str) -> tuple[int, int]:
        """(Memory, MemorySwap) bytes as docker reports them (0 = unlimited, -1 = no swap cap)."""
        host = self.inspect(name).get("HostConfig", {})
        return int(host.get("Memory") or 0), int(host.get("MemorySwap") or 0)

    def set_memory_limits(self, name: str, memory: int, memswap: int) -> None:
        """Set both limits exactly (as :meth:`memory_limits` returned them)."""
        with self._mapped(container=name):
            self.client.api.update_container(name, mem_limit=memory, memswap_limit=memswap)

    def memory_usage(self, name: str) -> int:
        """Current memory usage in bytes (docker stats ``memory_stats.usage``)."""
        with self._mapped(container=name):
            stats = self.client.api.stats(name, stream=False)
        return int((stats.get("memory_stats") or {}).get("usage") or 0)

    def memory_stats(self, name: str) -> MemoryStats:
        """The container's memory now, from one ``docker stats`` sample (``one_shot``: no
        wait for a second sample; works through any Docker endpoint)."""
        with self._mapped(container=name):
            stats = self.client.api.stats(name, stream=False, one_shot=True)
        return MemoryStats.from_docker(stats.get("memory_stats") or {})

    def running_names(self, label: str | None = None) -> list[str]:
        """Names of running containers (optionally only those carrying ``label`` key[=value])."""
        filters: dict[str, Any] = {"status": "running"}
        if label:
            filters["label"] = label
        with self._mapped():
            return [c.name for c in self.client.containers.list(filters=filters)]


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """One container's memory, bytes: ``usage`` as Docker reports it (page cache included),
    ``anon`` the anonymous memory (cgroup v1 ``total_rss``, v2 ``anon``: what the kernel
    cannot reclaim without swap, so what an OOM kill is about; None when not reported), and
    ``limit`` (None: no limit, or the host's memory)."""

    usage: int
    anon: int | None
    limit: int | None

    @classmethod
    def from_docker(cls, memory: dict[str, Any]) -> MemoryStats:
        stats = memory.get("stats") or {}
        anon = next((stats[k] for k in ("total_rss", "anon", "rss") if k in stats), None)
        limit = memory.get("limit")
        return cls(int(memory.get("usage") or 0), int(anon) if anon is not None else None,
                   int(limit) if limit else None)


@functools.cache
def docker_host(url: str) -> DockerHost:
    """A shared :class:`DockerHost` per URL within this process."""
    return DockerHost(url)


# ---------------------------------------------------------------- container specs as data


#: how long ``docker kill`` is retried while Docker says the container is restarting (s)
RESTARTING_WAIT_S = 30.0


def _restarting(exc: docker.errors.APIError) -> bool:
    """Docker's 409 for a container its restart policy is bringing back: waiting helps."""
    return exc.status_code == 409 and "is restarting" in str(exc.explanation or exc)


def _is_restarting(exc: BaseException) -> bool:
    return isinstance(exc, DockerError) and exc.transient and "is restarting" in str(exc)
