"""dockerd restarted under faults a dead harness left applied (issue 42; docs/definitions.md,
"The harness under its own faults").

Each trial acts on a scratch sim node of the testbed's second Docker host (never the lab's
``sim-vllm-h2``): ``faultkit inject KIND`` applies the fault with the journal under the
test's own ``FAULTKIT_HOME`` and is SIGKILLed once the fault is in effect, so its record
stays unreverted, as a crashed harness leaves it. Then that host's engine restarts
(``docker restart -t 0 faultkit-h2-docker`` on this machine's engine: the second host's
dockerd and every container on it end at once and boot again; this machine's own dockerd
is never touched), and once it answers, the real ``faultkit sweep`` (or, in one trial, the
next session's start: ``faultkit inject`` sweeps before it acts) must bring the node back
exactly as it was. The outcome is judged by Docker's inspect of the container (its
networks, memory limit, paused and running state, image, command and serving-config
label), :func:`harness_chaos_support.node_snapshot` and the node answering ``/health``,
and by the journal on disk; never by what faultkit says of itself, except the sweep's own
lines, which are what an operator reads.

Restarting that engine also restarts the lab's node there (``sim-vllm-h2``): the module
waits until it serves again before it ends. Marked ``host2``: ``-m host2`` runs these with
the second host's fault tests (about 75 s for the five trials).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from faultkit.constants import LABEL_SERVING_CONFIG
from faultkit.errors import DockerError
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.probes.health import wait_ready
from testbed import host2, host2_nodes
from testbed.paths import state_dir
from testbed.scratch import TEST_LABELS, write_inventory
from testbed.torture import FAULTKIT
from tests.integration.harness_chaos_support import assert_node_restored, node_snapshot

pytestmark = [pytest.mark.docker, pytest.mark.host2,
              pytest.mark.usefixtures("second_host_for_the_module")]

PORT = 18104  # one of host2.NODE_PORTS, used by no other node or test
NAME, CONTAINER = "fk-h2-dockerd", "faultkit-test-h2-dockerd"
#: the candidate of the rollout trial: a known-good config other than the node's own
CANDIDATE = "sim-vllm-good-util85"
#: this machine's cgroup-v1 freezer hierarchy (where `docker pause` freezes a container)
FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.fixture(scope="module")
def scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    """A throwaway sim node on the second host, serving; removed at the end, once the lab's
    own node there (restarted with its engine by every trial) serves again."""
    host2_nodes.up(progress=lambda _m: None)
    base = lab_inventory.node("sim-vllm-h2")
    assert base.docker is not None
    node = base.model_copy(update={
        "name": NAME, "base_url": f"http://127.0.0.1:{PORT}", "prometheus": None,
        "docker": base.docker.model_copy(update={"container": CONTAINER}),
    })
    spec = host2_nodes.node_spec(lab_inventory, node)
    spec = type(spec)(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                         "labels": {**TEST_LABELS, "faultkit.node": NAME}})
    engine = host2.inner()
    if engine.exists(CONTAINER):
        engine.remove(CONTAINER)
    (state_dir("host2") / "sim" / NAME).mkdir(parents=True, exist_ok=True)
    if _listened_on_host2(PORT):  # a stray docker-proxy an earlier power cut left
        engine = host2.restart_engine()
    try:
        engine.create(spec)
    except DockerError as exc:
        if not host2.is_held_port(exc):
            raise
        engine = host2.restart_engine()  # the remedy of `testbed up` (testbed/host2.py)
        engine.create(spec)
    asyncio.run(wait_ready(node, timeout_s=60))
    inventory = Inventory(nodes=[node], serving_configs=dict(lab_inventory.serving_configs),
                          prometheus=lab_inventory.prometheus, source="<dockerd restart>")
    try:
        yield inventory, node
    finally:
        host2.wait_engine(timeout_s=60)
        engine = host2.inner()
        if engine.exists(CONTAINER):
            engine.remove(CONTAINER)
        asyncio.run(wait_ready(base, timeout_s=60))  # the lab's node is back, as found


def _listened_on_host2(port: int) -> bool:
    """Something on the second host listens on ``port`` (read there with ``ss``)."""
    _, out = host2.outer().exec(host2.CONTAINER, ["ss", "-Hltn", f"sport = :{port}"])
    return bool(out.strip())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The test's own ``FAULTKIT_HOME`` (passed to the harness's processes)."""
    return tmp_path / "home"


