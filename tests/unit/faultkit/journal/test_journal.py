"""The fault journal: durable records, torn writes, liveness locks across processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from faultkit.errors import JournalError, JournalUnwritable
from faultkit.journal import FaultJournal, JournalRecord, default_journal_dir
from faultkit.sweep import sweep
from tests.unit import faults_fake
from tests.unit.faults_fake import WORLD


def _record(rid: str, key: str = "a") -> JournalRecord:
    return JournalRecord(
        id=rid, kind="pause", node="n1", description="test",
        undo=[{"op": "fake_restore", "key": key, "value": "ok"}],
    )


def test_home_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path / "fk"))
    assert default_journal_dir() == tmp_path / "fk" / "journal"


def test_begin_writes_before_returning_and_holds_lock(tmp_path: Path) -> None:
    j = FaultJournal(tmp_path)
    j.begin(_record("r1"))
    on_disk = json.loads((tmp_path / "r1.json").read_text())
    assert on_disk["state"] == "applying"
    assert on_disk["pid"] == os.getpid()
    assert j.is_live("r1")
    assert FaultJournal(tmp_path).is_live("r1")  # another journal object (same process) too
    assert j.orphans() == []


def test_a_record_that_cannot_be_written_is_unwritable_and_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at ``begin``: JournalUnwritable (the fault must not act; the CLI exits 2)
    and the liveness lock dropped, as if the record had never been begun."""
    journal = FaultJournal(tmp_path)

    def full(record: JournalRecord) -> None:
        raise JournalError("cannot write fault journal record: [Errno 28] No space left")

    monkeypatch.setattr(journal, "_write", full)
    with pytest.raises(JournalUnwritable, match=r"No space left.*the fault was not applied"):
        journal.begin(JournalRecord(id="f1", kind="pause", node="n", description="d"))
    assert not journal.is_live("f1")
    assert journal.ids() == []


def test_a_record_that_cannot_be_rewritten_after_acting_never_says_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the fault has acted, a full disk on a rewrite (more undo steps) or on the
    reverted mark is no "not applied": it says what is true and what to do."""
    journal = FaultJournal(tmp_path)
    record = _record("r1")
    journal.begin(record)

    def full(record: JournalRecord) -> None:
        raise JournalError("cannot write fault journal record: [Errno 28] No space left")

    monkeypatch.setattr(journal, "_write", full)
    with pytest.raises(JournalError, match="has acted") as acted:
        journal.update(record)
    with pytest.raises(JournalError, match="was reverted, but its record still reads "
                                           "applied") as reverted:
        journal.mark_reverted(record)
    for raised in (acted, reverted):
        assert "not applied" not in str(raised.value)
        assert not isinstance(raised.value, JournalUnwritable)  # not exit 2: it acted
        assert "faultkit sweep" in str(raised.value)


def test_mark_reverted_releases(tmp_path: Path) -> None:
    j = FaultJournal(tmp_path)
    rec = _record("r1")
    j.begin(rec)
    j.mark_reverted(rec)
    assert not j.is_live("r1")
    reverted = j.read("r1")
    assert reverted is not None
    assert reverted.state == "reverted"
    assert j.unreverted() == []


def test_released_record_is_an_orphan(tmp_path: Path) -> None:
    j = FaultJournal(tmp_path)
    j.begin(_record("r1"))
    j.release("r1")  # what a dying process does
    assert [r.id for r in j.orphans()] == ["r1"]


def test_torn_record_is_quarantined_not_fatal(tmp_path: Path) -> None:
    j = FaultJournal(tmp_path)
    good = _record("good")
    j.begin(good)
    j.release("good")
    (tmp_path / "torn.json").write_text('{"id": "torn", "kind": "pau')  # cut mid-write
    (tmp_path / ".x.json.123.tmp").write_text("{")  # a crash before rename
    WORLD["a"] = "broken"
    lines = sweep(j)
    assert WORLD["a"] == "ok"
    assert any("reverted good" in line for line in lines)
    assert (tmp_path / "torn.json.corrupt").exists()
    assert not (tmp_path / "torn.json").exists()
    assert any("unreadable journal record" in line for line in sweep(j))


def test_atomic_rewrite_keeps_old_content_on_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = FaultJournal(tmp_path)
    rec = _record("r1")
    j.begin(rec)

    def boom(*_: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    rec.undo.append({"op": "fake_restore", "key": "b", "value": "ok"})
    with pytest.raises(Exception, match="disk on fire"):
        j.update(rec)
    monkeypatch.undo()
    assert len(j.read("r1").undo) == 1  # type: ignore[union-attr]


def _hold_fault(directory: str, rid: str, ready: multiprocessing.synchronize.Event) -> None:
    j = FaultJournal(Path(directory))
    j.begin(_record(rid))
    ready.set()
    time.sleep(60)


def test_live_owner_in_another_process_is_not_swept(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_fault, args=(str(tmp_path), "live", ready))
    proc.start()
    try:
        assert ready.wait(10)
        j = FaultJournal(tmp_path)
        WORLD["a"] = "broken"
        assert sweep(j) == []
        assert WORLD["a"] == "broken"
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        assert [line.split()[0] for line in sweep(j)] == ["reverted"]
        assert WORLD["a"] == "ok"
        assert sweep(j) == []  # idempotent
    finally:
        if proc.is_alive():
            proc.kill()


def _churn(directory: str, worker: int, n: int) -> None:
    j = FaultJournal(Path(directory))
    for i in range(n):
        rec = _record(f"w{worker}-{i}", key=f"w{worker}")
        j.begin(rec)
        rec.state = "applied"
        j.update(rec)
        if i % 2 == 0:
            j.mark_reverted(rec)
        else:
            j.release(rec.id)  # "crash": left for the sweep


def test_concurrent_writers_and_sweepers(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_churn, args=(str(tmp_path), w, 20)) for w in range(4)]
    for p in procs:
        p.start()
    j = FaultJournal(tmp_path)
    swept: list[str] = []
    while any(p.is_alive() for p in procs):
        swept += sweep(j)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    swept += sweep(j)
    records = j.records()
    assert len(records) == 80
    assert all(r.state == "reverted" for r in records)
    reverted_by_sweep = [line for line in swept if line.startswith("reverted")]
    assert len(reverted_by_sweep) == 40  # each crashed record swept exactly once
    assert sweep(j) == []


def test_fake_module_imported() -> None:
    assert "fake_restore" in faults_fake.undo.OPS


def test_a_reverted_record_moves_out_of_what_inject_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every inject reads the unreverted records; reverted ones live in ``reverted/`` so that
    read does not grow with the machine's history (CI: 1,340 reverted records, a 4.2 s
    stall of the load client sharing the event loop)."""
    j = FaultJournal(tmp_path)
    for i in range(40):
        rec = _record(f"old{i:02d}")
        j.begin(rec)
        j.mark_reverted(rec)
    live = _record("live")
    j.begin(live)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["live.json"]
    assert len(list((tmp_path / "reverted").glob("*.json"))) == 40
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: object, *args: object, **kwargs: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting_open)
    assert [r.id for r in j.unreverted()] == ["live"]
    assert j.orphans() == []
    monkeypatch.undo()
    assert not [p for p in opened if "/reverted/" in p]
    # history still has every record, and each is found by its id
    assert len(j.records()) == 41
    old07 = j.read("old07")
    assert old07 is not None and old07.state == "reverted"
    assert j.path_of("old07") == tmp_path / "reverted" / "old07.json"
    with j.claim("old07") as claimed:
        assert claimed is None  # reverted: nothing for a sweep to take


