"""``postmortem.json``'s records read back what they wrote, and read anything else
tolerantly (faultkit.model's conventions)."""

from __future__ import annotations

import json

import pytest

from faultkit.postmortem import (
    AlertEpisode,
    Bound,
    EvidenceSummary,
    Findings,
    Gap,
    Incident,
    Postmortem,
    Restart,
    render_markdown,
)


def full_postmortem() -> Postmortem:
    down = AlertEpisode("FaultkitNodeDown", 110.5, 114.5, {"alertname": "FaultkitNodeDown"})
    open_one = Incident(start=Bound(None, 200.0), end=None, held=False, failed_scrapes=3,
                        good_scrapes_inside=0, detection=None, alerts=(), restarts=())
    closed = Incident(start=Bound(109.0, 110.0), end=Bound(114.0, 115.0), held=True,
                      failed_scrapes=5, good_scrapes_inside=1, detection=down, alerts=(down,),
                      restarts=(Restart(115.0, 113.2, 50.0),))
    return Postmortem(
        node="n", job="n", prometheus_url="http://127.0.0.1:9", t_from=100.0, t_to=202.0,
        t_written=300.0, scrape_interval_s=1.0,
        evidence=EvidenceSummary(up_samples=90, up_series=1, alert_series=1,
                                 process_start_metric="process_start_time_seconds",
                                 process_start_samples=80, missing=("something",)),
        findings=Findings(incidents=(closed, open_one),
                          restarts_outside=(Restart(150.0, 149.0, 113.2),),
                          gaps=(Gap(160.0, 170.0),), hold_s=5.0),
        runs=("19700101T000149.000Z-postmortem-n", "19700101T000320.000Z-postmortem-n"))


def test_a_postmortem_reads_back_what_it_wrote() -> None:
    pm = full_postmortem()
    assert Postmortem.from_json(json.loads(json.dumps(pm.to_json()))) == pm


@pytest.mark.parametrize("written", [None, [], "x", {"findings": {"incidents": [1, "a"]}},
                                     {"t_from": "soon", "evidence": []}])
def test_anything_else_reads_as_empty_not_an_exception(written: object) -> None:
    pm = Postmortem.from_json(written)
    assert pm.findings.incidents == () and pm.t_from == 0.0


def test_the_report_names_each_incident_and_what_is_not_known() -> None:
    text = render_markdown(full_postmortem())
    assert "**2 incident(s)**" in text
    assert "detected by <code>FaultkitNodeDown</code>" in text
    assert "still down at the window's end" in text
    # each incident's shared report is linked: users affected and diagnosis live there
    assert "- Incident 1: [19700101T000149.000Z-postmortem-n/incident.md]" \
        "(../19700101T000149.000Z-postmortem-n/incident.md)" in text
    assert "1 restart(s) with no failed scrape" in text
    assert "No sample at all from" in text and "Missing: something." in text
