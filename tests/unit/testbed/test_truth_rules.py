"""The truth trials' own rules (testbed/truth.py): when the server's record cannot decide
whether a user lost a request, and which alert sample starts a firing run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from faultkit.inventory import Inventory
from faultkit.inventory.node import Node
from faultkit.model.records import RequestRecord, Status
from faultkit.pager import Notification
from testbed import truth, truth_sources
from testbed.simnode.truth import TruthFileError, TruthLog, parse_truth
from testbed.truth import death_moments, truth_lost

T = 1_000.0  # the fault's effect, epoch seconds


def _event(action: str, at: float, **attrs: str) -> dict[str, Any]:
    return {"Type": "container", "Action": action, "timeNano": str(int(at * 1e9)),
            "Actor": {"Attributes": {"name": "faultkit-sim-vllm", **attrs}}}


def test_a_sigkill_is_a_death_and_a_polite_signal_is_not() -> None:
    events = [_event("kill", T + 0.071, signal="9"), _event("kill", T + 0.5, signal="15"),
              _event("die", T + 0.162, exitCode="137"), _event("oom", T + 2.0),
              _event("destroy", T + 0.377)]
    assert death_moments(events) == pytest.approx([T + 0.071, T + 0.162, T + 2.0])


def _record(request_id: str, t_invoke: float, status: Status) -> RequestRecord:
    return RequestRecord(id=request_id, node="sim-vllm", kind="chat", t_invoke=t_invoke,
                         status=status, t_end=t_invoke + 0.6)


def test_a_request_finished_just_before_the_sigkill_is_undecidable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI, rollout-never-ready: accepted 0.47 s before the removal, finished by the server
    9 ms before Docker's SIGKILL and 100 ms before ``die``; the client saw a reset."""
    events = [
        {"event": "request_accepted", "id": "a", "t": T - 0.474},
        {"event": "request_finished", "id": "a", "t": T + 0.062},
        {"event": "request_accepted", "id": "b", "t": T - 0.2},
        {"event": "request_finished", "id": "b", "t": T - 0.15},  # long before: delivered
    ]
    monkeypatch.setattr(truth, "truth_events", lambda node, since: events)
    ledger = [_record("a", T - 0.477, "fail"), _record("b", T - 0.21, "ok"),
              _record("c", T + 0.2, "fail")]  # arrived in the outage, never reached it
    node = Node.model_validate({"name": "sim-vllm", "engine": "vllm",
                                "model": "tiny", "base_url": "http://127.0.0.1:18001"})
    deaths = death_moments([_event("kill", T + 0.071, signal="9"),
                            _event("die", T + 0.162, exitCode="137")])
    lost, undecidable = truth_lost(ledger, node, T - 5, T, T + 6, deaths)
    assert (lost, undecidable) == (1, 1)  # c lost; a undecidable (b was in flight, and ok)
    # by ``die`` alone, "a" finished 101 ms before it: Docker stamps a death after the
    # kernel's kill (DEATH_EVENT_LAG_S), so that is still inside the race
    lost, undecidable = truth_lost(ledger, node, T - 5, T, T + 6, [T + 0.162 + 0.001])
    assert (lost, undecidable) == (1, 1)
    # finished 0.25 s before the death event: delivered, whatever the event's lag
    lost, undecidable = truth_lost(ledger, node, T - 5, T, T + 6, [T + 0.062 + 0.25])
    assert (lost, undecidable) == (1, 0)


# --------------------------------------------------------------------- the truth file itself

TORN = '{"t":1796164102.9368334,"event":"request_accepted","id":"30e744-000345","max_tokens"'
STARTED = '{"t":1796164104.488811,"event":"started","pid":7}'
READY = '{"t":1796164105.0,"event":"ready"}'


def test_a_line_cut_short_by_a_death_is_read_as_that_and_the_restart_kept() -> None:
    """CI, memory squeeze: the OOM kill stopped a line mid-write, and the next process's
    first line was appended to it (before the writer's fix)."""
    events, cut_short = parse_truth("\n".join([TORN + STARTED, READY]) + "\n")
    assert [e["event"] for e in events] == ["started", "ready"] and cut_short == 1
    events, cut_short = parse_truth("\n".join([TORN, STARTED, READY]))  # the fixed writer
    assert [e["event"] for e in events] == ["started", "ready"] and cut_short == 1
    events, cut_short = parse_truth(READY + "\n" + TORN)  # died writing its last line
    assert [e["event"] for e in events] == ["ready"] and cut_short == 1


def test_an_unreadable_line_no_death_explains_is_refused() -> None:
    with pytest.raises(TruthFileError, match="truth line 2"):
        parse_truth("\n".join([READY, TORN, READY]))


