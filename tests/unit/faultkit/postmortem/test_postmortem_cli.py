"""``faultkit postmortem`` on the command line: bad input is one line, exit 2 and nothing
written; a window with an outage writes the index (both files) and the incident's run
directory, the bounds being the stamps of the samples the fake Prometheus served."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from faultkit.cli import cli
from faultkit.postmortem import POSTMORTEM_JSON, POSTMORTEM_MD, Postmortem
from tests.unit.cli_helpers import one_error_line
from tests.unit.json_server import JsonServer

#: an hour ago, whole seconds: the windows below lie in the past, within the 7-day limit
T0 = float(int(time.time()) - 3600)


def inventory_text(prometheus_url: str) -> str:
    return f"""\
prometheus: {{url: "{prometheus_url}", scrape_interval_s: 1}}
nodes:
  - name: n
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    prometheus: {{job: n}}
  - name: unscraped
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    docker: {{container: faultkit-test-unscraped}}
  - name: g
    kind: gateway
    engine: litellm
    base_url: http://127.0.0.1:9
    model: m
    upstreams: [n, unscraped]
    prometheus: {{job: g}}
"""


class FakePrometheus:
    """Answers ``/api/v1/query`` with ``up`` samples for ``job="n"`` (``up``), nothing else;
    remembers every query."""

    def __init__(self, up: list[tuple[float, float]], retention: str = "15d",
                 others: dict[str, list[tuple[float, float]]] | None = None,
                 last_error: str = "") -> None:
        self.up = up
        self.last_error = last_error  # the scrape target of job n's, in /api/v1/targets
        self.others = others or {}  # up samples of other jobs
        self.retention = retention  # runtimeinfo's storageRetention
        self.queries: list[str] = []
        self.server = JsonServer(self.route)
        self.url = self.server.url

    def route(self, path: str, query: dict[str, list[str]]) -> Any:
        data: dict[str, Any]
        if path == "/api/v1/status/runtimeinfo":
            data = {"storageRetention": self.retention}
        elif path == "/api/v1/targets":
            data = {"activeTargets": [{
                "labels": {"job": "n", "node": "n", "instance": "127.0.0.1:9"},
                "scrapeUrl": "http://127.0.0.1:9/metrics",
                "health": "down" if self.last_error else "up",
                "lastError": self.last_error}]}
        else:
            promql = query.get("query", [""])[0]
            self.queries.append(promql)
            result: list[dict[str, Any]] = []
            for job, samples in {"n": self.up, **self.others}.items():
                if promql.startswith(f'up{{job="{job}"}}') and samples:
                    result = [{"metric": {"__name__": "up", "job": job},
                               "values": [[t, str(v)] for t, v in samples]}]
            data = {"resultType": "matrix", "result": result}
        return {"status": "success", "data": data}

    def __enter__(self) -> FakePrometheus:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(tmp_path: Path, prometheus_url: str, *args: str) -> Result:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(inventory_text(prometheus_url))
    return CliRunner().invoke(cli, ["postmortem", "--inventory", str(inventory),
                                    "--runs-dir", str(tmp_path / "runs"), *args])




@pytest.fixture
def served() -> Iterator[FakePrometheus]:
    up = [(T0 + i, 0.0 if 10 <= i < 15 else 1.0) for i in range(30)]
    with FakePrometheus(up) as prom:
        yield prom


@pytest.mark.parametrize(("args", "said"), [
    (["--node", "nope", "--from", str(T0)], "no node named 'nope'"),
    (["--node", "unscraped", "--from", str(T0)], "has no prometheus job"),
    (["--node", "n", "--from", str(T0 + 60), "--to", str(T0)], "must be before --to"),
    (["--node", "n", "--from", "yesterday-ish"], "must be an ISO-8601 time"),
    (["--node", "n", "--from", str(T0 - 8 * 86400), "--to", str(T0)], "longer than 7 days"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
        tmp_path: Path, served: FakePrometheus, args: list[str], said: str) -> None:
    assert said in one_error_line(run(tmp_path, served.url, *args))
    assert not (tmp_path / "runs").exists()
    assert served.queries == []  # refused before asking


def test_prometheus_unreachable_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    line = one_error_line(run(tmp_path, url, "--node", "n", "--from", str(T0),
                              "--to", str(T0 + 60)))
    assert f"Prometheus unreachable at {url}" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("retention", ["30m", "30m or 10GiB"])
def test_a_window_older_than_prometheus_keeps_is_one_line_exit_2(
        tmp_path: Path, retention: str) -> None:
    """T0 is an hour ago: a Prometheus keeping 30 min of samples has lost the window's
    start — the outage's beginning, its alert, its counters — so no report is written."""
    with FakePrometheus([(T0 + i, 1.0) for i in range(30)], retention) as prom:
        line = one_error_line(run(tmp_path, prom.url, "--node", "n", "--from", str(T0),
                                  "--to", str(T0 + 60)))
        assert prom.queries == []  # refused before reading the window
    assert "keeps 30m of samples (its storage retention)" in line and "give --from" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("retention", ["10GiB", "2h", ""])
