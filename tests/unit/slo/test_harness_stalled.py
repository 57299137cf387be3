"""slo.gaps.harness_stalled: which measurement.json files say the load client stalled — the
one rule the gate and the e2e suite run a scenario again by."""

from __future__ import annotations

from typing import Any

import pytest

from slo.gaps import CLIENT_STALL, harness_stalled


@pytest.mark.parametrize(("measurement", "stalled"), [
    ({"lost_by_class": {"client_stalled": 2, "refused": 5}}, True),
    ({"sent_late": 1}, True),
    ({"inconclusive": [f"{CLIENT_STALL} for 1.2 s at +3.0 s"]}, True),  # served through
    ({"lost_by_class": {"client_stalled": 0, "refused": 5}, "sent_late": 0}, False),
    ({"inconclusive": ["no Prometheus series of the node"]}, False),  # the node's evidence
    ({"lost_by_class": "garbled", "sent_late": "3", "inconclusive": "x"}, False),
    ({}, False),
])
def test_only_the_clients_own_stall_counts(measurement: dict[str, Any], stalled: bool) -> None:
    assert harness_stalled(measurement) is stalled
