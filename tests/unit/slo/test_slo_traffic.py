"""slo.traffic: a node's requests over its SLO window, or why they cannot be counted."""

from __future__ import annotations

from faultkit.inventory import parse_inventory
from slo.errors import PrometheusUnavailable
from slo.traffic import window_traffic

INVENTORY = """
prometheus: {url: "http://127.0.0.1:9"}
nodes:
  - {name: v, engine: vllm, base_url: "http://127.0.0.1:1", model: m, prometheus: {job: v}}
  - {name: l, engine: llamacpp, base_url: "http://127.0.0.1:2", model: m, prometheus: {job: l}}
  - {name: u, engine: vllm, base_url: "http://127.0.0.1:3", model: m}
"""
NODES = {n.name: n for n in parse_inventory(INVENTORY).nodes}


class CountingProm:
    """Answers the window's request count and the node's earliest sample; records both."""

    url = "http://fake:9090"

    def __init__(self, requests: float | None, earliest: float | None,
                 young: bool = False) -> None:
        self.requests, self.earliest, self.young = requests, earliest, young
        self.asked: list[tuple[str, float | None]] = []

    def query_value(self, promql: str, t: float | None = None) -> float | None:
        self.asked.append((promql, t))
        if promql.startswith("sum(increase("):
            return self.requests
        if "min_over_time(timestamp(" in promql:
            # what Prometheus evaluates: the moment minus the earliest sample; a history
            # younger than the coarse step shows only to the fine look
            if self.earliest is None or (":1m]" in promql and self.young):
                return None
            return float(promql.split(" - ")[0]) - self.earliest
        raise AssertionError(f"unexpected query {promql}")


class DownProm(CountingProm):
    def query_value(self, promql: str, t: float | None = None) -> float | None:
        raise PrometheusUnavailable(self.url, "connection refused")


def test_the_servers_count_over_the_window_ending_at_the_run() -> None:
    prom = CountingProm(requests=5230.4, earliest=10_000.0)
    traffic = window_traffic(prom, NODES["v"], "30d", 17_200.0)  # type: ignore[arg-type]
    assert traffic.requests == 5230 and traffic.missing is None
    assert traffic.history_s == 7_200.0
    count_query, _ = prom.asked[0]
    assert "[30d]" in count_query and 'job="v"' in count_query
    assert {t for _, t in prom.asked} == {17_200.0}  # both read at the run's end
    assert traffic.to_json()["history_s"] == 7_200.0


def test_an_engine_without_a_request_counter_says_what_to_configure() -> None:
    prom = CountingProm(requests=1.0, earliest=0.0)
    traffic = window_traffic(prom, NODES["l"], "30d", 1.0)  # type: ignore[arg-type]
    assert traffic.requests is None and prom.asked == []
    assert traffic.missing is not None and "exports no request counter" in traffic.missing
    assert "gateway" in traffic.missing


def test_an_unscraped_node_says_to_give_it_a_job() -> None:
    traffic = window_traffic(CountingProm(1.0, 0.0), NODES["u"], "30d", 1.0)  # type: ignore[arg-type]
    assert traffic.requests is None
    assert traffic.missing is not None and "prometheus.job" in traffic.missing


def test_no_traffic_is_missing_never_a_zero_denominator() -> None:
    traffic = window_traffic(CountingProm(0.0, 5.0), NODES["v"], "7d", 10.0)  # type: ignore[arg-type]
    assert traffic.requests is None
    assert traffic.missing is not None and "no requests" in traffic.missing


def test_prometheus_down_is_an_answer_not_an_exception() -> None:
    traffic = window_traffic(DownProm(1.0, 0.0), NODES["v"], "30d", 1.0)  # type: ignore[arg-type]
    assert traffic.requests is None
    assert traffic.missing is not None and "connection refused" in traffic.missing


def test_a_history_younger_than_a_minute_is_found_by_the_fine_look() -> None:
    prom = CountingProm(requests=40.0, earliest=1_000.0, young=True)
    traffic = window_traffic(prom, NODES["v"], "30d", 1_030.0)  # type: ignore[arg-type]
    assert traffic.history_s == 30.0
    assert any("[2m:1s]" in q for q, _ in prom.asked)
