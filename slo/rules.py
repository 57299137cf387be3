"""Prometheus alerting and recording rules for the inventory's nodes and SLOs.

``render_rules(inventory) -> str`` gives one rules file (YAML) that ``promtool check
rules`` accepts. Per node:

- ``FaultkitNodeDown``: ``up{job=…} == 0`` with ``for: 0s`` — fires on the first
  evaluation after a failed scrape, so detection in a 1 s-scrape lab is ~1–2 s. (A dead
  server leaves *no* error samples: burn-rate alerts alone would never fire.)
  Operators often give it ``for: 1m`` or more to ride out a flapping scrape; a node's
  ``prometheus.alert_for`` (or ``faultkit rules --for``) writes their value, so a run
  measures the detection and the pages they will get: an outage shorter than the
  ``for:`` never fires, and detection then rests on ``up == 0`` alone — on the lab, a
  ``for: 1m`` left a pause, both partitions and a cold start unpaged that ``for: 0s``
  paged within 3 s (the table in docs/slo.md, "Rules as operators write them").
- ``FaultkitNodeRestarted``: the process start time changed (or a counter reset) in the
  last 10 s — catches a crash that the restart policy undid between two scrapes.
- ``FaultkitEngineStalled``: the engine answers its scrapes but generated no token and
  took in no prompt token for :data:`STALL_WINDOW` while requests were running or waiting,
  or while the generation probe (job :data:`~faultkit.constants.GENERATE_PROBE_JOB`) got
  no answer within its timeout — an engine core hung while ``/health`` says 200
  (docs/slo.md, "A stalled engine"). The probe arm is what sees an idle engine stall: a
  stalled vLLM's gauges freeze at their last values, so an engine stopped while idle
  never shows a request waiting. Engines only (a gateway's in-flight gauge counts its own
  scrapes).
- ``FaultkitMetricsAbsent``: the engine's metrics vanished (target gone or renamed).
- ``FaultkitErrorRatioHigh``: server error ratio over 1 m above ``error_ratio_max``
  (engines with request counters only).
- Sloth-style SLO rules for each ratio SLO (``slo.spec``): recordings
  ``slo:sli_error:ratio_rate{5m,30m,1h,2h,6h,1d,3d}`` and the meta recordings, labelled
  ``sloth_id``/``sloth_service``/``sloth_slo`` (+ ``sloth_window``), and the
  multi-window multi-burn-rate alert ``FaultkitSLOBurn`` (page: 14.4 over 1h&5m or 6 over
  6h&30m; ticket: 3 over 1d&2h or 1 over 3d&6h). SLIs are occurrence-weighted: the period
  SLI is the error ratio over the whole period, not Sloth's mean of 5-minute ratios. These
  groups are evaluated every ``prometheus.slo_evaluation_interval_s`` (default 30 s, as
  Sloth's are under a usual global interval); the node alerts above use the global one.

Every alert carries ``node`` and ``job`` labels, which is how the observer ties an alert
to a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from faultkit.constants import GENERATE_PROBE_JOB
from faultkit.inventory import Inventory, Node
from slo.profiles import NodeQueries
from slo.spec import RatioSLO, ratio_slos

#: SLI recording windows (Sloth's google-30d set)
RESTART_WINDOW = "10s"
#: how long an engine holding requests may make no progress before it counts as stalled
#: (a prefill longer than this with nothing else running would fire it: see docs/slo.md)
STALL_WINDOW = "15s"
SLI_WINDOWS: tuple[str, ...] = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")

#: (severity, long window, short window, burn-rate factor) — SRE Workbook table 5-8
BURN_WINDOWS: tuple[tuple[str, str, str, float], ...] = (
    ("page", "1h", "5m", 14.4),
    ("page", "6h", "30m", 6.0),
    ("ticket", "1d", "2h", 3.0),
    ("ticket", "3d", "6h", 1.0),
)


def _sloth_labels(slo: RatioSLO) -> dict[str, str]:
    return {"sloth_id": f"{slo.node}-{slo.name}", "sloth_service": slo.node,
            "sloth_slo": slo.name, "node": slo.node}


def _with_for(rules: list[dict[str, Any]], alert_for: Mapping[str, str]) -> list[dict[str, Any]]:
    """``rules`` with each alert's ``for:`` as ``alert_for`` sets it, by alert name."""
    return [{**r, "for": alert_for[r["alert"]]} if r.get("alert") in alert_for else r
            for r in rules]