def docker_says(node: Node, *, restarts: bool = False) -> dict[str, Any]:
    """What Docker's inspect of the node's container says, in the terms a fault changes
    (and, with ``restarts``, its restart count: not part of what a revert restores)."""
    assert node.docker is not None
    attrs = host2.inner().inspect(node.docker.container)
    config, hostconfig, state = attrs["Config"], attrs["HostConfig"], attrs["State"]
    return {
        "networks": sorted(attrs["NetworkSettings"].get("Networks") or {}),
        "memory": hostconfig.get("Memory"), "memswap": hostconfig.get("MemorySwap"),
        "paused": state["Paused"], "running": state["Running"], "status": state["Status"],
        "image": config["Image"], "cmd": config["Cmd"],
        "serving_config": (config.get("Labels") or {}).get(LABEL_SERVING_CONFIG),
        **({"restarts": attrs["RestartCount"]} if restarts else {}),
    }


Seen = Callable[[dict[str, Any], dict[str, Any]], bool]


def _squeezed(was: dict[str, Any], now: dict[str, Any]) -> bool:
    return bool(0 < now["memory"] < (was["memory"] or 2**62))


#: each trial: the fault, its parameters, how Docker shows it in effect, and what Docker
#: shows once the host has restarted (``was``: what Docker said before the fault; ``now``:
#: what it says at that moment). The restart ends a pause (the frozen processes die with
#: the host, and the restart policy starts the container afresh); a partition, a memory
#: limit and a rolled-out container are Docker's configuration, and outlive it.
TRIALS: dict[str, tuple[str, list[str], Seen, Seen]] = {
    "partition": ("partition", ["mode=refuse"], lambda was, now: now["networks"] == [],
                  lambda was, now: now["networks"] == []),
    # in effect, and the engine OOM-killed under it and running again. Killed while its
    # restart policy was starting it again, the container twice did not come back with the
    # host here: Docker 20.10 restored its network with the node's port already allocated
    # ("port is already allocated"), left a stray docker-proxy on that port, and only
    # another restart of that engine freed it. That is Docker's to mend, not the harness's:
    # the sweep's ``start`` step is refused then, and its record stays, FAILED
    "memory_squeeze": ("memory_squeeze", [],
                       lambda was, now: _squeezed(was, now) and now["restarts"] > 0
                       and now["status"] == "running", _squeezed),
    "pause": ("pause", [], lambda was, now: now["paused"],
              lambda was, now: not now["paused"]),
    "rollout": ("rollout", [f"config={CANDIDATE}"],
                lambda was, now: now["serving_config"] == CANDIDATE != was["serving_config"],
                lambda was, now: now["serving_config"] == CANDIDATE),
}


