"""The columnar ledger file: lossless records, the writer's flush policy, crashes, readers."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultkit.errors import LedgerFileError
from faultkit.load.columnar import SCHEMA, record_batch, records_from_batch
from faultkit.load.ledger import Ledger
from faultkit.load.ledgerfile import (
    ArrowLedgerWriter,
    iter_batches,
    iter_records,
    resolve_ledger,
)
from faultkit.model.records import ERROR_CLASSES, JsonlWriter, RequestRecord, read_ledger
from tests.paths import REPO


def make(i: int, *, t0: float = 1_767_268_800.0) -> RequestRecord:
    """A plausible record; every third one failed and carries no optional field at all."""
    t = t0 + i * 0.01
    if i % 3 == 2:
        return RequestRecord(
            f"p-{i:06d}", "n", "chat", t, "fail", t + 0.5, error_class="refused",
            error_detail="ConnectionRefusedError",
        )  # fmt: skip
    return RequestRecord(
        id=f"p-{i:06d}", node="n", kind="chat", t_invoke=t, status="ok",
        t_end=t + 1.0, t_first_byte=t + 0.1, t_first_token=t + 0.2, t_last_token=t + 0.9,
        http_status=200, finish_reason="length", prompt_tokens=12, output_tokens=4,
        output_tokens_from_usage=True, chunks=6, content_chunks=4,
        itl_s=(0.2, 0.25, 0.25 + i * 1e-6), t_scheduled=t - 0.001,
    )  # fmt: skip


_opt_float = st.none() | st.floats(-1e10, 1e10, allow_nan=False)
_opt_int = st.none() | st.integers(-(2**40), 2**40)
_opt_text = st.none() | st.text(max_size=30)

records_st = st.builds(
    RequestRecord,
    id=st.text(min_size=1, max_size=20),
    node=st.sampled_from(["a", "b-ä"]),
    kind=st.sampled_from(["chat", "completion", "probe"]),
    t_invoke=st.floats(0, 2e9, allow_nan=False),
    status=st.sampled_from(["ok", "fail", "unknown"]),
    t_end=st.floats(0, 2e9, allow_nan=False),
    t_first_byte=_opt_float,
    t_first_token=_opt_float,
    t_last_token=_opt_float,
    http_status=st.none() | st.integers(100, 599),
    error_class=st.none() | st.sampled_from(ERROR_CLASSES),
    error_detail=_opt_text,
    finish_reason=_opt_text,
    prompt_tokens=_opt_int,
    output_tokens=_opt_int,
    output_tokens_from_usage=st.booleans(),
    chunks=st.integers(0, 10_000),
    content_chunks=st.integers(0, 10_000),
    itl_s=st.lists(st.floats(0, 100, allow_nan=False), max_size=8).map(tuple),
    t_scheduled=_opt_float,
    error_body=st.booleans(),
    served_by=st.none() | st.sampled_from(["llama", "sim-vllm"]),
)


@given(st.lists(records_st, max_size=20))
@settings(max_examples=60, deadline=None)
def test_a_batch_holds_records_losslessly(records: list[RequestRecord]) -> None:
    batch = record_batch(records)
    assert batch.schema.equals(SCHEMA)
    assert records_from_batch(batch) == records


def test_the_columns_are_the_record_fields_in_order() -> None:
    assert SCHEMA.names == [f.name for f in dataclasses.fields(RequestRecord)]
    assert SCHEMA.metadata == {b"faultkit.ledger": b"1"}


def test_writer_batches_by_rows_and_reads_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    records = [make(i) for i in range(250)]
    with ArrowLedgerWriter(path, batch_rows=100, batch_s=60) as writer:
        for r in records:
            writer.write(r)
        writer.flush()
        assert writer.rows_written == 250
        assert writer.batches_written == 3  # 100 + 100 + the 50 flushed
    assert [b.num_rows for b in iter_batches(path)] == [100, 100, 50]
    assert list(iter_records(path)) == records
    assert [b.num_columns for b in iter_batches(path, ["status", "itl_s"])] == [2, 2, 2]


def test_writer_flushes_after_batch_s_without_more_records(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    writer = ArrowLedgerWriter(path, batch_rows=1000, batch_s=0.05)
    writer.write(make(0))
    deadline = time.monotonic() + 5
    while writer.rows_written == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    # in the file while the writer is still open: readable by another reader now
    assert list(iter_records(path)) == [make(0)]
    writer.close()


def test_an_empty_ledger_is_valid_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    writer = ArrowLedgerWriter(path)
    assert list(iter_records(path)) == []
    writer.close()
    writer.close()  # idempotent
    assert list(iter_records(path)) == []


def test_a_ledger_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        ArrowLedgerWriter(path)
    assert path.read_bytes() == b"precious"


class _FullDisk:
    def write_batch(self, batch: object) -> None:
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        pass


def test_write_errors_surface_at_flush_and_close(tmp_path: Path) -> None:
    writer = ArrowLedgerWriter(tmp_path / "ledger.arrows", batch_rows=2)
    writer._stream = _FullDisk()  # the disk fills up under the writer
    writer.write(make(0))
    writer.write(make(1))  # a full batch: the append fails in the writer thread
    with pytest.raises(LedgerFileError, match=r"ledger\.arrows: .*No space left"):
        writer.flush()
    with pytest.raises(LedgerFileError):
        writer.close()
    with pytest.raises(LedgerFileError, match="write after close"):
        writer.write(make(2))


_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_ledger_file import make
from faultkit.load.ledgerfile import ArrowLedgerWriter
writer = ArrowLedgerWriter(Path({path!r}), batch_rows=100, batch_s=3600)
for i in range(250):
    writer.write(make(i))
while writer.rows_written < 200:  # two batches in the file, 50 records pending
    pass
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_writer_leaves_every_flushed_batch_readable(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    code = _KILLED_WRITER.format(tests=str(Path(__file__).resolve().parent), path=str(path))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False, timeout=60)
    assert proc.returncode == -9
    problems: list[str] = []
    # lost: exactly the 50 records not yet flushed; no end-of-stream marker is needed
    assert list(iter_records(path, problems=problems)) == [make(i) for i in range(200)]
    assert problems == []


def test_a_torn_last_batch_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "ledger.arrows"
    with ArrowLedgerWriter(path, batch_rows=10) as writer:
        for i in range(30):
            writer.write(make(i))
            if i % 10 == 9:
                writer.flush()
                if i == 19:
                    size_after_two = path.stat().st_size
    data = path.read_bytes()
    for cut in (size_after_two + 1, size_after_two + 40, len(data) - 9):
        torn = tmp_path / f"torn-{cut}.arrows"
        torn.write_bytes(data[:cut])
        problems: list[str] = []
        assert list(iter_records(torn, problems=problems)) == [make(i) for i in range(20)]
        assert len(problems) == 1 and "torn last batch skipped" in problems[0]
    header_only = tmp_path / "header.arrows"
    header_only.write_bytes(data[:20])
    problems = []
    assert list(iter_records(header_only, problems=problems)) == []
    assert "no complete schema" in problems[0]


def test_readers_take_a_run_directory_or_a_jsonl_ledger(tmp_path: Path) -> None:
    records = [make(i) for i in range(7)]
    with JsonlWriter(tmp_path / "ledger.jsonl") as jsonl:
        for r in records:
            jsonl.write(r)
    assert resolve_ledger(tmp_path) == tmp_path / "ledger.jsonl"
    assert list(iter_records(tmp_path)) == records
    assert [b.num_rows for b in iter_batches(tmp_path, ["id"], rows=3)] == [3, 3, 1]
    with ArrowLedgerWriter(tmp_path / "ledger.arrows") as writer:
        for r in records[:2]:
            writer.write(r)
    assert resolve_ledger(tmp_path) == tmp_path / "ledger.arrows"  # preferred
    (tmp_path / "empty").mkdir()
    with pytest.raises(LedgerFileError, match=r"no ledger\.arrows or ledger\.jsonl here"):
        resolve_ledger(tmp_path / "empty")
    with pytest.raises(LedgerFileError, match="no such file"):
        resolve_ledger(tmp_path / "missing.arrows")
    with pytest.raises(LedgerFileError, match="no column"):
        list(iter_batches(tmp_path / "ledger.arrows", ["nope"]))


# ---------------------------------------------------------------------- the bounded Ledger


def test_a_bounded_ledger_keeps_no_record_but_writes_every_one(tmp_path: Path) -> None:
    columnar, jsonl = tmp_path / "ledger.arrows", tmp_path / "ledger.jsonl"
    seen: list[str] = []
    ledger = Ledger(jsonl, keep_records=False, columnar_path=columnar,
                    on_record=lambda r: seen.append(r.id))  # fmt: skip
    records = [make(i) for i in range(40)]
    for r in records:
        ledger.start(r.id, r.t_invoke)
        ledger.finish(r)
    assert ledger.records == []
    assert (ledger.counts.finished, ledger.counts.ok, ledger.counts.failed) == (40, 27, 13)
    assert len(ledger.recent_ok) == 27
    assert ledger.check() == []
    ledger.close()
    assert list(iter_records(columnar)) == records == read_ledger(jsonl)
    assert seen == [r.id for r in records]


def test_a_bounded_ledger_still_finds_violations(tmp_path: Path) -> None:
    ledger = Ledger(keep_records=False)
    a, b = make(0), make(1)
    ledger.start(a.id, a.t_invoke)
    ledger.start(a.id, a.t_invoke)  # invoked twice while in flight
    ledger.finish(a)
    ledger.finish(a)  # a second terminal record: no longer in flight
    ledger.finish(b)  # never started
    ledger.start("lost", 1.0)
    problems = ledger.check()
    assert "request id p-000000 invoked twice" in problems
    assert sum("finished but was not in flight" in p for p in problems) == 2
    assert "request lost was invoked but has no terminal record" in problems
    assert ledger.counts.finished == 1


# ---------------------------------------------------------------------- a scenario's ledgers


async def test_loads_sharing_one_columnar_ledger_as_a_scenario_does(tmp_path: Path) -> None:
    """``Experiment`` feeds one ``ledger.arrows`` from every background load (the node's
    and its neighbours') through ``on_record`` and closes it after they drained: the file
    then holds the same records as ``ledger.jsonl``, cancelled stragglers included."""
    import asyncio

    from faultkit.load import BackgroundLoad, LoadProfile, Target
    from faultkit.load.fakeserver import serve

    runner, port = await serve()
    url = f"http://127.0.0.1:{port}"
    jsonl, columnar = tmp_path / "ledger.jsonl", tmp_path / "ledger.arrows"
    try:
        writer = ArrowLedgerWriter(columnar, batch_rows=5)
        profile = LoadProfile(rate=60, concurrency=4, output_tokens=3)
        loads = [
            BackgroundLoad(Target(name, url, model), profile, ledger_path=jsonl,
                           on_record=writer.write, drain_timeout_s=0.1)
            for name, model in (("node", "ok"), ("neighbour", "slow,delay=0.5"))
        ]  # fmt: skip
        for load in loads:
            await load.__aenter__()
        await asyncio.sleep(0.4)
        for load in loads:
            await load.__aexit__(None, None, None)
        writer.close()
    finally:
        await runner.cleanup()
    on_disk = list(iter_records(columnar))
    assert on_disk == read_ledger(jsonl)  # one finish order, both files
    assert {r.node for r in on_disk} == {"node", "neighbour"}
    assert any(r.error_class == "cancelled" for r in on_disk)
