"""Scheduling (closed/open loop), BackgroundLoad drain, and a node killed mid-run."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from faultkit.errors import LedgerInvariantError
from faultkit.load import (
    BackgroundLoad,
    Ledger,
    LoadGenerator,
    LoadProfile,
    Target,
    arrival_offsets,
)
from faultkit.load.fakeserver import serve
from faultkit.model.records import RequestRecord, read_ledger


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def _max_overlap(records: Sequence[RequestRecord]) -> int:
    edges = sorted(
        [(r.t_invoke, 1) for r in records] + [(r.t_end, -1) for r in records],
        key=lambda e: (e[0], e[1]),
    )
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


# ------------------------------------------------------------------ profile parsing


def test_profile_from_string_converts_types_and_aliases() -> None:
    p = LoadProfile.from_string(
        "concurrency=4, output_tokens=32,stream=false,rate=2.5,duration=10s,"
        "endpoint=completions,timeout=30,first_token_timeout=5"
    )
    assert (p.concurrency, p.output_tokens, p.stream, p.rate) == (4, 32, False, 2.5)
    assert (p.duration_s, p.endpoint, p.total_timeout_s, p.first_token_timeout_s) == (
        10.0,
        "completion",
        30.0,
        5.0,
    )
    assert LoadProfile.from_string("") == LoadProfile()
    assert LoadProfile.from_dict(p.to_json()) == p
    assert hash(p) == hash(LoadProfile.from_dict(p.to_json()))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("concurency=4", "unknown load profile key 'concurency'"),
        ("concurrency=four", "must be an integer"),
        ("concurrency=0", "concurrency must be >= 1"),
        ("stream=maybe", "must be true or false"),
        ("rate=-1", "rate must be > 0"),
        ("endpoint=embeddings", "endpoint must be chat or completion"),
        ("concurrency", "is not key=value"),
    ],
)
def test_profile_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoadProfile.from_string(text)


# ------------------------------------------------------------------ closed loop


async def test_closed_loop_sends_exactly_n_with_concurrency_cap(server: str) -> None:
    profile = LoadProfile(concurrency=3, requests=30, output_tokens=8)
    target = Target("t", server, "slow,delay=0.005")
    result = await LoadGenerator(target, profile).run()
    assert len(result.records) == 30
    assert len({r.id for r in result.records}) == 30
    assert all(r.status == "ok" for r in result.records)
    assert 2 <= _max_overlap(result.records) <= 3
    assert result.violations == []


async def test_warmup_requests_are_kept_out_of_the_ledger(server: str) -> None:
    ledger = Ledger()
    profile = LoadProfile(concurrency=2, requests=5, warmup=3)
    result = await LoadGenerator(Target("t", server, "ok"), profile, ledger=ledger).run()
    assert len(result.warmup_records) == 3
    assert len(result.records) == 5
    assert all(r.t_end <= result.t_start + 1e-6 for r in result.warmup_records)
    assert not {r.id for r in result.warmup_records} & {r.id for r in result.records}


async def test_duration_stops_issuing(server: str) -> None:
    profile = LoadProfile(concurrency=2, duration_s=0.3)
    result = await LoadGenerator(Target("t", server, "slow,delay=0.01"), profile).run()
    assert result.records
    assert max(r.t_invoke for r in result.records) < result.t_start + 0.3 + 0.05


# ------------------------------------------------------------------ open loop


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 4.0])
def test_arrival_process_has_the_requested_rate_and_burstiness(burstiness: float) -> None:
    rate, horizon = 20.0, 500.0
    offsets = []
    for t in arrival_offsets(rate, burstiness, seed=7):
        if t >= horizon:
            break
        offsets.append(t)
    expected = rate * horizon  # 10 000 arrivals
    assert abs(len(offsets) - expected) < 0.05 * expected
    gaps = [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]
    cv2 = statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2
    assert cv2 == pytest.approx(1 / burstiness, rel=0.15)  # gamma: CV² = 1/shape
    again = [t for t, _ in zip(arrival_offsets(rate, burstiness, seed=7), range(50), strict=False)]
    assert again == offsets[:50]


async def test_open_loop_issues_the_scheduled_count(server: str) -> None:
    rate, duration = 100.0, 0.5
    scheduled = sum(1 for t in _take_while(arrival_offsets(rate, 1.0, 3), duration))
    profile = LoadProfile(rate=rate, duration_s=duration, seed=3, output_tokens=2)
    result = await LoadGenerator(Target("t", server, "ok"), profile).run()
    # Arrivals belong to the run by schedule, so even a busy loop sends exactly these.
    assert len(result.records) == scheduled
    assert all(r.status == "ok" for r in result.records)


def _take_while(offsets: object, limit: float) -> list[float]:
    out = []
    for t in offsets:  # type: ignore[attr-defined]
        if t >= limit:
            break
        out.append(t)
    return out


async def test_open_loop_respects_concurrency_cap(server: str) -> None:
    profile = LoadProfile(rate=200.0, concurrency=2, requests=12, output_tokens=10)
    result = await LoadGenerator(Target("t", server, "slow,delay=0.005"), profile).run()
    assert len(result.records) == 12  # every arrival, sent or shed
    sent = [r for r in result.records if r.error_class != "shed_client"]
    shed = [r for r in result.records if r.error_class == "shed_client"]
    assert all(r.status == "ok" for r in sent)
    assert _max_overlap(sent) == 2
    # ~50 ms per request at 200 arrivals/s: the cap is reached and arrivals are not held
    assert shed
    assert all(r.t_invoke == r.t_end == r.t_scheduled for r in shed)
    assert result.violations == []


# ------------------------------------------------------------------ BackgroundLoad


async def test_background_load_drain_cancels_and_records_stragglers(
    server: str, tmp_path: Path
) -> None:
    seen: list[RequestRecord] = []
    ledger_path = tmp_path / "ledger.jsonl"
    profile = LoadProfile(concurrency=3, output_tokens=100)
    target = Target("t", server, "slow,delay=0.05")  # 5 s per request
    async with BackgroundLoad(
        target, profile, ledger_path=ledger_path, on_record=seen.append, drain_timeout_s=0.2
    ) as load:
        await asyncio.sleep(0.3)
        in_flight = load.in_flight()
        assert len(in_flight) == 3
        assert all(abs(t - time.time()) < 5 for t in in_flight.values())
    records = load.records
    assert len(records) == 3
    assert {r.id for r in records} == set(in_flight)
    assert all((r.status, r.error_class) == ("unknown", "cancelled") for r in records)
    assert all(r.content_chunks > 0 for r in records)  # partial progress kept
    assert load.in_flight() == {}
    assert seen == records
    assert read_ledger(ledger_path) == records
    assert load.violations == []


async def test_background_load_drain_lets_short_requests_finish(server: str) -> None:
    profile = LoadProfile(concurrency=2, output_tokens=10)
    async with BackgroundLoad(
        Target("t", server, "slow,delay=0.01"), profile, drain_timeout_s=5
    ) as load:
        await asyncio.sleep(0.25)
    assert len(load.records) >= 2
    assert all(r.status == "ok" for r in load.records)


async def test_a_background_load_sends_until_stopped_or_its_profile_ends(server: str) -> None:
    """``sending()`` is what the run's wait for its after window asks: false before the
    start, once the generator is stopped, and once a profile of N requests has sent them."""
    load = BackgroundLoad(Target("t", server, "ok"), LoadProfile(concurrency=1),
                          drain_timeout_s=1)
    assert not load.sending()
    async with load:
        await asyncio.sleep(0.05)
        assert load.sending()
        load.generator.stop()
        assert load.generator.stopped and not load.sending()
    few = BackgroundLoad(Target("t", server, "ok"), LoadProfile(concurrency=1, requests=2),
                         drain_timeout_s=1)
    async with few:
        for _ in range(100):
            if not few.sending():
                break
            await asyncio.sleep(0.02)
        assert not few.sending() and not few.generator.stopped  # it ended, nobody stopped it


async def test_background_load_exception_in_block_still_drains(server: str) -> None:
    profile = LoadProfile(concurrency=2, output_tokens=100)
    load = BackgroundLoad(Target("t", server, "slow,delay=0.05"), profile, drain_timeout_s=0.1)

    async def scenario() -> None:
        async with load:
            await asyncio.sleep(0.1)
            raise RuntimeError("scenario broke")

    with pytest.raises(RuntimeError, match="scenario broke"):
        await scenario()
    assert len(load.records) == 2
    assert all(r.error_class == "cancelled" for r in load.records)


def test_ledger_reports_violations() -> None:
    ledger = Ledger()
    ledger.start("a", 1.0)
    ledger.start("b", 1.0)
    rec = RequestRecord(id="a", node="n", kind="chat", t_invoke=1.0, status="ok", t_end=2.0)
    ledger.finish(rec)
    ledger.finish(rec)
    ledger.finish(RequestRecord(id="c", node="n", kind="chat", t_invoke=1, status="fail", t_end=2))
    problems = ledger.check()
    assert any("a got a second terminal record" in p for p in problems)
    assert any("c finished but was never started" in p for p in problems)
    assert any("c: status fail with unknown error_class None" in p for p in problems)
    assert any("b was invoked but has no terminal record" in p for p in problems)
    assert "ledger invariant violated" in str(LedgerInvariantError(problems))


# ------------------------------------------------------------------ a node killed mid-run


async def test_sigkilled_server_every_request_has_one_terminal_status(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "faultkit.load.fakeserver", "--port", "0", stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        port = int(line.decode().rsplit(":", 1)[1])
        target = Target("killed", f"http://127.0.0.1:{port}", "slow,delay=0.02")
        profile = LoadProfile(concurrency=4, requests=16, output_tokens=200, total_timeout_s=10)
        ledger_path = tmp_path / "ledger.jsonl"
        gen = LoadGenerator(target, profile, ledger=Ledger(ledger_path))
        run = asyncio.create_task(gen.run())
        while len(gen.ledger.in_flight()) < 4:  # noqa: ASYNC110 - polling public state
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # streams are mid-way
        t_kill = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        result = await asyncio.wait_for(run, 20)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert result.violations == []
    records = result.records
    assert len(records) == 16 == len({r.id for r in records})
    assert read_ledger(ledger_path) == records
    killed = [r for r in records if r.t_invoke < t_kill]
    after = [r for r in records if r.t_invoke >= t_kill]
    assert len(killed) == 4
    for r in killed:
        assert r.status == "fail"
        assert r.error_class in ("reset", "truncated"), r
        assert r.content_chunks > 0
    assert after
    # A connect racing the kernel's teardown of the dying process may be accepted and then
    # reset; once the socket is gone every attempt is refused. None may look successful.
    unexpected = [
        r for r in after if r.status != "fail" or r.error_class not in ("refused", "reset")
    ]
    assert unexpected == []
    assert all(r.content_chunks == 0 for r in after)