def _inject_then_sigkill(kind: str, params: list[str], node: Node, inventory_file: Path,
                         env: dict[str, str], events: Path, in_effect: Callable[[], bool]
                         ) -> None:
    """``faultkit inject`` until its ``inject_end`` and Docker shows the fault in effect,
    then SIGKILL: the harness dies with the fault applied and its record unreverted."""
    with events.open("w") as err:
        proc = subprocess.Popen(
            [*FAULTKIT, "inject", kind, "--node", node.name, "--inventory",
             str(inventory_file), "--duration", "600s",
             *(arg for p in params for arg in ("--param", p))],
            stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        deadline = time.monotonic() + 90
        while "inject_end" not in events.read_text(errors="replace") or not in_effect():
            assert proc.poll() is None, f"inject ended first: {events.read_text()[-1500:]}"
            assert time.monotonic() < deadline, f"{kind} not in effect within 90 s"
            time.sleep(0.05)
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:  # a failed wait: gone all the same
            proc.kill()
            proc.wait(30)


def _freezer_cgroup(pid: int) -> Path:
    """The cgroup-v1 freezer directory of process ``pid`` of this machine."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            return FREEZER / path.lstrip("/")
    raise AssertionError(f"process {pid} is in no freezer cgroup")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def _restart_host2() -> None:
    """Cut the second host's power and boot it again (``docker restart -t 0``: its dockerd
    and every container on it end at once), then wait until its engine answers.

    A container ``docker pause`` froze there sits in a frozen freezer cgroup nested in the
    host's own: its processes cannot act on the SIGKILL until thawed, so the restart
    would wait for them for ever. Once the host's init is dead, those cgroups are thawed
    (the killed processes then end at once, running nothing), as a power cut would end them.
    """
    outer = host2.outer()
    before = outer.state(host2.CONTAINER)
    init = outer.host_pid(host2.CONTAINER)
    cgroup = _freezer_cgroup(init)
    restart = subprocess.Popen(host2.RESTART_COMMAND.split(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while restart.poll() is None:
        assert time.monotonic() < deadline, "the second host did not restart within 60 s"
        if _gone(init):
            _thaw_all(cgroup)
        time.sleep(0.05)
    assert restart.returncode == 0, restart.stderr.read() if restart.stderr else ""
    assert outer.state(host2.CONTAINER).started_at != before.started_at  # it did restart
    host2.wait_engine(timeout_s=60)


def _thaw_all(cgroup: Path) -> None:
    """Thaw every frozen freezer cgroup under ``cgroup``. The tree is being torn down as
    this walks it: a directory removed meanwhile is skipped (``os.walk`` ignores the error
    where ``Path.rglob`` raised it), as is a state file removed before it is written."""
    for where, _dirs, files in os.walk(cgroup):
        if "freezer.state" not in files:
            continue
        state = Path(where) / "freezer.state"
        with contextlib.suppress(OSError):
            if state.read_text().strip() != "THAWED":
                state.write_text("THAWED")


#: how the harness comes back: ``faultkit sweep`` by hand, or the next session's start
#: (``faultkit inject`` sweeps before it injects: a one-second pause here)
THEN = {
    "sweep": (["sweep"], ""),
    "next session": (["inject", "pause", "--node", NAME, "--duration", "1s"], "sweep: "),
}


@pytest.mark.parametrize(("trial", "then"), [*((t, "sweep") for t in TRIALS),
                                             ("partition", "next session")])
def test_dockerd_restart_then_sweep_restores_the_node(
        scratch: tuple[Inventory, Node], home: Path, tmp_path: Path, trial: str, then: str
) -> None:
    """The fault applied, the harness SIGKILLed, the host's dockerd restarted: ``faultkit
    sweep`` (or the next session's start) prints one ``reverted`` line naming the fault,
    exits 0, leaves nothing unreverted, and the node is as before (inspect, snapshot) and
    serving."""
    inventory, node = scratch
    kind, params, shows, outlives = TRIALS[trial]
    asyncio.run(wait_ready(node, timeout_s=60))  # serving, whatever a failed trial left
    inventory_file = write_inventory(inventory, tmp_path / "inventory.yaml")
    env = {**os.environ, "FAULTKIT_HOME": str(home)}
    before, was = node_snapshot(node), docker_says(node)
    _inject_then_sigkill(kind, params, node, inventory_file, env, tmp_path / "inject.stderr",
                         lambda: shows(was, docker_says(node, restarts=True)))
    left = [r.id for r in FaultJournal(home / "journal").unreverted()]
    assert len(left) == 1 and left[0].startswith(f"{kind}-{NAME}-"), left

    _restart_host2()
    after_restart = docker_says(node)
    assert outlives(was, after_restart), f"after the restart Docker said {after_restart}"

    command, prefix = THEN[then]
    swept = subprocess.run([*FAULTKIT, *command, "--inventory", str(inventory_file)],
                           capture_output=True, text=True, timeout=180, check=False, env=env)
    said = f"after the restart Docker said {after_restart}; {then} said:\n{swept.stdout}" \
           f"{swept.stderr}"
    assert swept.returncode == 0, said
    reverted = [line for line in swept.stdout.splitlines()
                if line.startswith(f"{prefix}reverted ")]
    assert len(reverted) == 1 and reverted[0].startswith(f"{prefix}reverted {left[0]} "), said
    assert FaultJournal(home / "journal").unreverted() == []
    asyncio.run(assert_node_restored(node, before))
    assert docker_says(node) == was, said