def test_a_window_within_the_retention_or_a_size_only_retention_is_read(
        tmp_path: Path, retention: str) -> None:
    with FakePrometheus([(T0 + i, 1.0) for i in range(30)], retention) as prom:
        result = run(tmp_path, prom.url, "--node", "n", "--from", str(T0), "--to", str(T0 + 29))
    assert result.exit_code == 0, result.output
    assert prom.queries  # the window was read


def test_no_sample_of_the_node_in_the_window_is_one_line_exit_2(tmp_path: Path) -> None:
    with FakePrometheus([]) as prom:
        line = one_error_line(run(tmp_path, prom.url, "--node", "n", "--from", str(T0),
                                  "--to", str(T0 + 60)))
    assert "no up sample of job 'n'" in line
    assert not (tmp_path / "runs").exists()


def test_an_outage_is_written_with_the_served_stamps_as_its_bounds(
        tmp_path: Path, served: FakePrometheus) -> None:
    iso_from = datetime.fromtimestamp(T0 - 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = run(tmp_path, served.url, "--node", "n", "--from", iso_from, "--to", str(T0 + 29))
    assert result.exit_code == 0, result.output
    [directory] = [d for d in (tmp_path / "runs").iterdir() if (d / POSTMORTEM_JSON).exists()]
    assert directory.name.endswith("-postmortem-n")
    pm = Postmortem.from_json(json.loads((directory / POSTMORTEM_JSON).read_text()))
    [inc] = pm.findings.incidents
    assert (inc.start.after, inc.start.by) == (T0 + 9, T0 + 10)  # last 1, first 0 served
    assert inc.end is not None and (inc.end.after, inc.end.by) == (T0 + 14, T0 + 15)
    assert inc.detection is None  # the fake serves no ALERTS
    assert pm.evidence.process_start_metric is None  # llama.cpp exposes none
    assert pm.to_json() == json.loads((directory / POSTMORTEM_JSON).read_text())
    report = (directory / POSTMORTEM_MD).read_text()
    assert "**1 incident(s)**" in report and "no alert for the node began firing" in report
    assert str(directory / POSTMORTEM_MD) in result.stdout
    # the incident is a run directory of its own, with the shared incident report
    [name] = pm.runs
    incident = tmp_path / "runs" / name
    assert sorted(d.name for d in (tmp_path / "runs").iterdir()) == sorted([directory.name, name])
    assert str(incident / "incident.md") in result.stdout
    text = (incident / "incident.md").read_text()
    # llama.cpp counts no requests: users affected are not estimated, and the report says so
    assert "users affected were not estimated" in text
    assert "n has no docker container in the inventory: Docker's events, its state and " \
        "its log were not read" in text


def test_a_gateway_brings_its_upstreams_and_each_index_names_the_others_incidents(
        tmp_path: Path) -> None:
    """``--node g``: the gateway and its upstream ``n`` (``unscraped``, without a job, is
    left out, and said so) each get an index and a report per incident; their outages
    overlapped (n down 10-15 s, g down 11-14 s), so each index names the other's."""
    n_up = [(T0 + i, 0.0 if 10 <= i < 15 else 1.0) for i in range(30)]
    g_up = [(T0 + i, 0.0 if 11 <= i < 14 else 1.0) for i in range(30)]
    with FakePrometheus(n_up, others={"g": g_up}) as prom:
        result = run(tmp_path, prom.url, "--node", "g", "--from", str(T0 - 60),
                     "--to", str(T0 + 29))
    assert result.exit_code == 0, result.output
    assert "upstream unscraped of g has no prometheus job: left out" in result.stdout
    indexes = {Postmortem.from_json(json.loads((d / POSTMORTEM_JSON).read_text())).node: d
               for d in (tmp_path / "runs").iterdir() if (d / POSTMORTEM_JSON).exists()}
    assert sorted(indexes) == ["g", "n"]
    pms = {name: Postmortem.from_json(json.loads((d / POSTMORTEM_JSON).read_text()))
           for name, d in indexes.items()}
    [g_rel] = pms["g"].related
    assert (g_rel.incident, g_rel.node, g_rel.other) == (1, "n", 1)
    assert g_rel.t_start == T0 + 9 and g_rel.t_end == T0 + 15  # n's widest span
    assert g_rel.run == pms["n"].runs[0]
    [n_rel] = pms["n"].related
    assert (n_rel.node, n_rel.run) == ("g", pms["g"].runs[0])
    text = (indexes["g"] / POSTMORTEM_MD).read_text()
    assert "Meanwhile n was down too (its incident 1, from " in text
    assert f"../{pms['n'].runs[0]}/incident.md" in text


def test_several_nodes_are_checked_before_anything_is_written(
        tmp_path: Path, served: FakePrometheus) -> None:
    assert "no node named 'nope'" in one_error_line(
        run(tmp_path, served.url, "--node", "n,nope", "--from", str(T0)))
    assert "no up sample of job 'g'" in one_error_line(
        run(tmp_path, served.url, "--node", "n", "--node", "g", "--from", str(T0),
            "--to", str(T0 + 29)))
    assert not (tmp_path / "runs").exists()


def test_a_node_whose_metrics_are_not_served_is_one_line_exit_2(tmp_path: Path) -> None:
    """Every scrape failed with an HTTP status (llama.cpp without --metrics answers its
    API and 404s /metrics): up is 0 whether it serves or not, so nothing is written."""
    down = [(T0 + i, 0.0) for i in range(30)]
    with FakePrometheus(down, last_error="server returned HTTP status 404 Not Found") as prom:
        line = one_error_line(run(tmp_path, prom.url, "--node", "n", "--from", str(T0),
                                  "--to", str(T0 + 29)))
    assert "node n's metrics are not served" in line and "HTTP status 404" in line
    assert "--metrics" in line
    assert not (tmp_path / "runs").exists()


class TargetsGone(FakePrometheus):
    """Answers the window's samples, then 404s ``/api/v1/targets`` (a Prometheus going
    away between the reads)."""

    def route(self, path: str, query: dict[str, list[str]]) -> Any:
        return None if path == "/api/v1/targets" else super().route(path, query)


def test_prometheus_failing_at_the_scrape_targets_is_one_line_exit_2(tmp_path: Path) -> None:
    """A node down all window has its scrape targets asked why; Prometheus not answering
    then is bad input like any other read of it, not a traceback."""
    down = [(T0 + i, 0.0) for i in range(30)]
    with TargetsGone(down) as prom:
        line = one_error_line(run(tmp_path, prom.url, "--node", "n", "--from", str(T0),
                                  "--to", str(T0 + 29)))
    assert f"Prometheus unreachable at {prom.url}" in line
    assert "HTTP 404 from /api/v1/targets" in line
    assert not (tmp_path / "runs").exists()


def test_a_node_down_all_window_for_want_of_a_connection_is_an_outage(tmp_path: Path) -> None:
    down = [(T0 + i, 0.0) for i in range(30)]
    with FakePrometheus(down, last_error='Get "http://127.0.0.1:9/metrics": dial tcp '
                        "127.0.0.1:9: connect: connection refused") as prom:
        result = run(tmp_path, prom.url, "--node", "n", "--from", str(T0), "--to", str(T0 + 29))
    assert result.exit_code == 0, result.output
    assert "1 incident(s) of n" in result.stdout
