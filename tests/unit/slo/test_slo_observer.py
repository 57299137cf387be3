"""slo.observer: change-only events for readiness, up samples and alert states."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from faultkit.inventory import Node
from faultkit.model.records import Event
from slo.errors import PrometheusUnavailable
from slo.labels import rule_durations
from slo.observer import Observer
from slo.prom import Alert, Series


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, obj: Event) -> None:
        self.events.append(obj)


def node(port: int = 9) -> Node:
    return Node(name="n1", engine="vllm", base_url=f"http://127.0.0.1:{port}", model="m",
                prometheus={"job": "j1"})


async def test_probe_events_only_on_change_with_full_history_in_memory() -> None:
    healthy = {"ok": True}

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200 if healthy["ok"] else 503, text="x")

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    sink = Sink()
    try:
        async with Observer(node(port), None, sink, interval_s=0.05) as obs:
            await asyncio.sleep(0.3)
            healthy["ok"] = False
            await asyncio.sleep(0.3)
            healthy["ok"] = True
            await asyncio.sleep(0.3)
    finally:
        await runner.cleanup()
    assert [e.kind for e in sink.events] == ["health_ok", "health_fail", "health_ok"]
    assert sink.events[1].data["status"] == 503
    assert all(e.source == "observer" and e.node == "n1" for e in sink.events)
    assert len(obs.probes) > 10  # every probe kept in memory, only changes written
    assert [e.t for e in sink.events] == sorted(e.t for e in sink.events)


def test_up_transitions_from_raw_samples_even_between_polls() -> None:
    sink = Sink()
    obs = Observer(node(), None, sink)
    labels = {"job": "j1", "instance": "a"}
    obs._on_up(10.0, [Series(labels, [(1.0, 1.0), (2.0, 1.0), (3.0, 0.0), (4.0, 1.0)])])
    obs._on_up(11.0, [Series(labels, [(3.0, 0.0), (4.0, 1.0), (5.0, 1.0)])])  # overlap
    assert [(e.kind, e.data["t_sample"]) for e in sink.events] == [
        ("up_1", 1.0), ("up_0", 3.0), ("up_1", 4.0)]
    assert all(e.t == 10.0 for e in sink.events)  # the moment seen


def test_alert_states_for_this_node_only() -> None:
    sink = Sink()
    obs = Observer(node(), None, sink)
    obs._for_s = {"Down": 2.0}

    def alert(state: str, **labels: str) -> Alert:
        return Alert("Down", state, {"alertname": "Down", **labels}, {}, 100.0, 1.0)

    obs._on_alerts(101.0, [alert("pending", job="j1"), alert("firing", job="other")])
    obs._on_alerts(101.5, [alert("pending", job="j1")])  # no change: no event
    obs._on_alerts(102.5, [alert("firing", job="j1")])
    obs._on_alerts(104.0, [])
    kinds = [(e.kind, e.t, e.data["t_state"]) for e in sink.events]
    assert kinds == [("alert_pending", 101.0, 100.0), ("alert_firing", 102.5, 102.0),
                     ("alert_resolved", 104.0, 104.0)]
    obs._on_alerts(105.0, [alert("firing", node="n1")])  # matched by the node label too
    assert sink.events[-1].kind == "alert_firing"


def test_a_rule_shared_by_name_across_nodes_is_read_for_this_node() -> None:
    """``faultkit rules`` writes one FaultkitNodeDown per node, each with its own for:; the
    node's own rule dates its alerts, wherever it sits among the groups."""
    def rule(name: str, duration: float, **labels: str) -> dict[str, object]:
        return {"name": name, "duration": duration, "labels": labels}

    groups = [{"rules": [rule("Down", 60.0, node="n1"), rule("Slow", 5.0, job="j1")]},
              {"rules": [rule("Down", 0.0, node="other"), rule("Slow", 9.0, job="jx")]},
              {"rules": [rule("Shared", 30.0, severity="page")]}]
    assert rule_durations(groups, node()) == {"Down": 60.0, "Slow": 5.0, "Shared": 30.0}
    groups.reverse()
    assert rule_durations(groups, node()) == {"Down": 60.0, "Slow": 5.0, "Shared": 30.0}