def test_a_journal_of_an_older_layout_is_moved_on_first_read(tmp_path: Path) -> None:
    """Reverted records at the top (an older faultkit, or a crash before the move) are moved
    into ``reverted/`` by the first read, and pruned from there."""
    for i, state in enumerate(["reverted", "applied", "reverted"]):
        data = _record(f"r{i}").to_json() | {"state": state, "t_reverted": 1.0}
        (tmp_path / f"r{i}.json").write_text(json.dumps(data))
    j = FaultJournal(tmp_path)
    assert [r.id for r in j.unreverted()] == ["r1"]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["r1.json"]
    assert sorted(p.name for p in (tmp_path / "reverted").glob("*.json")) == ["r0.json", "r2.json"]
    assert j.prune(older_than_s=60) == 2
    assert [r.id for r in j.records()] == ["r1"]


def test_the_sweep_unwinds_stacked_faults_newest_first(tmp_path: Path) -> None:
    """A fault applied on top of another (the gate's scenarios run on top of its rollout)
    recorded the state the first one left as the one to restore. Replayed oldest first,
    the second undo would put the first fault's state back after the first undo had
    removed it; a stack unwinds newest first (CI: a partition on top of a rollout)."""
    WORLD["stacked"] = "ok"
    j = FaultJournal(tmp_path)
    first = JournalRecord(id="first", kind="rollout", node="n1", description="candidate",
                          t_created=time.time() - 60,
                          undo=[{"op": "fake_restore", "key": "stacked", "value": "ok"}])
    j.begin(first)
    WORLD["stacked"] = "candidate"
    second = JournalRecord(id="second", kind="memory_squeeze", node="n1", description="on top",
                           t_created=time.time() - 30,
                           undo=[{"op": "fake_restore", "key": "stacked", "value": "candidate"}])
    j.begin(second)
    WORLD["stacked"] = "squeezed"
    j.release("first")
    j.release("second")

    lines = sweep(j)

    assert [line.split()[1] for line in lines] == ["second", "first"]
    assert WORLD["stacked"] == "ok"