def _node_alerts(node: Node, q: NodeQueries, error_ratio_max: float,
                 slos: list[RatioSLO]) -> list[dict[str, Any]]:
    job = node.prometheus.job if node.prometheus else node.name
    labels = {"node": node.name, "job": job}
    out: list[dict[str, Any]] = [{
        "alert": "FaultkitNodeDown",
        "expr": f"{q.up()} == 0",
        "for": "0s",
        "labels": {**labels, "severity": "page"},
        "annotations": {"summary": f"{node.name}: Prometheus cannot scrape {job} (up == 0)"},
    }]
    out.append({
        # a crash that Docker restarts within a scrape interval never shows as up == 0;
        # the process start time (or a counter reset) still changes, so page on that
        "alert": "FaultkitNodeRestarted",
        "expr": f"{q.restarts(RESTART_WINDOW)} > 0",
        "for": "0s",
        "labels": {**labels, "severity": "page"},
        "annotations": {"summary": f"{node.name}: the engine process restarted "
                                   f"(within the last {RESTART_WINDOW})"},
    })
    stalled = _stall_expr(node, q)
    if stalled is not None:
        out.append({
            "alert": "FaultkitEngineStalled",
            "expr": stalled,
            "for": "0s",
            "labels": {**labels, "severity": "page"},
            "annotations": {"summary": f"{node.name}: the engine generated no token for "
                                       f"{STALL_WINDOW} while requests waited on it (or a "
                                       "generation probe got no answer) — it answers scrapes "
                                       "but makes no progress"},
        })
    probe_metric = q.series(q.profile.running or q.profile.reset_counter)
    if probe_metric is not None:
        out.append({
            "alert": "FaultkitMetricsAbsent",
            "expr": f"absent({probe_metric})",
            "for": "30s",
            "labels": {**labels, "severity": "ticket"},
            "annotations": {"summary": f"{node.name}: no {q.profile.engine} metrics "
                                       f"({probe_metric}) — target gone or metrics renamed"},
        })
    availability = next((s for s in slos if s.name == "availability"), None)
    if availability is not None and availability.weighting == "occurrences":
        out.append({
            "alert": "FaultkitErrorRatioHigh",
            "expr": f"{availability.error_ratio('1m')} > {error_ratio_max:g}",
            "for": "10s",
            "labels": {**labels, "severity": "page"},
            "annotations": {"summary": f"{node.name}: server error ratio over 1m above "
                                       f"{error_ratio_max:g}"},
        })
    return out


def _stall_expr(node: Node, q: NodeQueries) -> str | None:
    """``FaultkitEngineStalled``'s PromQL for ``node``, or None (a gateway; an engine without
    a running gauge or a token counter)."""
    p = q.profile
    held = [g for g in (q.gauge(p.running), q.gauge(p.waiting)) if g is not None]
    progress = [i for i in (q.increase(p.generation_tokens, STALL_WINDOW),
                            q.increase(p.prompt_tokens, STALL_WINDOW)) if i is not None]
    if node.kind != "engine" or not held or not p.generation_tokens:
        return None
    probe = f'job="{GENERATE_PROBE_JOB}",node="{node.name}"'
    # a probe that got no answer at all (status 0: timed out), not one the engine refused
    # while it loads (503): readiness is FaultkitNodeDown's and the probes' business
    unanswered = (f"(min(probe_success{{{probe}}}) == 0 and "
                  f"max(probe_http_status_code{{{probe}}}) == 0)")
    return (f"(({' + '.join(held)}) > 0 or {unanswered}) "
            f"and ({' + '.join(progress)}) == 0 and max({q.up()}) == 1")


