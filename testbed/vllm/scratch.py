"""Throwaway vLLM containers for the integration tests and the bench (never the lab's node).

``ScratchVllm.start(config_name)`` creates a container from one of the testbed inventory's
vLLM serving configs exactly as the lab would (same image, command, env, memory, shm,
restart policy, Docker's ``--init``, plus :mod:`testbed.vllm_node`'s mounts and env),
labelled ``faultkit.owner=tests``, published on a free 127.0.0.1 port. ``remove()`` deletes
it; use it in ``finally``. Uses the docker SDK directly: this is test tooling.

Time bases: ``started_mono`` and every duration are ``time.monotonic()`` seconds.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import httpx
from docker.models.containers import Container

from faultkit.constants import LABEL_NODE, LABEL_OWNER, LABEL_SERVING_CONFIG
from faultkit.inventory import ServingConfig, load_inventory
from testbed import vllm_node
from testbed.paths import INVENTORY

TEST_LABELS = {LABEL_OWNER: "tests", LABEL_NODE: "vllm-scratch"}
CONTAINER_PORT = 8000
#: CPU weight of a scratch vLLM (Docker's default is 1024): it yields the cores to the lab
#: when both want them, and has them all when the lab is idle. CI runs the vLLM tests beside
#: the measurement-truth trials (docs/ci.md); a scratch vLLM starting at the default weight
#: held both cores long enough that the simulated node answered a readiness probe after
#: 1.06 s and missed a Prometheus scrape, and that trial read "not in steady state".
SCRATCH_CPU_SHARES = 64


def free_port() -> int:
    """A currently free 127.0.0.1 TCP port (kept fixed so restarts publish the same port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serving_config(name: str) -> ServingConfig:
    return load_inventory(INVENTORY).serving_config(name)


@dataclass
class ScratchVllm:
    """One throwaway vLLM container and how to reach it."""

    container: Container
    base_url: str
    config: ServingConfig
    started_mono: float
    client: docker.DockerClient = field(repr=False)

    @classmethod
    def start(
        cls,
        config_name: str,
        image: str,
        *,
        client: docker.DockerClient | None = None,
        env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> ScratchVllm:
        """Create and start a container running serving config ``config_name`` (its command
        followed by ``extra_args``)."""
        vllm_node.ensure_vllm_env(print)
        vllm_node.ensure_vllm_model(print)
        config = serving_config(config_name)
        client = client or docker.from_env()
        port = free_port()
        restart: dict[str, Any] = {"Name": config.restart}
        if config.restart == "on-failure" and config.restart_max_retries:
            restart["MaximumRetryCount"] = config.restart_max_retries
        started = time.monotonic()
        container = client.containers.run(
            image,
            [*config.command, *extra_args],
            name=f"faultkit-test-vllm-{uuid.uuid4().hex[:8]}",
            detach=True,
            environment={**config.env, **vllm_node.vllm_container_env(), **(env or {})},
            mem_limit=config.memory,
            memswap_limit=config.memory,
            shm_size=config.shm_size,
            restart_policy=restart if config.restart != "no" else None,
            ports={f"{CONTAINER_PORT}/tcp": ("127.0.0.1", port)},
            volumes=vllm_node.vllm_container_mounts(),
            labels={**TEST_LABELS, LABEL_SERVING_CONFIG: config_name},
            init=True,
            cpu_shares=SCRATCH_CPU_SHARES,
        )
        return cls(container, f"http://127.0.0.1:{port}", config, started, client)

    def reload(self) -> dict[str, Any]:
        self.container.reload()
        attrs: dict[str, Any] = self.container.attrs
        return attrs

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = self.reload()["State"]
        return state

    def restart_count(self) -> int:
        return int(self.reload()["RestartCount"])

    def logs(self, tail: int = 400) -> str:
        return bytes(self.container.logs(tail=tail)).decode(errors="replace")

    def health(self, timeout_s: float = 2.0) -> int | None:
        """``/health`` status code, or None when nothing answers."""
        try:
            return httpx.get(f"{self.base_url}/health", timeout=timeout_s).status_code
        except httpx.HTTPError:
            return None

    def wait_ready(self, timeout_s: float) -> float:
        """Wait for ``/health`` 200; return the monotonic time it first answered 200.

        Raises AssertionError with the container's log tail when the deadline passes or
        the container stopped for good (exited and not restarting).
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.health() == 200:
                return time.monotonic()
            state = self.state()
            if state["Status"] == "exited" and not state["Restarting"]:
                policy = self.reload()["HostConfig"]["RestartPolicy"]
                if policy.get("Name") in ("", "no") or self.restart_count() >= int(
                    policy.get("MaximumRetryCount") or 1 << 30
                ):
                    break
            time.sleep(0.25)
        raise AssertionError(
            f"vLLM at {self.base_url} not ready within {timeout_s:.0f} s "
            f"(state {self.state()}):\n{self.logs(60)}"
        )

    def host_pid(self) -> int:
        """Host PID of the container's main process (docker-init with ``--init``)."""
        return int(self.state()["Pid"])

    def remove(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.container.remove(force=True)
