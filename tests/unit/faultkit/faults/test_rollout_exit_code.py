"""A candidate looping at start-up is quoted with its own exit code: Docker's ``die`` event
has it, while the container's state reads 0 again once the restart policy starts it."""

from __future__ import annotations

from typing import Any

import pytest

from faultkit.docker.containers import ContainerState
from faultkit.faults import make_fault, rollout
from faultkit.inventory import Inventory, ServingConfig
from faultkit.probes.health import ProbeResult
from tests.unit.faults_fake import node


class LoopingCandidate:
    """The platform of a candidate that exited 1, twice, and is running again."""

    def state(self, container: str) -> ContainerState:
        return ContainerState(id="c", name=container, status="running", running=True,
                              paused=False, restarting=False, exit_code=0, oom_killed=False,
                              restart_count=2, started_at=None, finished_at=None, pid=7,
                              image="img", restart_policy="on-failure", memory_limit=None)

    def events(self, container: str, since: float, until: float) -> list[dict[str, Any]]:
        return [{"Action": "start"},
                {"Action": "die", "Actor": {"Attributes": {"exitCode": "1"}}},
                {"Action": "start"},
                {"Action": "die", "Actor": {"Attributes": {"exitCode": "1"}}},
                {"Action": "start"}]

    def last_exit_code(self, container: str, since: float) -> int | None:
        from faultkit.platform.base import Platform
        return Platform.last_exit_code(self, container, since)  # type: ignore[arg-type]


async def test_a_restart_loop_quotes_the_die_events_exit_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = node("n1", docker={"host": "tcp://10.0.0.2:2375", "container": "n1"})
    inv = Inventory(nodes=[target], serving_configs={"bad": ServingConfig(image="img")})
    fault = make_fault("rollout", target, inventory=inv, dry_run=True, config="bad",
                       max_restarts=2)

    async def not_ready(*args: Any, **kwargs: Any) -> ProbeResult:
        return ProbeResult(0.0, False, None, "connection refused", 0.0)

    monkeypatch.setattr(rollout, "probe", not_ready)
    monkeypatch.setattr(type(fault), "platform", property(lambda self: LoopingCandidate()))
    assert await fault._wait_candidate() == "restart loop: 2 restarts (exit 1)"  # type: ignore[attr-defined]
