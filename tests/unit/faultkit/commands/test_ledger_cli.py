"""``faultkit ledger cat`` and ``faultkit ledger summary`` on ledger files and run directories."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.load.ledgerfile import ArrowLedgerWriter
from faultkit.load.stats import summarize
from faultkit.model.records import JsonlWriter, RequestRecord
from tests.unit.faultkit.load.test_ledger_file import make


def run_dir(tmp_path: Path, records: list[RequestRecord]) -> Path:
    """A run directory with both ledgers, written as a scenario writes them."""
    with (
        JsonlWriter(tmp_path / "ledger.jsonl") as jsonl,
        ArrowLedgerWriter(tmp_path / "ledger.arrows", batch_rows=7) as columnar,
    ):
        for r in records:
            jsonl.write(r)
            columnar.write(r)
    return tmp_path


def test_cat_prints_the_jsonl_ledger_byte_for_byte(tmp_path: Path) -> None:
    directory = run_dir(tmp_path, [make(i) for i in range(30)])
    result = CliRunner().invoke(cli, ["ledger", "cat", str(directory / "ledger.arrows")])
    assert result.exit_code == 0, result.output
    assert result.output == (directory / "ledger.jsonl").read_text()
    from_dir = CliRunner().invoke(cli, ["ledger", "cat", str(directory)])
    assert from_dir.output == result.output


def test_cat_warns_about_a_torn_last_batch(tmp_path: Path) -> None:
    directory = run_dir(tmp_path, [make(i) for i in range(30)])
    path = directory / "ledger.arrows"
    path.write_bytes(path.read_bytes()[:-40])
    result = CliRunner().invoke(cli, ["ledger", "cat", str(path)])
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if line.startswith("{")]
    assert len(lines) == 28  # 4 complete batches of 7; the last two records were torn
    assert "warning: " in result.output and "torn last batch skipped" in result.output


def test_summary_prints_and_writes_the_load_summary(tmp_path: Path) -> None:
    records = [make(i) for i in range(30)]
    directory = run_dir(tmp_path, records)
    out = tmp_path / "s.json"
    args = ["ledger", "summary", str(directory), "--window", "0.1s", "--json", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Requests: 30   ok 20   failed 10   unknown 0")
    assert "Errors by class: refused 10" in result.output
    data = json.loads(out.read_text())
    assert data["summary"]["ttft"]["p50"] == summarize(records).ttft.p50
    assert sum(w["requests"] for w in data["windows"]) == 30
    assert len(data["windows"]) == 3  # 0.3 s of arrivals in 0.1 s windows


def test_summary_json_to_stdout_and_bad_input(tmp_path: Path) -> None:
    directory = run_dir(tmp_path, [make(i) for i in range(5)])
    result = CliRunner().invoke(cli, ["ledger", "summary", str(directory), "--json", "-"])
    assert json.loads(result.output)["summary"]["requests"] == 5
    bad = CliRunner().invoke(cli, ["ledger", "summary", str(directory), "--window", "soon"])
    assert bad.exit_code == 2 and "--window" in bad.output
    (tmp_path / "empty").mkdir()
    missing = CliRunner().invoke(cli, ["ledger", "cat", str(tmp_path / "empty")])
    assert missing.exit_code == 1 and "no ledger.arrows or ledger.jsonl here" in missing.output
