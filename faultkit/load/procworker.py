"""One client process of a split load run: ``python -m faultkit.load.procworker``.

Started by :mod:`faultkit.load.multiproc`, it runs its share of the load
(:mod:`faultkit.load.shares`) on its own event loop and writes its records to its own
files, as a one-process run would. The conversation with the parent is one JSON object a
line: the spec on standard input; ``{"ready": …}`` once warmed up; then the parent's
``{"go": t}`` (the monotonic instant every process starts its schedule); at the end
``{"result": …}`` (:class:`WorkerResult`). The protocol has a file descriptor of its own:
anything else that writes to standard output goes to standard error instead.

Its records are dated on the parent's clock anchor (``Clock.from_anchor``), each read by
the kernel's receive stamp of the connection it arrived on (:mod:`faultkit.load.rxstamps`).
The collector is frozen after the imports and the warm-up (:mod:`faultkit.runtime.gcquiet`), so its
collections walk only what the run allocates. SIGINT (Ctrl-C reaches every process of the
terminal's group) cancels the requests in flight, each recorded as ``unknown/cancelled``,
and the process still reports and exits normally.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from faultkit.load.connections import ReuseStats
from faultkit.load.generator import LoadGenerator
from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.model.records import CLIENT_SIDE, RequestRecord

__all__ = ["UNREACHABLE", "UNREACHABLE_AFTER", "WorkerResult", "main", "run_share"]

#: This many first requests all refused (or connect-timed-out) = the endpoint is
#: unreachable from this process: it stops issuing (the same rule as ``faultkit load``).
UNREACHABLE_AFTER = 8
UNREACHABLE = frozenset({"refused", "timeout_connect"})


@dataclass(slots=True)
class WorkerResult:
    """What a process reports at the end (JSON): its ledger's counts and checks, its run's
    window on the shared clock, what its pool did and the CPU it used."""

    started: int = 0
    finished: int = 0
    ok: int = 0
    failed: int = 0
    unknown: int = 0
    t_start: float = 0.0
    t_end: float = 0.0
    violations: list[str] = field(default_factory=list)
    late_sends: int = 0
    warmup: int = 0
    connections: dict[str, Any] | None = None
    #: the classes of the first requests when they were all refused (else None)
    unreachable: list[str] | None = None
    #: CPU time (user + system) from the common start to the end; ``cpu_total_s`` from
    #: the process's start (imports and warm-up included)
    cpu_s: float = 0.0
    cpu_total_s: float = 0.0
    #: time the loop's thread was runnable but waited for a core, from the common start
    #: to the end (``/proc/self/schedstat``; None where the kernel does not say), and how
    #: often the kernel took the core from it (involuntary context switches)
    runqueue_wait_s: float | None = None
    preempted: int = 0
    loop: str = "asyncio"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerResult:
        return cls(**data)

    def reuse_stats(self) -> ReuseStats | None:
        c = self.connections
        if c is None:
            return None
        return ReuseStats(c["reused"], c["found_closed"], tuple(c["no_reuse"]))


def _target(data: dict[str, Any]) -> Target:
    return Target(**data)


async def run_share(spec: dict[str, Any], talk: IO[str], listen: IO[str]) -> WorkerResult:
    """Run the share ``spec`` describes, talking to the parent over ``talk``/``listen``."""
    target = _target(spec["target"])
    profile = LoadProfile.from_dict(spec["profile"])
    clock = Clock.from_anchor(*spec["anchor"])
    first: list[str] = []

    def watch(record: RequestRecord) -> None:
        if record.error_class in CLIENT_SIDE or len(first) >= UNREACHABLE_AFTER:
            return
        first.append(record.error_class or "ok")
        if len(first) == UNREACHABLE_AFTER and set(first) <= UNREACHABLE:
            gen.cancel_in_flight()

    loop = asyncio.get_running_loop()
    at_start: list[Any] = [0.0, None, 0]

    async def start_gate() -> float:
        gc.collect()
        gc.freeze()  # what exists now lives all run long: later collections skip it
        # (the process ends with the run: nothing to unfreeze, unlike gcquiet's callers)
        _say(talk, {"ready": spec["k"]})
        line = await loop.run_in_executor(None, listen.readline)
        if not line:
            raise SystemExit("the parent went away before the start")
        at_start[:] = [_cpu_s(), _runqueue_wait_s(), _preempted()]
        return float(json.loads(line)["go"])

    jsonl = Path(spec["jsonl"]) if spec.get("jsonl") else None
    ledger = Ledger(
        jsonl, on_record=watch, keep_records=False, columnar_path=Path(spec["columnar"])
    )
    gen = LoadGenerator(
        target,
        profile,
        ledger=ledger,
        clock=clock,
        id_prefix=spec["id_prefix"],
        share=(spec["k"], spec["n"]),
        start_gate=start_gate,
    )
    loop.add_signal_handler(signal.SIGINT, gen.cancel_in_flight)
    try:
        result = await gen.run()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        ledger.close()
    cpu, wait = _cpu_s(), _runqueue_wait_s()
    counts = ledger.counts
    return WorkerResult(
        started=ledger.started,
        finished=counts.finished,
        ok=counts.ok,
        failed=counts.failed,
        unknown=counts.unknown,
        t_start=result.t_start,
        t_end=result.t_end,
        violations=result.violations,
        late_sends=result.late_sends,
        warmup=len(result.warmup_records),
        connections=result.connections.to_json() if result.connections else None,
        unreachable=(
            first if len(first) >= UNREACHABLE_AFTER and set(first) <= UNREACHABLE else None
        ),
        cpu_s=cpu - at_start[0],
        cpu_total_s=cpu,
        runqueue_wait_s=None if wait is None or at_start[1] is None else wait - at_start[1],
        preempted=_preempted() - at_start[2],
        loop=type(loop).__module__.split(".")[0],
    )


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _preempted() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def _runqueue_wait_s() -> float | None:
    """Seconds this thread has waited runnable for a core, by the kernel's account."""
    try:
        fields = Path("/proc/thread-self/schedstat").read_text().split()
    except OSError:
        return None
    return int(fields[1]) / 1e9 if len(fields) >= 2 else None


def _say(talk: IO[str], message: dict[str, Any]) -> None:
    talk.write(json.dumps(message) + "\n")
    talk.flush()


def main() -> None:
    # the protocol keeps the real standard output; print() and stray writes go to stderr
    talk = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spec = json.loads(sys.stdin.readline())
    result = asyncio.run(run_share(spec, talk, sys.stdin))
    _say(talk, {"result": asdict(result)})
    talk.close()


if __name__ == "__main__":
    main()