async def test_a_hung_probe_never_delays_the_next_and_a_stale_answer_changes_nothing() -> None:
    """The node hangs, then answers again: probes keep their cadence through the hang, and
    the hung probes timing out after a newer one answered OK do not flip the state back."""
    hang = asyncio.Event()
    hang.set()

    async def health(_: web.Request) -> web.Response:
        if hang.is_set():
            await asyncio.sleep(1.5)  # longer than the probe timeout
        return web.Response(status=200, text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    sink = Sink()
    try:
        async with Observer(node(port), None, sink, interval_s=0.05, probe_timeout_s=0.5) as obs:
            await asyncio.sleep(0.2)
            hang.clear()  # answers again; probes sent before still hang until their timeout
            await asyncio.sleep(0.8)
    finally:
        await runner.cleanup()
    kinds = [e.kind for e in sink.events]
    assert kinds == ["health_fail", "health_ok"], kinds  # no flip back to fail
    ok = sink.events[1]
    sent_during_hang = [p for p in obs.probes if not p.ok]
    assert len(sent_during_hang) >= 3  # a probe every 0.05 s although each hung 0.5 s
    # the hung probes timed out *after* the OK one answered, and were ignored
    assert max(p.t for p in sent_during_hang) < ok.t


def _look(obs: Observer, seen: float, ok: bool) -> None:
    """One Prometheus look as the observer judges it: answered (no alerts, no samples) or not."""
    if ok:
        obs._on_prometheus(seen, [], [], "")
    else:
        obs._on_prometheus(seen, None, None, "no answer within 5.0 s")


def test_a_short_prometheus_gap_is_not_an_outage() -> None:
    """One slow look loses nothing: the next look's up range covers the gap."""
    sink = Sink()
    obs = Observer(node(), None, sink)
    _look(obs, 100.0, True)
    for t in (100.25, 105.3, 107.9):  # failing for 7.9 s < PROMETHEUS_GAP_S
        _look(obs, t, False)
    _look(obs, 108.0, True)
    assert [e.kind for e in sink.events] == []


def test_a_long_prometheus_gap_is_an_outage_written_once_then_up() -> None:
    sink = Sink()
    obs = Observer(node(), None, sink)
    _look(obs, 100.0, True)
    for t in (100.25, 104.0, 108.0, 108.25):  # 8 s without an answer: samples may be lost
        _look(obs, t, False)
    _look(obs, 109.0, True)
    assert [(e.kind, e.t) for e in sink.events] == [("prometheus_down", 108.0),
                                                  ("prometheus_up", 109.0)]
    assert sink.events[0].data["since"] == 100.25


def test_a_restarted_prometheus_is_an_outage_however_short_the_gap() -> None:
    """A Prometheus killed and started again scraped nothing in between: the next look's
    ``up`` range has a hole, so even a 3 s gap is an outage, dated from the last answer."""
    sink = Sink()
    obs = Observer(node(), None, sink)
    obs._on_prometheus(100.0, [], [], "", started=50.0)
    for t in (100.25, 101.0, 102.5):  # failing for 3 s, well under PROMETHEUS_GAP_S
        _look(obs, t, False)
    obs._on_prometheus(103.2, [], [], "", started=102.9)
    assert [(e.kind, e.t) for e in sink.events] == [("prometheus_down", 103.2),
                                                  ("prometheus_up", 103.2)]
    assert sink.events[0].data["since"] == 100.0
    assert sink.events[0].data["restarted_at"] == 102.9
    assert "restarted" in sink.events[0].data["detail"]


def test_the_same_prometheus_answering_again_is_no_outage() -> None:
    sink = Sink()
    obs = Observer(node(), None, sink)
    obs._on_prometheus(100.0, [], [], "", started=50.0)
    _look(obs, 100.25, False)
    obs._on_prometheus(101.0, [], [], "", started=50.0)
    assert sink.events == []



class QuietPrometheus:
    """A Prometheus that answers every look with nothing: no alert, no sample, no rule,
    started once (tests override what their case needs)."""

    def alerts(self) -> list[Alert]:
        return []

    def query_samples(self, promql: str) -> list[Series]:
        return []

    def rules(self, kind: str) -> list[dict[str, object]]:
        return []

    def start_time(self) -> float:
        return 1.0


async def test_a_restart_between_two_answered_looks_shows_at_the_last_look() -> None:
    """The last look reads the start time even when no look failed."""

    class RestartsUnseen(QuietPrometheus):
        def __init__(self) -> None:
            self.starts = 0

        def start_time(self) -> float:
            self.starts += 1
            return 1.0 if self.starts == 1 else 2.0

    sink = Sink()
    async with Observer(node(), RestartsUnseen(), sink, interval_s=0.5):  # type: ignore[arg-type]
        pass
    assert [e.kind for e in sink.events if e.kind.startswith("prometheus")] == [
        "prometheus_down", "prometheus_up"]


def test_prometheus_never_answering_is_an_outage_at_once() -> None:
    sink = Sink()
    obs = Observer(node(), None, sink)
    _look(obs, 100.0, False)
    assert [(e.kind, e.t) for e in sink.events] == [("prometheus_down", 100.0)]


async def test_a_failed_last_look_is_an_outage() -> None:
    """The end of the window cannot be observed: the run must not pass on it."""

    class FailsAfterTheFirstLook(QuietPrometheus):
        def __init__(self) -> None:
            self.looks = 0

        def alerts(self) -> list[Alert]:
            self.looks += 1
            if self.looks > 1:
                raise PrometheusUnavailable("http://127.0.0.1:1", "refused")
            return []

    sink = Sink()
    async with Observer(node(), FailsAfterTheFirstLook(), sink, interval_s=0.5):  # type: ignore[arg-type]
        pass
    assert [e.kind for e in sink.events if e.kind.startswith("prometheus")] == ["prometheus_down"]
