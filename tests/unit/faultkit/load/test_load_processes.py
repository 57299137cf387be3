"""One load from several client processes (``faultkit load --processes N``).

The split must not change what is accounted: the shares add up to the run
(``faultkit.load.shares``), each process sends exactly its requests and arrivals of the
one-process run (``LoadGenerator(share=…)``), and the merged ledger holds exactly one
record per request (``faultkit.load.multiproc``), a missing process or record being a
violation, never a silent gap. No timing is asserted here: the timing figures are
``bench/load_client.py``'s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.load import LoadGenerator, LoadProfile, Target, arrival_offsets
from faultkit.load.fakeserver import serve, serve_in_subprocess
from faultkit.load.ledger import Clock
from faultkit.load.ledgerfile import ArrowLedgerWriter, iter_records
from faultkit.load.multiproc import _merged, merge_ledgers, run_in_processes
from faultkit.load.procworker import WorkerResult
from faultkit.load.shares import part, process_count, split_profile
from faultkit.model.records import RequestRecord


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture(scope="module")
def server_process() -> Iterator[str]:
    """A fake server in its own process: the client processes' target."""
    with serve_in_subprocess() as url:
        yield url


# ------------------------------------------------------------------ the shares


@pytest.mark.parametrize("total", [0, 1, 5, 64, 1001])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_parts_add_up_and_number_every_request_once(total: int, n: int) -> None:
    parts = [part(total, k, n) for k in range(n)]
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1
    # process k's j-th request is request j·n + k: together exactly 0 … total-1
    indices = sorted(j * n + k for k in range(n) for j in range(parts[k]))
    assert indices == list(range(total))


def test_a_run_is_never_split_into_an_empty_share() -> None:
    assert process_count(LoadProfile(concurrency=2, requests=100), 4) == 2
    assert process_count(LoadProfile(concurrency=64, requests=3), 4) == 3
    assert process_count(LoadProfile(requests=10), 4) == 1  # one closed-loop worker
    assert process_count(LoadProfile(rate=5.0, requests=10), 4) == 4  # no cap: arrivals
    with pytest.raises(ValueError, match="processes"):
        process_count(LoadProfile(), 0)
    for profile in (LoadProfile(concurrency=5, requests=11, warmup=3),
                    LoadProfile(rate=50.0, concurrency=9, duration_s=2.0)):
        n = process_count(profile, 4)
        shares = split_profile(profile, n)
        assert sum(s.concurrency or 0 for s in shares) == profile.concurrency
        assert sum(s.warmup for s in shares) == profile.warmup
        if profile.requests is not None:
            assert sum(s.requests or 0 for s in shares) == profile.requests
        assert all(s.rate == profile.rate and s.duration_s == profile.duration_s
                   for s in shares)
        assert all(s.concurrency for s in shares)


# ------------------------------------------------------------------ the generator's share


async def test_closed_loop_shares_send_the_one_process_run_requests(server: str) -> None:
    profile = LoadProfile(concurrency=5, requests=23, output_tokens=2, warmup=2)
    whole = await LoadGenerator(Target("t", server, "ok"), profile, id_prefix="r").run()
    n = process_count(profile, 3)
    ids: list[str] = []
    for k, share in enumerate(split_profile(profile, n)):
        gen = LoadGenerator(Target("t", server, "ok"), share, id_prefix="r", share=(k, n))
        result = await gen.run()
        assert {r.id.rsplit("-", 1)[1] for r in result.records} == {
            f"{j * n + k:06d}" for j in range(share.requests or 0)
        }
        ids += [r.id for r in result.records]
    assert sorted(ids) == sorted(r.id for r in whole.records)
    assert len(set(ids)) == len(ids) == 23


async def test_open_loop_shares_send_exactly_the_arrivals_of_the_one_schedule(
    server: str,
) -> None:
    profile = LoadProfile(rate=400.0, requests=40, concurrency=60, output_tokens=1, seed=3)
    offsets: list[float] = []
    for t in arrival_offsets(profile.rate or 0, profile.burstiness, profile.seed):
        if len(offsets) == 40:
            break
        offsets.append(t)
    n = 3
    start = Clock.mono() + 0.05
    clock = Clock()

    async def gate() -> float:
        return start

    async def one(k: int, share: LoadProfile) -> list[RequestRecord]:
        gen = LoadGenerator(Target("t", server, "ok"), share, id_prefix="o", share=(k, n),
                            clock=clock, start_gate=gate)
        return (await gen.run()).records

    parts = await asyncio.gather(*(one(k, s) for k, s in enumerate(split_profile(profile, n))))
    records = [r for p in parts for r in p]
    assert len(records) == 40
    for k, part_records in enumerate(parts):
        for r in part_records:
            index = int(r.id.rsplit("-", 1)[1])
            assert index % n == k
            assert r.t_scheduled is not None
            # the arrival's due time in the one schedule, on the shared start
            assert r.t_scheduled == pytest.approx(clock.epoch(start + offsets[index]), abs=1e-6)
    assert sorted(int(r.id.rsplit("-", 1)[1]) for r in records) == list(range(40))


