"""Detection to the page on the testbed, through its real Alertmanager and pager.

The lab's Prometheus sends to its Alertmanager, whose route delivers every alert to the
lab's ``faultkit pager``. A kill on the simulated vLLM node must end at a page: the
measured page is the pager's own record of the first firing page naming the node (read
here directly), after the alert fired within the route's wait. A silence this test sets
itself through Alertmanager's API must turn that page into a finding naming the silence,
and the pager must have received nothing for the node meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from faultkit.inventory import Inventory
from faultkit.pager import fetch_notifications
from testbed.truth import run_trial

pytestmark = pytest.mark.docker

NODE = "sim-vllm"
#: Prometheus' evaluation interval, the observer's polling and the pager's delivery,
#: beyond the route's own wait
SLACK_S = 3.0


def _alertmanager(inventory: Inventory) -> tuple[str, str]:
    settings = inventory.alertmanager
    assert settings is not None and settings.pager_url is not None, \
        "the lab's inventory names its Alertmanager and pager"
    return settings.url, settings.pager_url


@pytest.fixture
def silence(lab_inventory: Inventory) -> Iterator[str]:
    """A silence on every alert of the node, set through Alertmanager's API v2 (as an
    operator's maintenance window would be), expired again afterwards."""
    url, _ = _alertmanager(lab_inventory)
    now = datetime.now(UTC)
    body = {"matchers": [{"name": "node", "value": NODE, "isRegex": False, "isEqual": True}],
            "startsAt": now.isoformat(), "endsAt": (now + timedelta(minutes=10)).isoformat(),
            "createdBy": "faultkit-tests", "comment": "maintenance window"}
    response = httpx.post(f"{url}/api/v2/silences", json=body, timeout=5)
    response.raise_for_status()
    silence_id = str(response.json()["silenceID"])
    try:
        yield silence_id
    finally:
        httpx.delete(f"{url}/api/v2/silence/{silence_id}", timeout=5).raise_for_status()


async def test_a_kill_ends_at_the_page_the_pager_received(lab_inventory: Inventory,
                                                          tmp_path: Path) -> None:
    trial = await run_trial("kill", lab_inventory, tmp_path / "runs", node_name=NODE)
    measured, truth = trial.measured, trial.truth
    context = f"measured {measured}, truth {truth} ({trial.run_dir})"
    assert truth["t_alert_firing"] is not None, context
    assert truth["t_paged"] is not None, f"the pager received no page: {context}"
    assert measured["t_paged"] == pytest.approx(truth["t_paged"], abs=0.001), context
    route = measured["paging_route"]
    assert route, context
    wait = max(route["group_wait_s"], route["group_interval_s"])
    assert 0 <= truth["t_paged"] - truth["t_alert_firing"] <= wait + SLACK_S, (route, context)
    report = (Path(trial.run_dir) / "incident.md").read_text(encoding="utf-8")
    assert "paged at" in report and "someone was paged after" in report


async def test_a_silenced_alert_pages_no_one_and_the_report_names_the_silence(
    lab_inventory: Inventory, tmp_path: Path, silence: str
) -> None:
    _, pager_url = _alertmanager(lab_inventory)
    t0 = time.time()
    trial = await run_trial("kill", lab_inventory, tmp_path / "runs", node_name=NODE)
    pages = [n for n in fetch_notifications(pager_url, t0, time.time())
             if any((a.get("labels") or {}).get("node") == NODE and a.get("status") == "firing"
                    for a in n.payload.get("alerts") or ())]
    context = f"measured {trial.measured} ({trial.run_dir})"
    assert pages == [], f"the pager received pages for a silenced node: {pages}; {context}"
    assert trial.measured["t_paged"] is None, context
    finding = trial.measured["paging_finding"]
    assert finding is not None and "no one was paged" in finding, context
    assert silence in finding and "faultkit-tests" in finding and "maintenance window" \
        in finding, context
    report = (Path(trial.run_dir) / "incident.md").read_text(encoding="utf-8")
    assert finding in report and "no one was paged" in report.split("\n## ")[0]
