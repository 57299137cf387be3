"""Both sides of a gateway experiment: what the gateway's users saw, and which upstream
served them before, during and after the fault.

A run is a gateway run when its users' requests name the upstream that answered them
(``RequestRecord.served_by``: LiteLLM's ``x-litellm-model-id``, the upstream node's name
in the lab). The client sees every answer the gateway gave and which upstream it named;
it cannot see an attempt the gateway retried elsewhere (docs/definitions.md, "Routing
around a dead upstream"). A failure naming no upstream is the gateway's own error.

Phases split the users by arrival: **before** ``t_effect``; **fault** from ``t_effect``
until the failed upstream was back (``route_around.json``'s ``t_back``), else until
``t_recovered`` (the window's end when the run never recovered); **after** from then on.
``route_around.json`` (``test_upstream_failure``, ``test_gateway_rollout``) adds when the
gateway stopped sending users to the failed upstream, when it sent it traffic again, and
the retries its answers reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faultkit.model.records import RequestRecord
from reports.load import RunData
from reports.numbers import is_number

#: the row of failures that named no upstream
GATEWAY_OWN = "(none: the gateway's own error)"
PHASES = ("before", "fault", "after")


def gateway_users(data: RunData) -> list[RequestRecord]:
    """The run node's users' requests when it is a gateway (some name an upstream), else []."""
    mine = [r for r in data.ledger if r.kind != "probe" and r.node == data.run.node]
    return mine if any(r.served_by for r in mine) else []


@dataclass(frozen=True, slots=True)
class UpstreamRow:
    """One upstream's answers to the gateway's users: ``ok[phase]`` served, ``failed[phase]``
    answered with an error naming it."""

    upstream: str
    ok: dict[str, int]
    failed: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.ok.values()) + sum(self.failed.values())


def phase_of(t: float, t_effect: float | None, t_after: float | None) -> str:
    if t_effect is None or t < t_effect:
        return "before"
    if t_after is None or t < t_after:
        return "fault"
    return "after"


def upstream_rows(data: RunData) -> list[UpstreamRow]:
    """Per upstream (by name; the gateway's own errors last), answers by phase."""
    users = gateway_users(data)
    m = data.measurement
    t_effect = data.t_effect
    t_after = None
    t_back = data.route_around.get("t_back")
    if is_number(t_back):
        t_after = float(t_back)
    elif m is not None:
        t_after = m.t_recovered if m.t_recovered is not None else m.t_window_end
    rows: dict[str, UpstreamRow] = {}
    for r in users:
        if r.error_class == "shed_client":
            continue  # never sent: no upstream could answer it
        name = r.served_by or (GATEWAY_OWN if r.status != "ok" else "(not named)")
        row = rows.setdefault(name, UpstreamRow(name, dict.fromkeys(PHASES, 0),
                                                dict.fromkeys(PHASES, 0)))
        phase = phase_of(r.arrival, t_effect, t_after)
        (row.ok if r.status == "ok" else row.failed)[phase] += 1
    return sorted(rows.values(), key=lambda row: (row.upstream.startswith("("), row.upstream))


def per_upstream_per_second(
    records: Sequence[RequestRecord], t0: float
) -> tuple[list[int], dict[str, list[int]]]:
    """Requests per 1-s bin of arrival (relative to ``t0``) by the upstream that answered
    (:data:`GATEWAY_OWN` for failures naming none); shed requests are left out."""
    sent = [r for r in records if r.error_class != "shed_client"]
    if not sent:
        return [], {}
    bins = [math.floor(r.arrival - t0) for r in sent]
    edges = list(range(min(bins), max(bins) + 1))
    counts: dict[str, list[int]] = {}
    for r, b in zip(sent, bins, strict=True):
        name = r.served_by or (GATEWAY_OWN if r.status != "ok" else "(not named)")
        counts.setdefault(name, [0] * len(edges))[b - edges[0]] += 1
    return edges, dict(sorted(counts.items(), key=lambda kv: (kv[0].startswith("("), kv[0])))


def _secs(value: object) -> str | None:
    return f"{value:.1f} s" if is_number(value) else None


def route_around_lines(route: dict[str, Any]) -> list[str]:
    """``route_around.json`` as sentences (empty when the run wrote none)."""
    if not route:
        return []
    upstream = route.get("upstream", "?")
    seconds = route.get("route_around_s")
    back = _secs(route.get("back_in_rotation_s"))
    outage, stretch = route.get("outage_s"), route.get("stretch_s")
    if (is_number(outage) and is_number(stretch)
            and outage < stretch):
        first = (f"{upstream} was down only {outage:.1f} s, shorter than the {stretch:g} s "
                 "stretch routing is judged over: whether the gateway routed around it "
                 "cannot be told from this run.")
    elif not is_number(seconds):
        first = f"The gateway never stopped sending users to {upstream} within the window."
    elif route.get("routed_while_down") is False:
        first = (f"The gateway kept sending users to {upstream} while it was down: the first "
                 f"{route.get('stretch_s', '?')} s stretch with no request hitting it began "
                 f"{seconds:.1f} s after the fault, when {upstream} was back (its attempts "
                 "hung rather than failed, so there was nothing to route around).")
    else:
        first = (f"The gateway stopped sending users to {upstream} {seconds:.3f} s after it "
                 f"failed (the first {route.get('stretch_s', '?')} s stretch with no request "
                 "hitting it).")
    lines = [
        first,
        f"{route.get('hits', '?')} of {route.get('requests', '?')} users' requests from the "
        f"fault on hit the failed upstream ({route.get('unnamed', '?')} failed naming no "
        "upstream: the gateway's own error after its retries).",
    ]
    if back is not None:
        idle = _secs(route.get("idle_after_back_s"))
        lines.append(f"{upstream} got users' traffic again {back} after the fault"
                     + (f", {idle} after it was back" if idle else "") + ".")
    elif route.get("t_back") is not None:
        lines.append(f"{upstream} was back, but got no users' traffic within the window.")
    retried, retries = route.get("retried_requests"), route.get("retries")
    if isinstance(retried, int) and isinstance(retries, int):
        lines.append(f"From the fault on, {retried} answers said the gateway had retried "
                     f"them ({retries} retries in all, x-litellm-attempted-retries).")
    return lines
