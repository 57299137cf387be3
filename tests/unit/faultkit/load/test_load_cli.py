"""``faultkit load`` end to end against the fake server in a subprocess."""

from __future__ import annotations

import csv
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.load.fakeserver import serve_in_subprocess
from faultkit.model.records import read_ledger


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with serve_in_subprocess() as url:
        yield url


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port


def test_summary_and_result_files(endpoint: str, tmp_path: Path) -> None:
    out_json, out_csv, ledger = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "l.jsonl"
    args = ["load", "--endpoint", endpoint, "--model", "slow,delay=0.001", "--concurrency", "4"]
    args += ["--requests", "40", "--output-tokens", "8", "--json", str(out_json)]
    args += ["--csv", str(out_csv), "--ledger", str(ledger), "--warmup", "4"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert re.fullmatch(r"Requests: 40   Concurrency: 4   Duration: [\d.]+ s", lines[0])
    assert re.fullmatch(r"TTFT  p50 [\d.]+ ms  p95 [\d.]+ ms  p99 [\d.]+ ms", lines[1])
    assert re.fullmatch(r"TPOT  p50 [\d.]+ ms   p95 [\d.]+ ms", lines[2])
    assert re.fullmatch(
        r"Throughput: \d+ tok/s   Request rate: [\d.]+ req/s   Errors: 0\.0 %", lines[3]
    )
    # reuse is on by default: the warm-up's 4 connections prove the server keeps them
    # (connections.py, rule 3), and the 40 requests on 4 workers reuse them, each proven open
    assert lines[4] == "Connections: 40 reused (each proven open first)"
    assert len(lines) == 5  # closed loop: no arrival-based lines
    data = json.loads(out_json.read_text())
    server = endpoint.removeprefix("http://").rstrip("/")
    assert data["connections"] == {
        "reused": 40, "found_closed": 0, "no_reuse": [], "proven": [server]
    }
    assert data["summary"]["requests"] == 40
    assert data["summary"]["ok"] == 40
    assert data["summary"]["total_output_tokens"] == 320
    assert set(data["summary"]["ttft"]) >= {"p50", "p90", "p95", "p99", "p999"}
    assert data["profile"]["concurrency"] == 4
    assert data["violations"] == []
    rows = list(csv.DictReader(out_csv.open()))
    assert rows[0]["requests"] == "40"
    assert float(rows[0]["ttft_p95_s"]) > 0
    assert len(read_ledger(ledger)) == 40


def test_open_loop_summary_shows_latency_from_arrival(endpoint: str, tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    args = ["load", "--endpoint", endpoint, "--model", "ok", "--rate", "40", "--duration", "0.5"]
    args += ["--concurrency", "8", "--output-tokens", "4", "--json", str(out_json)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert re.fullmatch(r"Requests: \d+   Rate: 40 req/s \(cap 8\)   Duration: [\d.]+ s", lines[0])
    assert re.fullmatch(r"TTFT  p50 [\d.]+ ms  p95 [\d.]+ ms  p99 [\d.]+ ms", lines[1])
    assert re.fullmatch(r"TTFT from arrival  p50 [\d.]+ ms  p95 [\d.]+ ms  p99 [\d.]+ ms", lines[2])
    assert lines[3].startswith("TPOT  p50 ")
    # shedding and late sends depend on how busy this shared machine is: check the
    # accounting (the line says what the JSON says), not the machine
    data = json.loads(out_json.read_text())
    summary = data["summary"]
    shed_line = next(line for line in lines if line.startswith("Shed by client: "))
    expected = f"Shed by client: {summary['shed_client']}"
    if data["late_sends"]:
        expected += f"   Sent late (> 50 ms): {data['late_sends']}"
    assert shed_line == expected
    assert summary["user_ttft"]["count"] == summary["ok"] > 0
    assert summary["user_ttft"]["p50"] >= summary["ttft"]["p50"]


def test_open_loop_summary_counts_arrivals_shed_by_the_client(endpoint: str) -> None:
    args = ["load", "--endpoint", endpoint, "--model", "hang_headers", "--rate", "40"]
    args += ["--duration", "0.5", "--concurrency", "2", "--first-token-timeout", "0.8"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    requests = int(result.output.split()[1])
    assert f"Shed by client: {requests - 2}" in result.output.splitlines()
    assert "TTFT from arrival  p50 —  p95 —  p99 —" in result.output
    assert f"shed_client {requests - 2}" in result.output
    assert "timeout_first_token 2" in result.output


def test_errors_are_measured_not_fatal(endpoint: str) -> None:
    args = ["load", "--endpoint", endpoint, "--model", "status,code=429", "--requests", "5"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Errors: 100.0 %" in result.output
    assert "Errors by class: http_429 5" in result.output


def test_node_from_inventory(endpoint: str, tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"nodes:\n  - name: fake\n    engine: vllm\n    base_url: {endpoint}\n    model: ok\n"
    )
    args = ["load", "--node", "fake", "--inventory", str(inv), "--requests", "3", "--no-stream"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Requests: 3")


def test_unreachable_endpoint_exits_nonzero_with_one_line() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    result = CliRunner().invoke(cli, ["load", "--endpoint", url, "--model", "m"])
    assert result.exit_code != 0
    assert "cannot reach" in result.output
    assert "Traceback" not in result.output


def test_first_requests_all_refused_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("faultkit.commands.load.preflight", lambda *a, **k: None)
    url = f"http://127.0.0.1:{_closed_port()}"
    args = ["load", "--endpoint", url, "--model", "m", "--requests", "1000", "--concurrency", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert "could not connect (refused)" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "a", "--endpoint", "http://127.0.0.1:1"], "not both"),
        (["--endpoint", "http://127.0.0.1:1"], "needs --model"),
        ([], "give --node NAME"),
        (["--endpoint", "127.0.0.1:1", "--model", "m"], "must be an http:// URL"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["load", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_live_progress_status_line() -> None:
    from faultkit.commands.load import _live_wanted, progress_status
    from faultkit.load import LoadProfile
    from faultkit.model.records import RequestRecord, Status

    def rec(i: int, status: Status, ttft: float | None) -> RequestRecord:
        first = None if ttft is None else 10.0 + ttft
        return RequestRecord(id=str(i), node="n", kind="chat", t_invoke=10.0, status=status,
                             t_end=11.0, t_first_token=first)

    records = [rec(0, "ok", 0.010), rec(1, "ok", 0.030), rec(2, "fail", None)]
    assert progress_status(records, 2, 3.0, LoadProfile(requests=50)) == (
        "3/50 requests  ok 2  failed 1  in flight 2  TTFT p50 20 ms"
    )
    by_time = LoadProfile(requests=None, duration_s=60.0)
    assert progress_status([], 0, 12.5, by_time) == (
        "0 requests  12 s / 1 min 0 s  ok 0  failed 0  in flight 0  TTFT p50 —"
    )
    # under the test runner neither stream is a terminal; --json to stdout never shows it
    assert _live_wanted(None) is False
    assert _live_wanted("-") is False


def test_fresh_connections_flag_reuses_none(endpoint: str, tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    args = ["load", "--endpoint", endpoint, "--model", "ok", "--concurrency", "2",
            "--requests", "10", "--fresh-connections", "--json", str(out_json)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Connections:" not in result.output
    data = json.loads(out_json.read_text())
    assert data["profile"]["reuse_connections"] is False
    assert data["connections"]["reused"] == 0