def test_the_writer_starts_after_a_dead_writers_fragment_on_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "truth.jsonl"
    path.write_text(READY + "\n" + TORN)  # a process died writing
    log = TruthLog(str(path))
    log.emit("started", pid=8)
    log.close()
    events, cut_short = parse_truth(path.read_text())
    assert [e["event"] for e in events] == ["ready", "started"] and cut_short == 1
    assert path.read_text().splitlines()[1] == TORN


class _Prom:
    """query_samples of ALERTS: raw samples per series, as Prometheus returns them."""

    def __init__(self, *series: list[float]) -> None:
        from slo.prom import Series

        self.series = [Series({"alertname": f"A{i}"}, [(t, 1.0) for t in s])
                       for i, s in enumerate(series)]

    def query_samples(self, promql: str, t: float | None = None) -> list[Any]:
        return [] if 'alertstate="pending"' in promql else self.series


def _node() -> Any:
    from faultkit.inventory import Node

    return Node(name="sim-vllm", engine="sim", personality="vllm",
                base_url="http://127.0.0.1:9", model="m")


def test_an_alert_that_resolved_and_fires_again_for_this_fault_counts() -> None:
    """The trial before left FaultkitNodeDown firing until 2.7 s before t_effect = 100; it
    fired again at 102.3 for this fault (evaluations every 5 s)."""
    from testbed.truth_sources import first_alert_firing

    prom = _Prom([82.3, 87.3, 92.3, 102.3, 107.3], [107.3])  # none at 97.3: resolved
    assert first_alert_firing(prom, _node(), 100.0, 120.0, 5.0) == 102.3  # type: ignore[arg-type]


def test_an_alert_already_firing_through_the_fault_is_not_its_detection() -> None:
    from testbed.truth_sources import first_alert_firing

    prom = _Prom([85.0, 90.0, 95.0, 100.0, 105.0], [106.0, 111.0])
    assert first_alert_firing(prom, _node(), 98.0, 120.0, 5.0) == 106.0  # type: ignore[arg-type]
    assert first_alert_firing(_Prom([85.0, 90.0, 95.0, 100.0]), _node(),  # type: ignore[arg-type]
                              98.0, 120.0, 5.0) is None


def test_each_alert_starts_a_run_after_a_gap_of_its_own_groups_interval() -> None:
    """A one-scrape FaultkitNodeDown blip 7 s before the fault (node alerts every 1 s) is a
    run of its own: the fault's starts at 77.6. A FaultkitSLOBurn evaluated every 5 s and
    firing through the fault is one run under way, not the fault's detection."""
    from slo.prom import Series
    from testbed.truth_sources import first_alert_firing

    class Prom:
        def query_samples(self, promql: str, t: float | None = None) -> list[Series]:
            if 'alertstate="pending"' in promql:
                return []
            down = [70.6, 77.6, 78.6, 79.6, 80.6]
            burn = [66.0, 71.0, 76.0, 81.0]
            return [Series({"alertname": "FaultkitNodeDown"}, [(t, 1.0) for t in down]),
                    Series({"alertname": "FaultkitSLOBurn"}, [(t, 1.0) for t in burn])]

    assert first_alert_firing(Prom(), _node(), 75.25, 90.0, 1.0, 5.0) == 77.6  # type: ignore[arg-type]


def test_a_firing_run_whose_pending_began_before_the_fault_is_not_its_detection() -> None:
    """An error-ratio alert (for: 10 s) went pending at 96 on the trial before's errors and
    fired at 106; the fault took effect at 100 and FaultkitNodeDown fired for it at 103."""
    from slo.prom import Series
    from testbed.truth_sources import first_alert_firing

    ratio, down = {"alertname": "FaultkitErrorRatioHigh"}, {"alertname": "FaultkitNodeDown"}

    class Prom:
        def query_samples(self, promql: str, t: float | None = None) -> list[Series]:
            if 'alertstate="pending"' in promql:
                return [Series({**ratio, "alertstate": "pending"},
                               [(float(t), 1.0) for t in range(96, 106)])]
            return [Series({**ratio, "alertstate": "firing"}, [(106.0, 1.0), (107.0, 1.0)]),
                    Series({**down, "alertstate": "firing"}, [(103.0, 1.0), (104.0, 1.0)])]

    assert first_alert_firing(Prom(), _node(), 100.0, 120.0, 1.0) == 103.0  # type: ignore[arg-type]

    class OnlyTheCarried(Prom):
        def query_samples(self, promql: str, t: float | None = None) -> list[Series]:
            return [s for s in super().query_samples(promql, t)
                    if s.labels["alertname"] == "FaultkitErrorRatioHigh"]

    assert first_alert_firing(OnlyTheCarried(), _node(), 100.0, 120.0, 1.0) is None  # type: ignore[arg-type]


