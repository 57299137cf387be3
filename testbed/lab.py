"""The local lab: bring the testbed inventory's nodes, Prometheus, Alertmanager and the
pager up, down, or report them.

``Lab.up()`` is idempotent: an existing container whose config hash matches is kept
(started if it had stopped), a changed one is recreated. A fault a killed harness left on
the lab is undone first (:mod:`testbed.settle`). ``Lab.down()`` removes every
container and network carrying a ``faultkit.owner`` label — never anything found by name.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx

from faultkit.constants import (
    LABEL_CONFIG_HASH,
    LABEL_NODE,
    LABEL_OWNER,
    LABEL_SERVING_CONFIG,
    LOCAL_DOCKER,
)
from faultkit.docker.host import ContainerSpec, DockerHost, docker_host
from faultkit.errors import ContainerNotFound, DockerError
from faultkit.inventory import Inventory, Node, config_hash, load_inventory
from faultkit.journal import FaultJournal
from faultkit.probes.health import probe, wait_ready
from faultkit.runtime.progress import step
from slo.prom import parse_rfc3339
from testbed._shell import Progress
from testbed.alertmanager import Readiness, ensure_alertmanager, readiness, stop_alertmanager
from testbed.blackbox import ensure_blackbox, probed_nodes, stop_blackbox
from testbed.blackbox import readiness as blackbox_readiness
from testbed.engine import ensure_docker_engine
from testbed.errors import TestbedError
from testbed.images import ensure_base_image
from testbed.lab_nodes import container_port, lab_mounts
from testbed.paths import INVENTORY, home
from testbed.procs import is_ready
from testbed.prometheus import ensure_prometheus, stop_prometheus
from testbed.settle import keep_existing, settle_journal, supersede

LAB_NETWORK = "faultkit-lab"
LAB_LABELS = {LABEL_OWNER: "testbed"}
#: Nodes ``testbed up --skip NAME`` may leave out (the heavy ones: the real vLLM node, and
#: the LiteLLM gateway, whose virtualenv takes ~2 min to build the first time).
SKIPPABLE_NODES = frozenset({"vllm", "gateway"})
#: ``testbed up --skip host2`` leaves out the second Docker host and its nodes
#: (:mod:`testbed.host2`); everything else ``--skip`` names is a node.
HOST2 = "host2"

@dataclass(frozen=True)
class NodeStatus:
    name: str
    engine: str
    container: str
    state: str
    restarts: int | None
    ready: str
    target: str
    started: str


class Lab:
    """The testbed described by an inventory file (default: ``testbed/inventory.yaml``)."""

    def __init__(
        self,
        inventory_path: Path = INVENTORY,
        progress: Progress = print,
    ) -> None:
        self.inventory_path = inventory_path
        self.inventory: Inventory = load_inventory(inventory_path)
        self.progress = progress

    def lab_nodes(self, skip: frozenset[str] = frozenset()) -> list[Node]:
        """The inventory's nodes the lab runs (those with a container and a serving config),
        gateways after the engine nodes they route to."""
        nodes = [
            n
            for n in self.inventory.nodes
            if n.docker is not None and n.serving_config and n.name not in skip
            and n.docker.host == LOCAL_DOCKER  # the second host's: testbed.host2
        ]
        return sorted(nodes, key=lambda n: n.kind == "gateway")

    # up -------------------------------------------------------------------------------
    def up(self, skip: frozenset[str] = frozenset(), journal: FaultJournal | None = None) -> float:
        """Bring everything up (but the ``skip``ped nodes); return the seconds it took.
        ``journal`` is the fault journal whose records on the lab are undone first (default:
        the harness's own, :func:`faultkit.journal.default_journal_dir`)."""
        start = time.monotonic()
        host = ensure_docker_engine(self.progress)
        image = ensure_base_image(host, self.progress)
        host.ensure_network(LAB_NETWORK, LAB_LABELS)
        from testbed import host2, host2_nodes

        with_host2 = HOST2 not in skip
        if with_host2:  # its engine answers before the journal's undo steps run on it
            host2.start_host(self.progress)
        journal = journal if journal is not None else FaultJournal()
        rebuild = settle_journal(self.inventory, self.progress, journal)
        nodes = self.lab_nodes(skip)
        for node in nodes:
            self._ensure_node(host, node, image, rebuild=node.name in rebuild)
        recreated = {n.name for n in nodes}
        if with_host2:
            host2_nodes.up(self.inventory_path, self.progress, rebuild=rebuild)
            recreated |= {n.name for n in host2_nodes.host2_nodes(self.inventory)}
        supersede(self.inventory, rebuild & recreated, self.progress, journal)
        # before Prometheus, so that its first alert has somewhere to go
        alertmanager = ensure_alertmanager(self.inventory, self.progress)
        ensure_blackbox(self.inventory, self.progress)  # before Prometheus scrapes it
        ensure_prometheus(self.inventory, self.progress)
        for node in nodes:
            config = self.inventory.serving_config(node.serving_config or "")
            with step(
                self.progress,
                f"waiting for {node.name} to be ready at {node.base_url}{node.health_path}",
            ):
                asyncio.run(wait_ready(node, timeout_s=config.ready_timeout_s))
        with step(self.progress, "waiting for Prometheus to scrape every node"):
            self.wait_scraped(nodes)
        elapsed = time.monotonic() - start
        paging = f"; Alertmanager {alertmanager}" if alertmanager else ""
        self.progress(
            f"testbed up in {elapsed:.1f} s: {', '.join(n.name for n in nodes)}; "
            f"Prometheus {self.inventory.prometheus.url}{paging}"
        )
        return elapsed

    def wait_scraped(
        self, nodes: list[Node], *, after: float | None = None, timeout_s: float = 30.0
    ) -> None:
        """Wait until Prometheus's last scrape of every node's job succeeded.

        ``after`` (epoch seconds) also demands that the scrape began after that moment, so a
        health recorded before a restart is not taken for one recorded after it.
        """
        jobs = {n.prometheus.job for n in nodes if n.prometheus is not None}
        deadline = time.monotonic() + timeout_s
        targets: dict[str, TargetHealth] = {}

        def fresh_and_up(job: str) -> bool:
            target = targets.get(job)
            if target is None or target.health != "up":
                return False
            return after is None or (target.last_scrape or 0.0) >= after

        while time.monotonic() < deadline:
            targets = _prometheus_targets(self.inventory.prometheus.url) or {}
            if all(fresh_and_up(job) for job in jobs):
                return
            time.sleep(0.5)
        bad = ", ".join(
            f"{job}={targets[job].health if job in targets else 'not scraped'}"
            for job in sorted(jobs)
            if not fresh_and_up(job)
        )
        raise TestbedError(f"Prometheus is not scraping every node after {timeout_s:.0f} s: {bad}")

    def _ensure_node(self, host: DockerHost, node: Node, image: str, *,
                     rebuild: bool = False) -> None:
        assert node.docker is not None and node.serving_config
        config = self.inventory.serving_config(node.serving_config)
        volumes, env = lab_mounts(node, self.progress, self.inventory)
        extra: list[object] = [volumes, env, node.base_url]
        if node.engine == "litellm":  # the mounted proxy config is part of what it runs
            from testbed.litellm_node import config_file, config_file_of

            extra.append(config_file(node.name, config_file_of(config.command)).read_text())
        wanted = config_hash(config, extra)
        name = node.docker.container
        if keep_existing(host, name, wanted_hash=wanted, network=LAB_NETWORK,
                         memory=config.memory, rebuild=rebuild, progress=self.progress):
            return
        host_port = urlsplit(node.base_url).port
        if host_port is None:
            raise TestbedError(f"node {node.name}: base_url {node.base_url} needs an explicit port")
        what = f"creating container {name} ({node.engine}, config {node.serving_config})"
        with step(self.progress, what):
            host.create(
                ContainerSpec(
                    name=name,
                    image=config.image if config.image != "faultkit/base:bookworm" else image,
                    command=tuple(config.command),
                    env={**config.env, **env},
                    memory=config.memory,
                    shm_size=config.shm_size,
                    cpu_shares=config.cpu_shares,
                    restart_policy=config.restart,
                    restart_max_retries=config.restart_max_retries,
                    ports={container_port(node, config): host_port},
                    volumes=volumes,
                    network=LAB_NETWORK,
                    labels={
                        **LAB_LABELS,
                        LABEL_NODE: node.name,
                        LABEL_SERVING_CONFIG: node.serving_config,
                        LABEL_CONFIG_HASH: wanted,
                    },
                )
            )

    # down -----------------------------------------------------------------------------
    def down(self) -> None:
        host = DockerHost()
        if host.ping():
            containers, networks = host.remove_labelled(LABEL_OWNER)
            self.progress(
                f"removed containers: {', '.join(containers) or 'none'}; "
                f"networks: {', '.join(networks) or 'none'}"
            )
        else:
            self.progress("no Docker engine answers: no containers to remove")
        from testbed import host2

        host2.down(self.progress)
        if stop_prometheus():
            self.progress("stopped Prometheus")
        for stopped in stop_alertmanager():
            self.progress(f"stopped {stopped}")
        if stop_blackbox():
            self.progress("stopped the generation probe (blackbox exporter)")
        shutil.rmtree(home() / "state", ignore_errors=True)

    # status ---------------------------------------------------------------------------
    def status(self) -> list[NodeStatus]:
        targets = _prometheus_targets(self.inventory.prometheus.url)
        rows = []
        for node in self.inventory.nodes:
            state, restarts, started = "no docker", None, "-"
            host = docker_host(node.docker.host) if node.docker is not None else None
            if host is not None and node.docker is not None and host.ping():
                try:
                    st = host.state(node.docker.container)
                    state, restarts = st.status, st.restart_count
                    if st.started_at:
                        started = time.strftime("%H:%M:%S", time.gmtime(st.started_at)) + "Z"
                except ContainerNotFound:
                    state = "absent"
                except DockerError as exc:
                    state = f"error: {exc}"[:40]
            result = asyncio.run(_probe_once(node))
            job = node.prometheus.job if node.prometheus else None
            if not job:
                target = "-"
            elif targets is None:
                target = "Prometheus down"
            else:
                target = targets[job].health if job in targets else "not scraped"
            rows.append(
                NodeStatus(
                    node.name,
                    node.engine,
                    node.docker.container if node.docker else "-",
                    state,
                    restarts,
                    result,
                    target,
                    started,
                )
            )
        return rows

    def prometheus_ready(self) -> bool:
        return is_ready(self.inventory.prometheus.url)

    def paging_ready(self) -> list[Readiness]:
        """``(what, url, ready)`` of the Alertmanager and the pager the inventory names, and
        of the generation probe when a node is probed."""
        probe = [blackbox_readiness()] if probed_nodes(self.inventory) else []
        return [*readiness(self.inventory), *probe]


async def _probe_once(node: Node) -> str:
    async with httpx.AsyncClient() as client:
        result = await probe(node, client, timeout_s=2.0)
    return "ready" if result.ok else f"not ready ({result.detail})"[:48]


class TargetHealth(NamedTuple):
    health: str  # 'up' / 'down' / 'unknown'
    last_scrape: float | None  # epoch seconds the last scrape began; None before the first


def _prometheus_targets(url: str) -> dict[str, TargetHealth] | None:
    """job → its target's health; None when Prometheus does not answer."""
    try:
        data = httpx.get(f"{url}/api/v1/targets", timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return None
    out: dict[str, TargetHealth] = {}
    for target in data.get("data", {}).get("activeTargets", []):
        job = target.get("labels", {}).get("job") or target.get("scrapePool", "")
        try:
            last = parse_rfc3339(target.get("lastScrape"))
        except ValueError:
            last = None
        out[job] = TargetHealth(target.get("health", "unknown"), last)
    return out
