"""Fault lifecycle (inject/revert/guards/events), blast radius and the sweep, on a fake backend."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from faultkit.errors import FaultAlreadyActive, FaultError, FaultRefused
from faultkit.faults import FAULTS, fault_class, make_fault
from faultkit.faults.base import Fault
from faultkit.inventory import Inventory
from faultkit.journal import FaultJournal
from faultkit.model.records import Event
from faultkit.sweep import sweep
from tests.unit.faults_fake import WORLD, FakeFault, node


def _fault(tmp_path: Path, events: list[Event] | None = None, **kw: object) -> FakeFault:
    sink = events.append if events is not None else None
    return FakeFault(node(), journal=FaultJournal(tmp_path), timeline=sink, **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _clean_world() -> None:
    WORLD.clear()


async def test_inject_revert_events_in_order(tmp_path: Path) -> None:
    events: list[Event] = []
    fault = _fault(tmp_path, events)
    async with fault:
        assert WORLD["a"] == "broken"
        assert FaultJournal(tmp_path).records()[0].state == "applied"
    assert WORLD["a"] == "ok"
    assert [e.kind for e in events] == ["inject_start", "inject_end", "revert_start", "revert_end"]
    assert all(e.source == "fault" and e.data["fault"] == "pause" for e in events)
    assert events[1].data["params"] == {"key": "a", "fail_apply": False}
    assert [e.t for e in events] == sorted(e.t for e in events)
    assert FaultJournal(tmp_path).records()[0].state == "reverted"


async def test_revert_on_exception_and_idempotent(tmp_path: Path) -> None:
    fault = _fault(tmp_path)
    with pytest.raises(ZeroDivisionError):
        async with fault:
            _ = 1 / 0
    assert WORLD["a"] == "ok"
    await fault.revert()  # idempotent
    assert FaultJournal(tmp_path).unreverted() == []


async def test_second_inject_refused(tmp_path: Path) -> None:
    fault = _fault(tmp_path)
    async with fault:
        with pytest.raises(FaultAlreadyActive):
            await fault.inject()
    with pytest.raises(FaultAlreadyActive):
        await fault.inject()


async def test_half_failed_inject_is_reverted(tmp_path: Path) -> None:
    fault = _fault(tmp_path, fail_apply=True)
    with pytest.raises(RuntimeError, match="halfway"):
        await fault.inject()
    assert WORLD["a"] == "ok"
    assert FaultJournal(tmp_path).unreverted() == []


async def test_cancellation_reverts(tmp_path: Path) -> None:
    fault = _fault(tmp_path)

    async def body() -> None:
        async with fault:
            await asyncio.sleep(30)

    task = asyncio.ensure_future(body())
    await asyncio.sleep(0.05)
    assert WORLD["a"] == "broken"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert WORLD["a"] == "ok"


async def test_guard_trips_ends_early_and_reverts(tmp_path: Path) -> None:
    events: list[Event] = []
    calls = {"n": 0}

    def other_node_down() -> str | None:
        calls["n"] += 1
        return "n2 is down" if calls["n"] >= 2 else None

    fault = _fault(tmp_path, events, guards=[other_node_down])
    fault.guard_interval_s = 0.02  # type: ignore[misc]
    async with fault:
        reason = await fault.hold(10)
        assert reason == "n2 is down"
        assert WORLD["a"] == "ok"  # reverted by the guard, before the body ended
    kinds = [e.kind for e in events]
    assert kinds == ["inject_start", "inject_end", "guard_tripped", "revert_start", "revert_end"]


async def test_async_guard_and_raising_guard_trip(tmp_path: Path) -> None:
    async def boom() -> str | None:
        raise RuntimeError("prometheus unreachable")

    fault = _fault(tmp_path, guards=[boom])
    fault.guard_interval_s = 0.02  # type: ignore[misc]
    async with fault:
        reason = await fault.hold(10)
    assert reason is not None
    assert "prometheus unreachable" in reason


async def test_dry_run_touches_nothing(tmp_path: Path) -> None:
    fault = FakeFault(node(), journal=FaultJournal(tmp_path), dry_run=True)
    async with fault:
        assert "a" not in WORLD
    assert FaultJournal(tmp_path).records() == []
    assert fault.describe().startswith("pause on n1")


async def test_crash_then_sweep_restores(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path)
    fault = FakeFault(node(), journal=journal)
    await fault.inject()
    journal.release(fault.id)  # the process "dies" here
    assert WORLD["a"] == "broken"
    lines = sweep(FaultJournal(tmp_path))
    assert WORLD["a"] == "ok"
    assert len(lines) == 1
    assert lines[0].startswith(f"reverted {fault.id}")
    assert sweep(FaultJournal(tmp_path)) == []


def test_params_are_converted_and_checked(tmp_path: Path) -> None:
    fault = FakeFault(node(), journal=FaultJournal(tmp_path), fail_apply="false")
    assert fault.params["fail_apply"] is False
    with pytest.raises(FaultError, match="no param 'bogus'"):
        FakeFault(node(), journal=FaultJournal(tmp_path), bogus=1)
    with pytest.raises(FaultError, match="fail_apply=maybe: must be true or false"):
        FakeFault(node(), journal=FaultJournal(tmp_path), fail_apply="maybe")


# blast radius ----------------------------------------------------------------------------

def _inventory() -> Inventory:
    return Inventory(nodes=[
        node("free"),
        node("guarded", protected=True),
        node("narrow", faults=["kill"]),
        node("other-host", docker={"host": "unix:///other.sock", "container": "x"}),
    ])


@pytest.mark.parametrize(
    ("node_name", "kind", "match"),
    [
        ("guarded", "pause", "is protected"),
        ("narrow", "pause", "does not allow fault 'pause'"),
        ("ghost", "pause", "no node 'ghost'"),
    ],
)
def test_blast_radius_refusals(node_name: str, kind: str, match: str, tmp_path: Path) -> None:
    WORLD["a"] = "ok"
    with pytest.raises(FaultRefused, match=match):
        make_fault(kind, node_name, inventory=_inventory(), journal=FaultJournal(tmp_path))
    assert FaultJournal(tmp_path).records() == []
    assert WORLD == {"a": "ok"}


def test_node_not_in_inventory_refused() -> None:
    with pytest.raises(FaultRefused, match="not in the inventory"):
        make_fault("pause", node("stranger"), inventory=_inventory(), dry_run=True)


def test_node_restart_refused_when_it_would_hit_a_protected_node() -> None:
    sock = {"host": "unix:///var/run/docker.sock", "container": "a"}
    inv = Inventory(nodes=[
        node("a", docker=sock),
        node("b", docker={**sock, "container": "b"}, protected=True),
    ])
    with pytest.raises(FaultRefused, match="would also restart node 'b'"):
        make_fault("node_restart", "a", inventory=inv, dry_run=True)


def test_unknown_kind() -> None:
    with pytest.raises(FaultError, match="unknown fault 'meteor'"):
        make_fault("meteor", node(), dry_run=True)


def test_every_registered_kind_resolves() -> None:
    for kind in FAULTS:
        cls = fault_class(kind)
        assert issubclass(cls, Fault)
        assert cls.kind == kind


# state machine: random inject / revert / crash / sweep -----------------------------------

class FaultSequences(RuleBasedStateMachine):
    """Invariant: after a sweep, nothing is left applied (except faults still live)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="fk-journal-"))
        self.journal = FaultJournal(self.dir)
        self.live: dict[str, Fault] = {}
        self.crashed: set[str] = set()
        self.loop = asyncio.new_event_loop()
        WORLD.clear()

    @rule(key=st.sampled_from(["a", "b", "c"]))
    def inject(self, key: str) -> None:
        """One node per key; a second fault on a node whose fault is live is refused."""
        fault = FakeFault(node(f"n-{key}"), journal=self.journal, key=key)
        if key in self.live:
            with pytest.raises(FaultRefused, match=f"locked by fault {self.live[key].id}"):
                self.loop.run_until_complete(fault.inject())
            return
        if WORLD.get(key) == "broken":
            return  # crashed, not swept yet
        self.loop.run_until_complete(fault.inject())
        self.live[key] = fault

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def revert(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.live)))
        self.loop.run_until_complete(self.live.pop(key).revert())

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.live)))
        fault = self.live.pop(key)
        self.journal.release(fault.id)
        self.crashed.add(key)

    @rule()
    def sweep(self) -> None:
        sweep(FaultJournal(self.dir))
        for key in list(self.crashed):
            assert WORLD[key] == "ok", f"sweep left {key} broken"
        self.crashed.clear()

    @invariant()
    def broken_only_where_applied(self) -> None:
        broken = {k for k, v in WORLD.items() if v == "broken"}
        assert broken == set(self.live) | self.crashed

    def teardown(self) -> None:
        for fault in self.live.values():
            self.loop.run_until_complete(fault.revert())
        try:
            sweep(FaultJournal(self.dir))
            assert all(v == "ok" for v in WORLD.values())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)


TestFaultSequences = FaultSequences.TestCase
TestFaultSequences.settings = settings(
    max_examples=40, stateful_step_count=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


async def test_after_revert_end_runs_after_revert_end_is_dated(tmp_path: Path) -> None:
    """Cleanup that is no longer the fault (a proxy's drain) must not delay t_revert."""
    events: list[Event] = []
    seen: list[list[str]] = []

    class Draining(FakeFault):
        async def _after_revert_end(self) -> None:
            seen.append([e.kind for e in events])
            await asyncio.sleep(0.3)

    fault = Draining(node(), journal=FaultJournal(tmp_path), timeline=events.append)
    async with fault:
        pass
    assert seen == [["inject_start", "inject_end", "revert_start", "revert_end"]]
    assert [e.kind for e in events] == ["inject_start", "inject_end", "revert_start", "revert_end"]