def test_the_first_page_is_of_an_alert_this_fault_started(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An alert firing before the effect and notified again inside the window (an earlier
    trial's) is no page for this fault; the first notification of one that started after
    the effect is."""
    def alert(started: float, node: str = "sim-vllm") -> dict[str, Any]:
        stamp = datetime.fromtimestamp(started, UTC).isoformat().replace("+00:00", "Z")
        return {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": node},
                "startsAt": stamp}

    pages = [Notification(T + 0.15, {"alerts": [alert(T - 30)]}),          # stale
             Notification(T + 2.0, {"alerts": [alert(T + 1.0, "llama")]}),  # another node
             Notification(T + 3.3, {"alerts": [alert(T + 1.2)]})]           # this fault's
    monkeypatch.setattr(truth_sources, "fetch_notifications",
                        lambda url, since, until: [p for p in pages
                                                   if since <= p.t_received <= until])
    inventory = Inventory.model_validate({
        "alertmanager": {"url": "http://127.0.0.1:19093", "pager_url": "http://127.0.0.1:9"},
        "nodes": [{"name": "sim-vllm", "engine": "sim", "personality": "vllm",
                   "base_url": "http://127.0.0.1:9", "model": "m"}]})
    node = inventory.node("sim-vllm")
    assert truth_sources.first_page(inventory, node, T, T + 60) == T + 3.3
    assert truth_sources.first_page(inventory, node, T, T + 3.0) is None
    # the same alert carried over into the fault, firing until T + 2.0: its page at +3.3
    # (started +1.2) is that run's, not this fault's
    carried = {"FaultkitNodeDown": T + 2.0}
    assert truth_sources.first_page(inventory, node, T, T + 60, carried) is None


def _network(action: str, at: float) -> dict[str, Any]:
    return {"Type": "network", "Action": action, "timeNano": str(int(at * 1e9)),
            "Actor": {"Attributes": {"container": "c0ffee"}}}


def test_a_refuse_cut_runs_from_the_gap_to_dockers_disconnect() -> None:
    events = [_network("disconnect", T - 30), _event("kill", T + 0.1, signal="9"),
              _network("disconnect", T + 0.31), _network("disconnect", T + 0.32)]
    assert truth.refuse_cuts(T, events) == [truth.Cut(T, T + 0.31)]
    # no event (Docker lost it): the cut is the gap's start alone
    assert truth.refuse_cuts(T, [_network("connect", T + 4)]) == [truth.Cut(T, T)]
    assert truth.refuse_cuts(None, events) == []


def test_a_stream_the_server_finished_while_the_endpoint_was_torn_down_is_undecidable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Second host, partition refuse: a new connection was reset at T, Docker's
    ``disconnect`` came at T + 0.27; the client received two whole responses the server
    finished at T + 0.15 and T + 0.19, and lost the one it finished at T + 0.5."""
    events = [
        {"event": "request_accepted", "id": "a", "t": T - 0.44},
        {"event": "request_finished", "id": "a", "t": T + 0.15},
        {"event": "request_accepted", "id": "b", "t": T - 0.41},
        {"event": "request_finished", "id": "b", "t": T + 0.19},
        {"event": "request_accepted", "id": "c", "t": T - 0.3},
        {"event": "request_finished", "id": "c", "t": T + 0.5},
        {"event": "request_accepted", "id": "d", "t": T - 0.9},
        {"event": "request_finished", "id": "d", "t": T - 0.2},
    ]
    monkeypatch.setattr(truth, "truth_events", lambda node, since: events)
    ledger = [_record("a", T - 0.45, "ok"), _record("b", T - 0.42, "ok"),
              _record("c", T - 0.31, "fail"), _record("d", T - 0.91, "ok"),
              _record("e", T + 0.3, "fail")]  # arrived in the cut: never reached the server
    node = Node.model_validate({"name": "sim-vllm", "engine": "vllm",
                                "model": "tiny", "base_url": "http://127.0.0.1:18001"})
    cut = truth.Cut(T, T + 0.27)
    assert truth_lost(ledger, node, T - 5, T, T + 6, [], [cut]) == (2, 2)  # c, e; a, b
    # a cut dated by its first moment alone would call a and b lost (and c, e)
    assert truth_lost(ledger, node, T - 5, T, T + 6, [], [truth.Cut(T, T)]) == (4, 0)
