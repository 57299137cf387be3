"""``memory_squeeze`` left applied by a dead harness: the sweep restores the limits and
starts the container again when the squeeze left it down.

Seen on the testbed's second host (tests/integration/test_dockerd_restart.py): the harness
died with the squeeze applied, the container OOM-looping under its restart policy, and the
host's dockerd restarted; the engine could not start the container again, and the sweep
restored its memory limit, said ``reverted``, and left the node down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tenacity import wait_none

from faultkit.faults import make_fault, undo
from faultkit.journal import FaultJournal
from faultkit.sweep import sweep
from tests.unit.faults_fake import FakeDockerAPI, fake_engine, node

MIB = 1024**2


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(undo, "UNDO_WAIT", wait_none())


class SqueezableAPI(FakeDockerAPI):
    """A running container with a 256 MiB limit using 64 MiB; ``update_container`` sets
    the limits, ``start`` runs it again; ``running=False`` is the container exited (an OOM
    kill its restart policy did not answer)."""

    def __init__(self, name: str, port: int) -> None:
        super().__init__(name, port)
        self.memory = self.memswap = 256 * MIB
        self.running = True

    def inspect_container(self, name: str) -> dict[str, Any]:
        attrs = super().inspect_container(name)
        attrs["HostConfig"].update(Memory=self.memory, MemorySwap=self.memswap)
        attrs["State"].update(Running=self.running, Pid=4242 if self.running else 0,
                              Status="running" if self.running else "exited",
                              ExitCode=0 if self.running else 137, OOMKilled=not self.running)
        return attrs

    def stats(self, name: str, **kw: Any) -> dict[str, Any]:
        return {"memory_stats": {"usage": 64 * MIB}}

    def update_container(self, name: str, *, mem_limit: int, memswap_limit: int) -> None:
        self.calls.append("update")
        self.memory, self.memswap = mem_limit, memswap_limit

    def start(self, name: str) -> None:
        self.calls.append("start")
        self.running = True


async def test_the_sweep_starts_a_container_the_squeeze_left_down(tmp_path: Path) -> None:
    api = SqueezableAPI("engine", 9)
    url = f"unix://{tmp_path}/docker.sock"
    fake_engine(url, api)
    target = node(base_url="http://127.0.0.1:9", docker={"host": url, "container": "engine"})
    journal = FaultJournal(tmp_path / "journal")
    fault = make_fault("memory_squeeze", target, journal=journal, limit="32m")
    await fault.inject()
    assert (api.memory, api.memswap) == (32 * MIB, 32 * MIB)
    journal.release(fault.id)  # the harness dies with the squeeze applied
    api.running = False  # OOM-killed under the limit, and nothing started it again

    (line,) = sweep(FaultJournal(tmp_path / "journal"))

    assert line.startswith(f"reverted {fault.id} ")
    assert (api.memory, api.memswap) == (256 * MIB, 256 * MIB)
    assert api.running
    assert api.calls.index("start") > max(i for i, c in enumerate(api.calls) if c == "update")
    assert FaultJournal(tmp_path / "journal").unreverted() == []


async def test_the_sweep_leaves_a_running_container_running(tmp_path: Path) -> None:
    api = SqueezableAPI("engine", 9)
    url = f"unix://{tmp_path}/docker.sock"
    fake_engine(url, api)
    target = node(base_url="http://127.0.0.1:9", docker={"host": url, "container": "engine"})
    journal = FaultJournal(tmp_path / "journal")
    fault = make_fault("memory_squeeze", target, journal=journal, limit="32m")
    await fault.inject()
    journal.release(fault.id)

    (line,) = sweep(FaultJournal(tmp_path / "journal"))

    assert "engine already running" in line
    assert api.memory == 256 * MIB and "start" not in api.calls
