"""slo.prom on recorded Prometheus responses (no network: a requests adapter replays them)."""

from __future__ import annotations

import json
import math
import socket
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from slo.capture import counter_increase
from slo.errors import PrometheusQueryError, PrometheusUnavailable
from slo.prom import Prometheus, parse_retention, parse_rfc3339
from tests.paths import FIXTURES

FIXTURES = FIXTURES / "prometheus"
URL = "http://prom.invalid:9090"


class Replay(BaseAdapter):
    """Answer each API path with a recorded JSON body; remember the params sent."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        super().__init__()
        self.answers = answers
        self.sent: list[requests.PreparedRequest] = []

    def send(
        self, request: requests.PreparedRequest, *args: Any, **kwargs: Any
    ) -> requests.Response:
        self.sent.append(request)
        path = request.path_url.split("?")[0]
        status, body = self.answers[path]
        response = requests.Response()
        response.status_code = status
        response._content = body.encode()
        response.request = request
        response.url = request.url or ""
        return response

    def close(self) -> None:
        pass


def prom_with(answers: dict[str, str | tuple[int, str]]) -> tuple[Prometheus, Replay]:
    prepared = {
        path: value if isinstance(value, tuple) else (200, (FIXTURES / value).read_text())
        for path, value in answers.items()
    }
    prom = Prometheus(URL)
    adapter = Replay(prepared)
    prom._session.mount(URL, adapter)
    return prom, adapter


def test_instant_query_parses_string_values_including_nan_and_inf() -> None:
    prom, adapter = prom_with({"/api/v1/query": "vector_nan_inf.json"})
    samples = prom.query('up{job="llama"}', t=1760000000.123)
    assert [s.t for s in samples] == [1760000000.123] * 3
    assert samples[0].value == 1.0
    assert math.isnan(samples[1].value)
    assert samples[2].value == math.inf
    assert samples[0].labels["job"] == "llama"
    assert "time=1760000000.123" in (adapter.sent[0].path_url)


def test_empty_result_is_empty_not_an_error_and_query_value_is_none() -> None:
    prom, _ = prom_with({"/api/v1/query": "vector_empty.json"})
    assert prom.query("absent_metric") == []
    assert prom.query_value("absent_metric") is None


def test_scalar_result_is_one_unlabelled_sample() -> None:
    prom, _ = prom_with({"/api/v1/query": "scalar.json"})
    assert prom.query_value("scalar(vector(0.25))") == 0.25


def test_query_value_refuses_several_series() -> None:
    prom, _ = prom_with({"/api/v1/query": "vector_nan_inf.json"})
    with pytest.raises(PrometheusQueryError, match=r"sum\(\)"):
        prom.query_value("up")


def test_bad_promql_is_a_query_error_naming_the_query() -> None:
    prom, _ = prom_with({"/api/v1/query": (400, (FIXTURES / "bad_query.json").read_text())})
    with pytest.raises(PrometheusQueryError, match="parse error") as info:
        prom.query("sum(")
    assert info.value.query == "sum("


def test_range_query_keeps_subsecond_times_and_reset_counter_increase() -> None:
    prom, adapter = prom_with({"/api/v1/query_range": "matrix_reset.json"})
    (series,) = prom.query_range("http_requests_total", 1759999999.25, 1760000007.75, 0.5)
    assert "start=1759999999.250" in adapter.sent[0].path_url
    assert series.values[3] == (1760000003.5, 2.0)
    # 100→104→110 (+10), reset to 2 (+2), →7 (+5), NaN skipped, 9 after NaN not bridged
    assert counter_increase(series.values) == 17.0


def test_stale_up_samples_keep_scrape_timestamps() -> None:
    prom, _ = prom_with({"/api/v1/query": "up_stale.json"})
    (series,) = prom.query_samples('up{job="llama"}[10s]')
    assert [v for _, v in series.values] == [1, 1, 0, 0, 1]
    assert series.values[2][0] == 1760000002.003


def test_alerts_parse_state_labels_and_nanosecond_active_at() -> None:
    prom, _ = prom_with({"/api/v1/alerts": "alerts.json"})
    firing, pending = prom.alerts()
    assert firing.name == "FaultkitNodeDown"
    assert firing.state == "firing"
    assert firing.labels["node"] == "llama"
    assert firing.active_at == pytest.approx(1760000000.123457, abs=1e-6)
    assert pending.state == "pending"
    assert pending.value == pytest.approx(0.15)


def test_rfc3339_zero_time_is_none() -> None:
    assert parse_rfc3339("0001-01-01T00:00:00Z") is None
    assert parse_rfc3339("2025-10-09T08:53:20Z") == 1760000000.0


def test_non_json_5xx_means_unavailable() -> None:
    prom, _ = prom_with({"/api/v1/query": (500, "<html>oops</html>")})
    with pytest.raises(PrometheusUnavailable, match=URL):
        prom.query("up")


def test_unreachable_prometheus_is_a_clear_error_never_an_empty_result() -> None:
    with socket.socket() as sock:  # a free port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    prom = Prometheus(f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(PrometheusUnavailable) as info:
        prom.query("up")
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert "refused" in message
    assert "prometheus.url" in message  # says what to do
    with pytest.raises(PrometheusUnavailable):
        prom.alerts()
    with pytest.raises(PrometheusUnavailable):
        prom.ready()


def test_json_fixtures_are_valid() -> None:
    for path in FIXTURES.glob("*.json"):
        json.loads(path.read_text())


@pytest.mark.parametrize(("text", "seconds"), [
    ("15d", 15 * 86400.0), ("15d or 10GiB", 15 * 86400.0), ("1y", 365 * 86400.0),
    ("1d12h", 1.5 * 86400.0), ("10GiB", None), ("0s", None), ("", None), ("soon", None),
])
def test_the_time_part_of_prometheus_storage_retention(text: str, seconds: float | None) -> None:
    """runtimeinfo's ``storageRetention``: a time, a size, or both joined by `` or ``."""
    assert parse_retention(text) == seconds