def test_a_share_must_be_one_of_n() -> None:
    with pytest.raises(ValueError, match="share"):
        LoadGenerator(Target("t", "http://127.0.0.1:1", "m"), LoadProfile(), share=(2, 2))


# ------------------------------------------------------------------ processes and the merge


def test_split_run_merges_exactly_one_record_per_request(
    server_process: str, tmp_path: Path
) -> None:
    profile = LoadProfile(concurrency=6, requests=61, output_tokens=3, warmup=3)
    out = tmp_path / "ledger.arrows"
    jsonl = tmp_path / "ledger.jsonl"
    (tmp_path / "work").mkdir()
    run = run_in_processes(Target("t", server_process, "ok"), profile, 3,
                           workdir=tmp_path / "work", columnar_path=out, ledger_path=jsonl)
    assert run.result.violations == []
    assert len(run.processes) == 3
    records = list(iter_records(out))
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids)) == 61 == run.result.requests
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(61))
    assert all(r.status == "ok" for r in records)
    assert sorted(json.loads(line)["id"] for line in jsonl.read_text().splitlines()) == sorted(ids)
    assert sum(p.started for p in run.processes) == 61
    assert run.result.connections is not None
    assert run.unreachable is None


def test_split_open_loop_accounts_for_every_arrival(server_process: str, tmp_path: Path) -> None:
    profile = LoadProfile(rate=300.0, requests=45, concurrency=4, output_tokens=2)
    out = tmp_path / "ledger.arrows"
    run = run_in_processes(Target("t", server_process, "slow,delay=0.05"), profile, 2,
                           workdir=tmp_path, columnar_path=out)
    assert run.result.violations == []
    records = list(iter_records(out))
    assert sorted(int(r.id.rsplit("-", 1)[1]) for r in records) == list(range(45))
    shed = [r for r in records if r.error_class == "shed_client"]
    assert all(r.status == "ok" for r in records if r not in shed)
    assert shed  # 2 in flight per process at 300 req/s × 0.1 s: some arrivals find it full


def _record(rid: str) -> RequestRecord:
    return RequestRecord(id=rid, node="t", kind="chat", t_invoke=1.0, status="ok", t_end=2.0)


def _part(path: Path, ids: list[str]) -> Path:
    with ArrowLedgerWriter(path, fsync=False) as writer:
        for rid in ids:
            writer.write(_record(rid))
    return path


def test_merge_appends_every_part_once(tmp_path: Path) -> None:
    parts = [_part(tmp_path / "a.arrows", ["a-1", "a-2"]), _part(tmp_path / "b.arrows", ["b-1"])]
    assert merge_ledgers(parts, tmp_path / "all.arrows") == 3
    assert [r.id for r in iter_records(tmp_path / "all.arrows")] == ["a-1", "a-2", "b-1"]
    with pytest.raises(FileExistsError):  # a ledger is never overwritten
        merge_ledgers(parts, tmp_path / "all.arrows")


def test_a_missing_process_or_record_is_a_violation(tmp_path: Path) -> None:
    parts = [_part(tmp_path / "p0.arrows", ["x-000000", "x-000002"])]
    said = WorkerResult(started=3, finished=3, ok=3)  # says 3, its ledger holds 2
    run = _merged([said, None], 2, parts, None, tmp_path / "all.arrows", None, Clock())
    lines = run.result.violations
    assert any("process 1 of 2 ended without reporting" in line for line in lines)
    assert any("3 requests started" in line and "holds 2 records" in line for line in lines)


def test_cli_processes_option_runs_the_split(server_process: str, tmp_path: Path) -> None:
    from faultkit.commands.load import load

    out = tmp_path / "s.json"
    columnar = tmp_path / "c.arrows"
    result = CliRunner().invoke(load, [
        "--endpoint", server_process, "--model", "ok", "--concurrency", "4",
        "--requests", "30", "--output-tokens", "2", "--processes", "2",
        "--json", str(out), "--columnar", str(columnar),
    ])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["summary"]["requests"] == 30
    assert len({r.id for r in iter_records(columnar)}) == 30
