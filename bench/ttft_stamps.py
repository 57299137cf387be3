"""Part C of the load-client bench: how exact are the client's first-token stamps?

The fake server stamps the wall-clock time it wrote each request's first content chunk
(``/stats``, keyed by request id); the error is the client's ``t_first_token`` minus that,
from one event loop in this process or from ``faultkit load --processes`` client
processes, with the client's CPU time and the time its loop thread(s) waited for a core
(``/proc/…/schedstat``). Used by ``bench/load_client.py``."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import httpx

from faultkit.load import LoadGenerator, LoadProfile, Target, percentile
from faultkit.load.ledgerfile import iter_batches
from faultkit.load.multiproc import run_in_processes

__all__ = ["pooled", "ttft_error", "ttft_error_split"]


def _runqueue_wait_s() -> float:
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


def _first_send(url: str) -> dict[str, float]:
    stats: dict[str, float] = httpx.get(url + "/stats", timeout=30).json()
    return stats


async def ttft_error(url: str, model: str, concurrency: int, requests: int) -> dict[str, object]:
    """One event loop in this process (on the client core): errors (s), CPU, waits."""
    profile = LoadProfile(concurrency=concurrency, requests=requests, output_tokens=16)
    cpu0, wait0 = time.process_time(), _runqueue_wait_s()
    result = await LoadGenerator(Target("bench", url, model), profile).run()
    cpu, wait = time.process_time() - cpu0, _runqueue_wait_s() - wait0
    sent = _first_send(url)
    errors = [
        r.t_first_token - sent[r.id]
        for r in result.records
        if r.t_first_token is not None and r.id in sent
    ]
    assert len(errors) == requests, f"only {len(errors)} of {requests} matched"
    return {"errors": errors, "cpu_s": cpu, "wait_s": wait, "dur_s": result.duration_s}


def ttft_error_split(url: str, model: str, concurrency: int, requests: int,
                     processes: int) -> dict[str, object]:
    """The same from ``processes`` client processes (``faultkit load --processes``)."""
    profile = LoadProfile(concurrency=concurrency, requests=requests, output_tokens=16)
    with tempfile.TemporaryDirectory() as tmp:
        run = run_in_processes(Target("bench", url, model), profile, processes,
                               workdir=Path(tmp), columnar_path=Path(tmp) / "all.arrows")
        assert not run.result.violations, run.result.violations
        sent = _first_send(url)
        errors = [
            float(t) - sent[str(i)]
            for batch in iter_batches(Path(tmp) / "all.arrows", ["id", "t_first_token"])
            for i, t in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                            strict=True)
            if t is not None and str(i) in sent
        ]
    assert len(errors) == requests, f"only {len(errors)} of {requests} matched"
    return {"errors": errors, "cpu_s": run.cpu_s,
            "cpu_total_s": sum(p.cpu_total_s for p in run.processes),
            "wait_s": sum(p.runqueue_wait_s or 0.0 for p in run.processes),
            "dur_s": run.result.duration_s, "processes": len(run.processes)}


def pooled(rounds: list[dict[str, object]]) -> dict[str, object]:
    """p50/p99/max (ms) over every round's errors; CPU and waits per round."""
    errors = [e for r in rounds for e in r["errors"]]  # type: ignore[attr-defined]
    per_round = [
        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "errors"}
        | {"p99_ms": round(1000 * (percentile(r["errors"], 99) or 0), 3)}  # type: ignore[arg-type]
        for r in rounds
    ]
    return {
        "p50": round(1000 * (percentile(errors, 50) or 0), 3),
        "p99": round(1000 * (percentile(errors, 99) or 0), 3),
        "max": round(1000 * max(errors), 3),
        "over_1ms": sum(e > 0.001 for e in errors),
        "samples": len(errors),
        "rounds": per_round,
    }
