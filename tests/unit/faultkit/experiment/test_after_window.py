"""The after window a run waits for (``lifecycle._after_window_filled``): the run ends only
once the window from recovery (or the revert, if later, or the end of the last held user
the node served) holds AFTER_MIN_REQUESTS of the node's requests — sent or ended, probes
not counted — or cannot: the load no longer sends, or the run has waited AFTER_MAX_EXTRA_S
past the hold."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from faultkit.experiment.lifecycle import (
    AFTER_MAX_EXTRA_S,
    AFTER_MIN_REQUESTS,
    _after_window_filled,
)
from faultkit.model.events import EventKind
from faultkit.model.records import Event, RequestRecord

T_REC = 1000.0
HOLD = 5.0


def _record(i: int, t: float, kind: str = "user") -> RequestRecord:
    return RequestRecord(id=f"r{i}", node="n", kind=kind,  # type: ignore[arg-type]
                         t_invoke=t, status="ok", t_end=t + 0.5, t_scheduled=t)


@dataclass
class FakeLoad:
    records: list[RequestRecord] = field(default_factory=list)
    flying: dict[str, float] = field(default_factory=dict)
    still_sending: bool = True

    def sending(self) -> bool:
        return self.still_sending

    def in_flight(self) -> dict[str, float]:
        return dict(self.flying)


@dataclass
class FakeState:
    load: FakeLoad | None
    events: list[Event] = field(default_factory=list)
    effect_node: str = "n"


def _filled(state: Any, now: float = T_REC + HOLD + 1.0) -> bool:
    return _after_window_filled(state, T_REC, now, HOLD)


def test_the_run_waits_until_the_after_window_holds_enough_requests() -> None:
    short = FakeLoad([_record(i, T_REC + 0.1 * i) for i in range(AFTER_MIN_REQUESTS - 2)])
    assert not _filled(FakeState(short))
    short.flying = {"a": T_REC + 7.0, "b": T_REC + 7.1}  # sent, not yet ended: they count
    assert _filled(FakeState(short))


def test_requests_before_recovery_and_probes_do_not_count() -> None:
    before = [_record(i, T_REC - 1.0 - 0.01 * i) for i in range(AFTER_MIN_REQUESTS)]
    probes = [_record(1000 + i, T_REC + 0.1 * i, "probe") for i in range(AFTER_MIN_REQUESTS)]
    assert not _filled(FakeState(FakeLoad(before + probes)))


def test_the_window_starts_at_the_revert_when_it_ends_after_recovery() -> None:
    records = [_record(i, T_REC + 0.1 * i) for i in range(AFTER_MIN_REQUESTS)]
    revert = Event(T_REC + 3.0, "fault", EventKind.REVERT_END, "n", {})
    assert _filled(FakeState(FakeLoad(records)))
    assert not _filled(FakeState(FakeLoad(records), [revert]))  # 30 of them came after it


def test_a_load_that_no_longer_sends_or_a_low_rate_ends_the_wait() -> None:
    few = [_record(i, T_REC + i) for i in range(5)]
    assert _filled(FakeState(FakeLoad(few, still_sending=False)))
    assert _filled(FakeState(None))
    assert not _filled(FakeState(FakeLoad(few)), T_REC + HOLD + 1.0 + AFTER_MAX_EXTRA_S - 0.1)
    assert _filled(FakeState(FakeLoad(few)), T_REC + HOLD + 1.0 + AFTER_MAX_EXTRA_S)


def test_the_window_starts_once_the_node_served_the_users_the_fault_held() -> None:
    records = [_record(i, T_REC + 0.1 * i) for i in range(AFTER_MIN_REQUESTS)]
    held = dataclasses.replace(_record(999, T_REC - 4.0), t_end=T_REC + 3.0)
    assert not _filled(FakeState(FakeLoad([*records, held])))  # 30 of them came after it
    never_answered = dataclasses.replace(held, status="fail", error_class="cancelled")
    assert _filled(FakeState(FakeLoad([*records, never_answered])))


async def test_the_run_watches_on_until_its_after_window_is_filled() -> None:
    """``_wait_recovered`` asks the after window: recovered and held 6.5 s ago, the load
    still sending, too few requests since — the run watches to its deadline and notes it;
    with enough, it ends at its first look."""
    import time
    from types import SimpleNamespace

    from faultkit.experiment.lifecycle import _wait_recovered

    now = time.time()
    t_effect = now - 10.0
    kill = {"docker_actions": ["die"], "required": "docker", "spans_outage": False}
    events = [Event(t_effect - 0.1, "fault", EventKind.INJECT_START, "n",
                    {"fault": "kill", "effect": kill}),
              Event(t_effect, "harness", "docker_die", "n", {"exit_code": 137}),
              Event(now - 6.5, "observer", EventKind.HEALTH_OK, "n", {"ok": True})]

    def state(count: int) -> Any:
        records = [_record(i, now - 6.4 + i * 0.01) for i in range(count)]
        notes: list[str] = []
        return SimpleNamespace(
            load=FakeLoad(records), events=events, effect_node="n",
            node=SimpleNamespace(name="n"), slo=SimpleNamespace(recovery_hold_s=HOLD),
            notes=notes, note=lambda kind, **data: notes.append(kind))

    few = state(AFTER_MIN_REQUESTS - 1)
    await _wait_recovered(few, deadline_s=11.5)
    assert few.notes == [EventKind.RECOVERY_DEADLINE]
    enough = state(AFTER_MIN_REQUESTS)
    await _wait_recovered(enough, deadline_s=60.0)
    assert enough.notes == []
