"""What the chaos-on-the-harness tests share (``test_harness_chaos``): a private Prometheus
and a scratch node it scrapes, so that no test touches the lab's own Prometheus
(127.0.0.1:19090) or nodes.

:class:`PrivatePrometheus` is Debian's ``prometheus`` binary on a free loopback port with
its own config, rules and data directory under the test's tmp dir; :meth:`kill` SIGKILLs
it and :meth:`start` starts it again on the same port and data (its write-ahead log keeps
the samples from before a kill, as a production Prometheus's disk would).
:func:`scraped_node` is a :func:`testbed.scratch.scratch_node` (a throwaway llama-server)
that the private Prometheus scrapes, with an inventory naming that Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from faultkit.docker.host import docker_host
from faultkit.inventory import Inventory, Node, PrometheusRef
from faultkit.probes.health import wait_ready
from testbed.prometheus import render_rules_for, scrape_config
from testbed.scratch import free_port, scratch_node, snapshot

PROMETHEUS = Path("/usr/bin/prometheus")


class PrivatePrometheus:
    """A Prometheus of the test's own: loopback, a free port, its own data directory."""

    def __init__(self, inventory: Inventory, directory: Path) -> None:
        self.directory = directory
        self.url = inventory.prometheus.url.rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "prometheus.yml").write_text(
            yaml.safe_dump(scrape_config(inventory), sort_keys=False))
        (directory / "rules.yml").write_text(render_rules_for(inventory))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        """Start it (same port, same data) and wait until ``/-/ready`` answers 200."""
        log = (self.directory / "prometheus.log").open("ab")
        self.proc = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={self.directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the private Prometheus did not start: "
                                   + (self.directory / "prometheus.log").read_text()[-2000:])
            time.sleep(0.1)

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL it (no shutdown, no last flush) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def has_target_up(self, job: str) -> bool:
        """True once a scrape of ``job`` answered (``up == 1`` stored)."""
        with contextlib.suppress(httpx.HTTPError, KeyError, IndexError, ValueError):
            answer = httpx.get(f"{self.url}/api/v1/query", params={"query": f'up{{job="{job}"}}'},
                               timeout=2.0).json()
            return float(answer["data"]["result"][0]["value"][1]) == 1.0
        return False


def scraped_node(lab_inventory: Inventory, name: str) -> tuple[Inventory, Node]:
    """A scratch llama-server node scraped by a Prometheus on a free loopback port; the
    inventory names that Prometheus (1 s scrape and evaluation) and holds just the node."""
    inventory, node = scratch_node(lab_inventory, name, prometheus=PrometheusRef(job=name))
    prometheus = inventory.prometheus.model_copy(update={
        "url": f"http://127.0.0.1:{free_port()}", "scrape_interval_s": 1.0,
        "slo_evaluation_interval_s": 5.0,
    })
    return inventory.model_copy(update={"prometheus": prometheus}), node


@contextlib.contextmanager
def full_filesystem(mountpoint: Path, *, size_kib: int = 64, leave_bytes: int = 0
                    ) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` KiB at ``mountpoint``, filled until ``leave_bytes`` are left
    (0: full, every write fails with ENOSPC), unmounted at the end. Needs root; skips the
    test otherwise."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "tmpfs", str(mountpoint)],
        capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        with (mountpoint / "filler").open("wb") as filler:
            try:
                filler.write(b"\0" * (size_kib * 1024 - leave_bytes))
                filler.flush()
            except OSError:
                pass  # full: what was asked for
        yield mountpoint
    finally:
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=False)


def docker_actions_since(node: Node, since: float) -> list[str]:
    """Docker's own event actions for the node's container since epoch ``since`` (Docker's
    filter works in whole seconds: earlier events of that second are left out here)."""
    assert node.docker is not None
    host = docker_host(node.docker.host)
    return [str(e.get("Action") or e.get("status")) for e in
            host.events(node.docker.container, since, time.time())
            if int(e.get("timeNano") or 0) >= since * 1e9]


#: the cgroup v1 CPU hierarchy (this machine's kernel has no unified CPU controller)
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")


class StarvedCgroup:
    """A child of this process's cgroup-v1 CPU cgroup holding one process, whose CPU can
    be throttled (``cpu.cfs_quota_us`` per ``cpu.cfs_period_us``) and released again. The
    process goes back to the parent cgroup and the child is removed by :meth:`close`.
    Skips the test where there is no writable cgroup-v1 CPU hierarchy."""

    def __init__(self, pid: int, name: str) -> None:
        own = next((line.split(":", 2)[2] for line in
                    Path("/proc/self/cgroup").read_text().splitlines()
                    if line.split(":", 2)[1].split(",").count("cpu")), None)
        if own is None or not (CPU_CGROUPS / "cgroup.procs").exists():
            pytest.skip("no cgroup-v1 CPU hierarchy here")
        self.parent = CPU_CGROUPS / own.lstrip("/")
        self.path = self.parent / name
        try:
            self.path.mkdir()
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            pytest.skip(f"cannot create or join the CPU cgroup {self.path}: {exc}")
        self.pid = pid

    def throttle(self, quota_us: int, period_us: int = 100_000) -> None:
        (self.path / "cpu.cfs_period_us").write_text(str(period_us))
        (self.path / "cpu.cfs_quota_us").write_text(str(quota_us))

    def release(self) -> None:
        (self.path / "cpu.cfs_quota_us").write_text("-1")

    def throttled_s(self) -> float:
        """Seconds the group's tasks were held back by the quota (``cpu.stat``)."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_time":
                return int(value) / 1e9
        return 0.0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.release()
        for task in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # exited meanwhile
                (self.parent / "cgroup.procs").write_text(task)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def node_snapshot(node: Node) -> dict[str, Any]:
    """:func:`testbed.scratch.snapshot`, with this machine's faultkit NAT rules narrowed to
    those naming the node's port: the others belong to faults other tests and users run on
    this machine meanwhile (a latency proxy's REDIRECT), which this test must not read as
    its own leftovers."""
    found = snapshot(node)
    port = urlsplit(node.base_url).port
    found["host_nat_rules"] = [rule for rule in found["host_nat_rules"]
                               if f"--dport {port}" in rule or f":{port}" in rule]
    return found


async def assert_node_restored(node: Node, before: dict[str, Any]) -> None:
    """The node serves again and is as ``before`` (:func:`node_snapshot`)."""
    await wait_ready(node, timeout_s=60)
    assert await asyncio.to_thread(node_snapshot, node) == before
