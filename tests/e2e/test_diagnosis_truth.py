"""Every incident report of the catalogue names the true cause (the diagnosis truth table,
:mod:`tests.e2e.diagnosis_truth`): the first diagnosis, "What brought it back" and the count
of lost requests, for every scenario × node the catalogue ran — 100 % required."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import SuiteRun
from tests.e2e.diagnosis_truth import TABLE, judge, oom_kills_in, truth_of
from tests.e2e.kernel_log import KernelLog

pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]


def test_every_report_of_the_catalogue_names_the_true_cause(suite_run: SuiteRun,
                                                            kernel_log: KernelLog) -> None:
    # a skipped scenario may leave a run directory without a report: it ran no fault
    runs = [(test_id, o.run_dir) for test_id, o in suite_run.outcomes.items() if not o.skipped]
    rows = judge(runs, oom_kills_in(kernel_log))
    faulted = {t for t, d in runs if d is not None and truth_of(t) is not None}
    assert len(rows) == len(faulted) and len(rows) >= 60, (len(rows), sorted(faulted))
    misses = [f"{r.test_id}: {'; '.join(r.problems)}" for r in rows if not r.matches]
    assert not misses, f"{len(misses)} of {len(rows)} reports miss the truth:\n" + \
        "\n".join(misses)


def test_every_scenario_of_the_catalogue_has_a_truth() -> None:
    """A new scenario must state its true cause here before CI can judge its reports."""
    from tests.e2e.scenario_suite import catalogue_ids

    smoke = ("test_is_scraped_by_prometheus[", "test_streams_a_completion[")
    untold = sorted(t for t in catalogue_ids() if truth_of(t) is None
                    and not t.startswith(smoke))
    assert not untold, f"no truth in tests/e2e/diagnosis_truth.py TABLE for: {untold}"
    assert all(t.causes for _, t in TABLE)


#: the line by which the chain a reader at 2 a.m. needs — verdict, diagnosis, what brought
#: the node back, the preventive changes — has ended (one screen of a terminal or an editor)
FIRST_SCREEN_LINES = 50
#: a typical (median) report's length; telemetry follows the chain, never the other way
TYPICAL_REPORT_LINES = 120


def test_every_report_of_the_catalogue_reads_its_chain_on_the_first_screen(
    suite_run: SuiteRun,
) -> None:
    reports = [o.run_dir / "incident.md" for o in suite_run.outcomes.values()
               if o.run_dir is not None and (o.run_dir / "incident.md").exists()]
    assert len(reports) >= 60, len(reports)
    lengths = sorted(len(p.read_text(encoding="utf-8").splitlines()) for p in reports)
    median = lengths[len(lengths) // 2]
    assert median <= TYPICAL_REPORT_LINES, f"median report {median} lines: {lengths}"
    late = []
    for path in reports:
        lines = path.read_text(encoding="utf-8").splitlines()
        chain_end = next((i for i, line in enumerate(lines) if line == "## Run"), len(lines))
        if chain_end > FIRST_SCREEN_LINES or "## Preventive changes" not in lines[:chain_end]:
            late.append(f"{path.parent.name}: the chain ends at line {chain_end}")
    assert not late, "\n".join(late)


def test_every_incident_of_the_catalogue_states_what_it_cost_the_error_budget(
    suite_run: SuiteRun,
) -> None:
    """Each measured run's report carries its SLO cost, counted from the node's own
    requests over its window (docs/slo.md, "What an incident cost"), or — for an engine
    with no request counter — says so and what to configure; never the bare fallback."""
    measured = [o.run_dir for o in suite_run.outcomes.values() if o.run_dir is not None
                and (o.run_dir / "incident.md").exists()
                and (o.run_dir / "measurement.json").exists()]
    assert len(measured) >= 60, len(measured)
    untold = []
    for run_dir in measured:
        info = json.loads((run_dir / "run.json").read_text())
        md = (run_dir / "incident.md").read_text(encoding="utf-8")
        counted = isinstance(info.get("slo_window_requests"), int | float)
        if counted and "| SLO budget spent |" in md and "of full outage" in md:
            continue
        if info.get("engine") == "llamacpp" and "exports no request counter" in md:
            continue
        untold.append(f"{run_dir.name} ({info.get('engine')}): "
                      f"{info.get('slo_window', {}).get('missing')}")
    assert not untold, f"{len(untold)} of {len(measured)} reports:\n" + "\n".join(untold)


#: Prometheus' evaluation interval and the pager's delivery on the lab, beyond the route's
#: own wait
PAGE_SLACK_S = 3.0


def test_every_alert_of_the_catalogue_ends_at_a_page_or_says_why_not(
    suite_run: SuiteRun,
) -> None:
    """The lab routes every alert to its pager: each run whose alert fired shows when
    someone was paged — after the route's group_wait, or the next group_interval of a group
    Alertmanager already held — or a finding saying why no one was; never nothing."""
    fired = []
    for outcome in suite_run.outcomes.values():
        run_dir = outcome.run_dir
        if run_dir is None or not (run_dir / "measurement.json").exists():
            continue
        m = json.loads((run_dir / "measurement.json").read_text())
        if m.get("detect_signal") == "alert":
            fired.append((run_dir, m))
    assert len(fired) >= 30, len(fired)
    untold, paged = [], 0
    for run_dir, m in fired:
        paging = m.get("paging") or {}
        md = (run_dir / "incident.md").read_text(encoding="utf-8")
        route = paging.get("route") or {}
        if paging.get("page_s") is not None:
            paged += 1
            wait = max(route.get("group_wait_s", 0.0), route.get("group_interval_s", 0.0))
            after = paging.get("after_firing_s")
            if not ("paged at" in md and after is not None
                    and 0 <= after <= wait + PAGE_SLACK_S):
                untold.append(f"{run_dir.name}: paged {after} s after firing, route {route}")
        elif not paging.get("finding") or paging["finding"] not in md:
            untold.append(f"{run_dir.name}: no page and no finding in the report ({paging})")
    assert not untold, f"{len(untold)} of {len(fired)}:\n" + "\n".join(untold)
    assert paged >= len(fired) // 2, f"only {paged} of {len(fired)} alerts paged anyone"