def _slo_groups(
    slo: RatioSLO, job: str, window_days: int, interval_s: float
) -> list[dict[str, Any]]:
    base = _sloth_labels(slo)
    sid = base["sloth_id"]
    period = f"{window_days}d"
    sli_rules = [
        {"record": f"slo:sli_error:ratio_rate{w}", "expr": slo.error_ratio(w),
         "labels": {**base, "sloth_window": w}}
        for w in dict.fromkeys((*SLI_WINDOWS, period))
    ]
    sel = f'{{sloth_id="{sid}", sloth_service="{slo.node}", sloth_slo="{slo.name}"}}'
    on = "on(sloth_id, sloth_slo, sloth_service) group_left"
    meta = [
        {"record": "slo:objective:ratio", "expr": f"vector({slo.objective:g})", "labels": base},
        {"record": "slo:error_budget:ratio", "expr": f"vector(1 - {slo.objective:g})",
         "labels": base},
        {"record": "slo:time_period:days", "expr": f"vector({window_days})", "labels": base},
        {"record": "slo:current_burn_rate:ratio",
         "expr": f"slo:sli_error:ratio_rate5m{sel} / {on} slo:error_budget:ratio{sel}",
         "labels": base},
        {"record": "slo:period_burn_rate:ratio",
         "expr": f"slo:sli_error:ratio_rate{period}{sel} / {on} slo:error_budget:ratio{sel}",
         "labels": base},
        {"record": "slo:period_error_budget_remaining:ratio",
         "expr": f"1 - slo:period_burn_rate:ratio{sel}", "labels": base},
        {"record": "sloth_slo_info", "expr": "vector(1)",
         "labels": {**base, "sloth_objective": f"{slo.objective * 100:g}",
                    "sloth_weighting": slo.weighting}},
    ]
    budget = f"{1 - slo.objective:.6g}"

    def leg(short: str, long: str, factor: float) -> str:
        return (f"(max(slo:sli_error:ratio_rate{short}{sel} > ({factor:g} * {budget})) "
                f"without (sloth_window) and max(slo:sli_error:ratio_rate{long}{sel} > "
                f"({factor:g} * {budget})) without (sloth_window))")

    alerts = []
    for severity in ("page", "ticket"):
        legs = [leg(s, lw, f) for sev, lw, s, f in BURN_WINDOWS if sev == severity]
        alerts.append({
            "alert": "FaultkitSLOBurn",
            "expr": " or ".join(legs),
            "labels": {**base, "sloth_severity": severity, "severity": severity, "job": job},
            "annotations": {"summary": f"{slo.node}: {slo.name} error budget burning "
                                       f"({severity}): {slo.description}"},
        })
    # an error budget burns over minutes to days: these groups run at their own, slower
    # interval (evaluating ratio_rate3d every second costs a third of a core at five nodes)
    interval = f"{interval_s:g}s"
    return [
        {"name": f"sloth-slo-sli-recordings-{sid}", "interval": interval, "rules": sli_rules},
        {"name": f"sloth-slo-meta-recordings-{sid}", "interval": interval, "rules": meta},
        {"name": f"sloth-slo-alerts-{sid}", "interval": interval, "rules": alerts},
    ]


def rule_groups(
    inventory: Inventory, *, alert_for: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The rule groups (as data) for every scraped node of the inventory.

    Each alert's ``for:`` is faultkit's default (``FaultkitNodeDown`` 0s: the first failed
    scrape), then the node's ``prometheus.alert_for``, then ``alert_for`` (every node):
    rules as the operator writes them, so a run measures the detection they will get."""
    groups: list[dict[str, Any]] = []
    for node in inventory.nodes:
        q = NodeQueries.for_node(node)
        if q is None or node.prometheus is None:
            continue
        settings = inventory.slo_for(node)
        slos = ratio_slos(node, settings)
        fors = {**node.prometheus.alert_for, **(alert_for or {})}
        groups.append({"name": f"faultkit-node-{node.name}",
                       "rules": _with_for(_node_alerts(node, q, settings.error_ratio_max,
                                                       slos), fors)})
        for slo in slos:
            for group in _slo_groups(slo, node.prometheus.job, settings.window_days,
                                     inventory.prometheus.slo_evaluation_interval_s):
                groups.append({**group, "rules": _with_for(group["rules"], fors)})
    return groups


def render_rules(inventory: Inventory, *, alert_for: Mapping[str, str] | None = None) -> str:
    """One Prometheus rules file (YAML text) for the inventory; ``promtool check rules`` ok."""
    header = ("# Generated by `faultkit rules` from " + inventory.source +
              " — do not edit; regenerate instead.\n")
    body = yaml.safe_dump({"groups": rule_groups(inventory, alert_for=alert_for)},
                          sort_keys=False, width=1_000_000, allow_unicode=True)
    return header + body
