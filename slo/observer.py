"""The observer: a background task that watches one node while a scenario runs.

Every ``interval_s`` (≤ 0.5 s, default 0.25 s) it probes the node's readiness endpoint
(``faultkit.probes.health.probe``) and asks Prometheus for active alerts and the node's raw
``up`` samples, and writes a timeline :class:`Event` (source ``observer``) **on changes
only**:

=================  ==========================================================================
kind               data
=================  ==========================================================================
health_ok/_fail    ok, status, detail, latency_s — ``t`` is when the probe was sent
up_1 / up_0        value, labels, t_sample — ``t_sample`` is the scrape timestamp Prometheus
                   stored; every transition in the raw samples is written, even if two
                   happened between polls
alert_pending      alertname, labels, activeAt, for_s, t_state (activeAt)
alert_firing       … t_state = activeAt + for_s (when Prometheus moved it to firing), never
                   later than the moment seen
alert_resolved     … t_state = the moment it was first seen missing from /api/v1/alerts
prometheus_down    detail, since (restarted_at) — Prometheus unreachable long enough for
                   evidence to be lost, or restarted (below; written once per outage);
                   prometheus_up again
am_alert           alertname, fingerprint, state (active / suppressed / unprocessed),
                   silenced_by (each silence described: id, who, why), inhibited_by,
                   starts_at, labels — an alert naming the node first seen in Alertmanager,
                   or its state there changed (only with an ``alertmanager``)
alertmanager_down  detail — Alertmanager did not answer a look; alertmanager_up again
=================  ==========================================================================

``Event.t`` is always the epoch moment the observer *saw* the change; the ``t_state`` /
``t_sample`` fields carry the moment Prometheus says it happened. Only alerts whose
labels name the node (``node=<name>``) or its job (``job=<job>``) are recorded.

**When Prometheus is down.** One look that fails (a query timing out on a busy machine) loses
no evidence by itself: the next look's ``up[10s]`` returns every sample of the gap with its
own scrape time, and alerts carry Prometheus' own ``activeAt``. So ``prometheus_down`` is
written when evidence can be lost: Prometheus has not answered once since the observer
started, or has not answered for :data:`PROMETHEUS_GAP_S` (8 s, inside the 10 s the ``up``
range looks back), or the last look, at the end of the window, failed. What a shorter gap
can hide is an alert that fired *and* resolved inside it; detection then rests on ``up``.

That reasoning holds only while the same Prometheus process kept scraping. A Prometheus
killed and started again scraped nothing in between, however short the gap, and its alert
state started afresh: the next look's ``up`` range has a hole, not the samples. So the
observer reads Prometheus' start time (``/api/v1/status/runtimeinfo``) at its first
answered look, again at the first answer after any failed look, and at the last look; a
start time that changed is a restart, written as ``prometheus_down`` (``since`` the last
answer before it, ``restarted_at`` the new start time; the detail names that span) and
``prometheus_up`` at once, whether or not the gap reached :data:`PROMETHEUS_GAP_S`.

Probes and Prometheus looks run on independent cadences, so a hung Prometheus never
delays readiness probing. Probes are sent on a fixed cadence whether or not the previous
ones answered: a probe that hangs (a paused or cut-off node) takes up to
``probe_timeout_s`` (default 1 s) and is stamped with its send time, but never delays the
next one, so the moment a node answers again is resolved to ``interval_s`` even after a
hang (measurement dates an OK probe by its answer). A result older than one already judged
(a hung probe timing out after a newer probe answered) changes nothing.

The full probe history stays in memory (:attr:`Observer.probes`); on disk the changes are
enough, since readiness is a step function: measurement reconstructs state intervals from
``health_ok``/``health_fail`` events (each holds until the next one).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import httpx

from faultkit.inventory import Node
from faultkit.model.events import EventKind, alert_kind
from faultkit.model.records import Event
from faultkit.model.timestamps import utc_clock
from faultkit.probes.health import ProbeResult, probe
from slo.alertmanager import Alertmanager, AmAlert, Silence
from slo.errors import AlertmanagerUnavailable, PrometheusError
from slo.labels import names_node, rule_durations
from slo.profiles import node_selector
from slo.prom import Alert, Prometheus

#: the ``up`` range each look asks for (s): a gap between answered looks shorter than this
#: loses no sample
UP_LOOKBACK_S = 10.0
#: no answer from Prometheus for this long (s) is an outage: samples may be lost
PROMETHEUS_GAP_S = UP_LOOKBACK_S - 2.0
#: how often Alertmanager is looked at (s): its stage ("held by Alertmanager") is dated to
#: within this, and a lane's looks stay few beside its Prometheus looks
ALERTMANAGER_EVERY_S = 0.5


class EventSink(Protocol):
    def write(self, obj: Event) -> None: ...


class Observer:
    """Async context manager: ``async with Observer(node, prom, writer): ...``."""

    def __init__(
        self,
        node: Node,
        prometheus: Prometheus | None,
        timeline_writer: EventSink,
        interval_s: float = 0.25,
        *,
        probe_timeout_s: float = 1.0,
        alertmanager: Alertmanager | None = None,
    ) -> None:
        if interval_s > 0.5:
            raise ValueError("the observer polls at least every 0.5 s (interval_s ≤ 0.5)")
        self.node = node
        self.prometheus = prometheus
        self.writer = timeline_writer
        self.interval_s = interval_s
        self.probe_timeout_s = probe_timeout_s
        self.probes: list[ProbeResult] = []
        self.events: list[Event] = []
        self._health: bool | None = None
        self._up: dict[str, tuple[float, float]] = {}  # series key -> (last t_sample, value)
        self._alerts: dict[tuple[str, ...], tuple[str, Alert]] = {}
        self._for_s: dict[str, float] = {}
        self._prom_down = False
        self._prom_answered: float | None = None  # when Prometheus last answered a look
        self._prom_failing_since: float | None = None
        #: Prometheus' start time (epoch s) as last read; another one is another process
        self._prom_started: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._probes_in_flight: set[asyncio.Task[None]] = set()
        self._newest_judged = float("-inf")  # send time of the newest probe judged
        self._client: httpx.AsyncClient | None = None
        self.alertmanager = alertmanager
        #: fingerprint -> (state, silenced_by, inhibited_by) as last written
        self._am_alerts: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        self._silences: dict[str, Silence] = {}
        self._am_down = False

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Observer:
        self._client = httpx.AsyncClient()
        if self.prometheus is not None:
            self._for_s = await asyncio.to_thread(self._rule_durations)
        await self.poll_once()
        self._task = asyncio.create_task(self._run(), name=f"observer-{self.node.name}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._probes_in_flight):
            task.cancel()
        await asyncio.gather(*self._probes_in_flight, return_exceptions=True)
        with contextlib.suppress(Exception):  # a last look at the end of the window, which
            # also reads Prometheus' start time: a restart between two answered looks shows
            await asyncio.gather(self._probe_once(), self._prometheus_once(with_start=True))
        if self._prom_failing_since is not None and not self._prom_down:
            self._prometheus_down(time.time(), "the last look, at the end of the window, failed")
        if self._client is not None:
            await self._client.aclose()

    async def _run(self) -> None:
        # two independent cadences: a slow or hung Prometheus never delays readiness probes
        loops = [self._probe_every()]
        if self.prometheus is not None:
            loops.append(self._every(self._prometheus_once))
        if self.alertmanager is not None:
            loops.append(self._every(self._alertmanager_once,
                                     max(self.interval_s, ALERTMANAGER_EVERY_S)))
        await asyncio.gather(*loops)

    async def _every(self, step: Callable[[], Awaitable[None]],
                     every_s: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at = max(next_at + (every_s or self.interval_s), loop.time())
            await asyncio.sleep(next_at - loop.time())
            await step()

    async def _probe_every(self) -> None:
        """A probe every ``interval_s``, each in its own task: a hung one never delays the next."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at = max(next_at + self.interval_s, loop.time())
            await asyncio.sleep(next_at - loop.time())
            task = asyncio.create_task(self._probe_once())
            self._probes_in_flight.add(task)
            task.add_done_callback(self._probes_in_flight.discard)

    # ------------------------------------------------------------------ polling
    async def poll_once(self) -> None:
        """One round: readiness probe and (concurrently) the Prometheus look."""
        await asyncio.gather(self._probe_once(), self._prometheus_once())

    async def _probe_once(self) -> None:
        assert self._client is not None, "use the Observer as an async context manager"
        self._on_probe(await probe(self.node, self._client, timeout_s=self.probe_timeout_s))

    async def _prometheus_once(self, *, with_start: bool = False) -> None:
        """One look; Prometheus' start time is read with it at the first look, after a
        failed one, and when ``with_start`` (the last look)."""
        if self.prometheus is not None:
            with_start = (with_start or self._prom_started is None
                          or self._prom_failing_since is not None)
            self._on_prometheus(*await asyncio.to_thread(self._prometheus_look, with_start))

    def _emit(self, kind: str, t: float, data: dict[str, Any]) -> None:
        event = Event(t=t, source="observer", kind=kind, node=self.node.name, data=data)
        self.events.append(event)
        self.writer.write(event)

    def _on_probe(self, result: ProbeResult) -> None:
        self.probes.append(result)
        if result.t < self._newest_judged:
            return  # a slower, older probe: a newer one has already told the state
        self._newest_judged = result.t
        if result.ok != self._health:
            self._health = result.ok
            data = {"ok": result.ok, "status": result.status, "detail": result.detail,
                    "latency_s": round(result.latency_s, 6)}
            self._emit(EventKind.HEALTH_OK if result.ok else EventKind.HEALTH_FAIL, result.t, data)

    # -- Prometheus (runs in a worker thread: the client is synchronous)
    def _rule_durations(self) -> dict[str, float]:
        assert self.prometheus is not None
        try:
            groups = self.prometheus.rules("alert")
        except PrometheusError:
            return {}
        return rule_durations(groups, self.node)

    def _prometheus_look(
        self, with_start: bool = False
    ) -> tuple[float, list[Alert] | None, list[Any] | None, str, float | None]:
        assert self.prometheus is not None
        seen = time.time()
        sel = node_selector(self.node)
        try:
            alerts = self.prometheus.alerts()
            up = (self.prometheus.query_samples(f"up{{{sel}}}[{UP_LOOKBACK_S:g}s]")
                  if sel else [])
        except PrometheusError as exc:
            return seen, None, None, str(exc), None
        started = None
        if with_start:
            # it answered the look: a Prometheus (or a proxy) that does not tell its start
            # time is not an outage, only a restart it cannot show
            with contextlib.suppress(PrometheusError):
                started = self.prometheus.start_time()
        return seen, alerts, up, "", started

    def _on_prometheus(
        self, seen: float, alerts: list[Alert] | None, up: list[Any] | None, error: str,
        started: float | None = None,
    ) -> None:
        """Judge one look: its answer (``alerts``, ``up``) or ``error``, and Prometheus'
        start time when the look read it (``started``)."""
        if alerts is None or up is None:
            if self._prom_failing_since is None:
                self._prom_failing_since = seen
            gap = seen - (self._prom_answered if self._prom_answered is not None else seen)
            if not self._prom_down and (self._prom_answered is None or gap >= PROMETHEUS_GAP_S):
                self._prometheus_down(seen, error)
            return
        if started is not None:
            if self._prom_started is not None and started != self._prom_started:
                self._prometheus_restarted(seen, started)
            self._prom_started = started
        self._prom_answered, self._prom_failing_since = seen, None
        if self._prom_down:
            self._prom_down = False
            self._emit(EventKind.PROMETHEUS_UP, seen, {})
        self._on_up(seen, up)
        self._on_alerts(seen, alerts)

    def _prometheus_down(self, seen: float, detail: str) -> None:
        self._prom_down = True
        since = self._prom_failing_since if self._prom_failing_since is not None else seen
        self._emit(EventKind.PROMETHEUS_DOWN, seen, {"detail": detail, "since": since})

    def _prometheus_restarted(self, seen: float, started: float) -> None:
        """Another Prometheus process answered: nothing was scraped from the last answer
        before it until its start (an outage, however short; the module docstring)."""
        if self._prom_down:
            return  # already written, from its failed looks
        last = self._prom_answered if self._prom_answered is not None else started
        self._prom_down = True
        self._emit(EventKind.PROMETHEUS_DOWN, seen, {
            "detail": (f"Prometheus restarted at {utc_clock(started)}; it scraped nothing "
                       "between its last answer before and then"),
            "since": last, "restarted_at": started,
        })

    def _on_up(self, seen: float, series: list[Any]) -> None:
        for s in series:
            key = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            last_t, last_v = self._up.get(key, (float("-inf"), float("nan")))
            for t_sample, value in s.values:
                if t_sample <= last_t:
                    continue
                if value != last_v:
                    kind = EventKind.UP_1 if value >= 1 else EventKind.UP_0
                    self._emit(kind, seen, {"value": value, "labels": s.labels,
                                            "t_sample": t_sample})
                last_t, last_v = t_sample, value
            self._up[key] = (last_t, last_v)

    def _mine(self, labels: Mapping[str, str]) -> bool:
        return names_node(labels, self.node)

    # -- Alertmanager (a worker thread too: the client is synchronous)
    async def _alertmanager_once(self) -> None:
        if self.alertmanager is not None:
            self._on_alertmanager(*await asyncio.to_thread(self._alertmanager_look))

    def _alertmanager_look(
        self,
    ) -> tuple[float, list[AmAlert] | None, str, dict[str, Silence]]:
        """The node's alerts as Alertmanager holds them, and each silence newly seen
        suppressing one (read once: who set it and why does not change)."""
        assert self.alertmanager is not None
        seen = time.time()
        try:
            alerts = [a for a in self.alertmanager.alerts() if self._mine(a.labels)]
            silences = {sid: self.alertmanager.silence(sid) for a in alerts
                        for sid in a.silenced_by if sid not in self._silences}
        except AlertmanagerUnavailable as exc:
            return seen, None, exc.reason, {}
        return seen, alerts, "", silences

    def _on_alertmanager(self, seen: float, alerts: list[AmAlert] | None, error: str,
                         silences: dict[str, Silence]) -> None:
        if alerts is None:
            if not self._am_down:
                self._am_down = True
                self._emit(EventKind.ALERTMANAGER_DOWN, seen, {"detail": error})
            return
        if self._am_down:
            self._am_down = False
            self._emit(EventKind.ALERTMANAGER_UP, seen, {})
        self._silences.update(silences)
        for alert in alerts:
            state = (alert.state, alert.silenced_by, alert.inhibited_by)
            if self._am_alerts.get(alert.fingerprint) == state:
                continue
            self._am_alerts[alert.fingerprint] = state
            self._emit(EventKind.AM_ALERT, seen, {
                "alertname": alert.name, "fingerprint": alert.fingerprint,
                "state": alert.state, "labels": alert.labels, "starts_at": alert.starts_at,
                "silenced_by": [self._silences[s].describe() if s in self._silences else
                                f"silence {s}" for s in alert.silenced_by],
                "inhibited_by": list(alert.inhibited_by),
            })

    def _on_alerts(self, seen: float, alerts: list[Alert]) -> None:
        current: dict[tuple[str, ...], Alert] = {}
        for alert in alerts:
            if self._mine(alert.labels):
                current[tuple(f"{k}={v}" for k, v in sorted(alert.labels.items()))] = alert
        for key, alert in current.items():
            previous = self._alerts.get(key)
            if previous is not None and previous[0] == alert.state:
                continue
            for_s = self._for_s.get(alert.name, 0.0)
            t_state = alert.active_at
            if alert.state == "firing" and alert.active_at is not None:
                t_state = min(alert.active_at + for_s, seen)
            self._emit(alert_kind(alert.state), seen, {
                "alertname": alert.name, "labels": alert.labels, "state": alert.state,
                "activeAt": alert.active_at, "for_s": for_s, "t_state": t_state,
            })
            self._alerts[key] = (alert.state, alert)
        for key in list(self._alerts):
            if key not in current:
                _, alert = self._alerts.pop(key)
                self._emit(EventKind.ALERT_RESOLVED, seen, {
                    "alertname": alert.name, "labels": alert.labels, "state": "resolved",
                    "activeAt": alert.active_at, "t_state": seen,
                })

