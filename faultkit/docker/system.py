"""The system side of a Docker host: short-lived helper containers, a container that runs
system software (the testbed's second Docker engine), images and volumes.

:class:`SystemOps` is a part of :class:`faultkit.docker.host.DockerHost` (its base class), kept
apart from the node-container operations faults use most; it calls the engine only inside
the host's ``_mapped`` translation, so Docker SDK exceptions still surface as
:mod:`faultkit.errors` and :mod:`faultkit.docker.host` stays the one module that reads them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from faultkit.errors import ContainerNotFound, DockerError

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = ["SystemOps"]


class SystemOps:
    """Helper containers, system containers, images and volumes of one Docker engine."""

    if TYPE_CHECKING:  # provided by faultkit.docker.host.DockerHost
        @property
        def client(self) -> docker.DockerClient: ...

        def _mapped(
            self, container: str | None = None
        ) -> contextlib.AbstractContextManager[None]: ...

        def labelled(self, key: str = ..., value: str | None = None) -> list[Container]: ...

        def remove(self, name: str, *, force: bool = True) -> None: ...

    def run_helper(
        self,
        image: str,
        command: list[str],
        *,
        name: str,
        labels: Mapping[str, str],
        network_mode: str | None = None,
        pid_mode: str | None = None,
        privileged: bool = False,
        cap_add: tuple[str, ...] = (),
        timeout_s: float = 60.0,
    ) -> tuple[int, str]:
        """Run a short-lived container to its end on this engine; (exit code, output).

        The container is always removed afterwards (also when waiting for it fails); one
        left behind by a killed harness carries ``labels`` for the sweep."""
        with self._mapped():
            container = self.client.containers.create(
                image, command, name=name, labels=dict(labels), network_mode=network_mode,
                pid_mode=pid_mode, privileged=privileged, cap_add=list(cap_add) or None,
                detach=True,
            )
        try:
            with self._mapped():
                container.start()
                status = container.wait(timeout=timeout_s)
                raw = container.logs(stdout=True, stderr=True)
        finally:
            with contextlib.suppress(DockerError), self._mapped():
                container.remove(force=True)
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        return int(status.get("StatusCode", -1)), text

    def create_system_container(
        self,
        name: str,
        image: str,
        command: list[str],
        *,
        ports: Mapping[int, int],
        volumes: Mapping[str, dict[str, str]],
        labels: Mapping[str, str],
        cap_add: tuple[str, ...],
        security_opt: tuple[str, ...] = (),
        restart_policy: str = "unless-stopped",
        cgroupns: str | None = None,
    ) -> None:
        """Create and start a container that runs system software (a Docker engine of its
        own: the testbed's second host) with the capabilities ``cap_add``, nothing of
        ``/proc`` or ``/sys`` masked or read-only (the CLI's ``systempaths=unconfined``);
        ``ports`` container port → 127.0.0.1 port; ``volumes`` bind mounts or named volumes."""
        api = self.client.api
        with self._mapped():
            host_config = api.create_host_config(
                cap_add=list(cap_add), security_opt=list(security_opt) or None,
                port_bindings={c: ("127.0.0.1", h) for c, h in ports.items()},
                binds=dict(volumes), restart_policy={"Name": restart_policy}, cgroupns=cgroupns,
            )
            host_config.update(MaskedPaths=[], ReadonlyPaths=[])
            created = api.create_container(
                image, command, name=name, labels=dict(labels), host_config=host_config,
                ports=list(ports),
            )
            api.start(created["Id"])

    def image_labels(self, tag: str) -> dict[str, str] | None:
        """The labels of image ``tag``; None when this engine has no such image."""
        try:
            with self._mapped():
                image = self.client.images.get(tag)
        except DockerError:
            return None
        return dict(image.labels or {})

    def build_image(self, path: str, tag: str, labels: Mapping[str, str]) -> None:
        """``docker build`` of the Dockerfile in ``path`` (no registry: FROM a local image)."""
        with self._mapped():
            self.client.images.build(path=path, tag=tag, labels=dict(labels), rm=True,
                                     forcerm=True, pull=False)

    def copy_image(self, tag: str, to: SystemOps) -> None:
        """Copy image ``tag`` from this engine to ``to`` (``docker save | docker load``)."""
        with self._mapped():
            chunks = self.client.images.get(tag).save(named=True)
            data = b"".join(chunks)
        with to._mapped():
            to.client.images.load(data)

    def remove_volume(self, name: str) -> bool:
        """Remove named volume ``name``; False when there is none."""
        try:
            with self._mapped():
                self.client.volumes.get(name).remove(force=True)
        except DockerError as exc:
            if "not found" in str(exc).lower():
                return False
            raise
        return True

    def remove_labelled_containers(self, selector: str) -> list[str]:
        """Remove every container (running or not) whose labels match ``selector``
        (``KEY`` or ``KEY=VALUE``); their names."""
        names = [c.name for c in self.labelled(*selector.split("=", 1))]
        for name in names:
            with contextlib.suppress(ContainerNotFound):
                self.remove(name)
        return names
