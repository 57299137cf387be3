"""One load from several client processes: more cores reading the sockets.

One event loop reads every connection of a run in turn. With 256 streams whose tokens
arrive 20 ms apart it has 12,800 chunks a second to parse, in bursts, on a core it shares
with the rest of the machine; when it falls a token gap behind at a socket, the kernel's
receive stamp of the read holding two tokens dates both by the newer one, and the TTFT is
a token gap too long (docs/definitions.md, "Request timestamps"). :func:`run_in_processes`
gives the load to ``n`` processes (``python -m faultkit.load.procworker``), each with its
own event loop, connections and share of the streams or arrivals (:mod:`faultkit.load.shares`):

1. **Start.** Each process gets its spec on standard input (target, its share, the run's
   id prefix, the parent's clock anchor, its own ledger files), imports, warms up and
   says ready; when all are, the parent gives every one the same start instant, 50 ms
   ahead, so the open-loop schedule is the one schedule of a one-process run.
2. **Run.** A process writes its records as a one-process run does, to its own bounded
   ledger (docs/ledger.md): ``ledger-p<k>.arrows`` (and ``ledger-p<k>.jsonl`` for
   ``--ledger``) in a directory of the parent's. Nothing crosses a process boundary per
   request.
3. **Merge.** At the end each reports its counts, checks and CPU (:class:`WorkerResult`);
   the parent appends the processes' Arrow batches, one at a time, to the run's columnar
   ledger (memory: one batch) and their JSON lines to ``--ledger``, then checks the
   accounting across processes: the merged file holds exactly as many records as the
   processes started requests, and a process that ended without reporting is a violation.
   Ids are unique across processes by construction (request ``j·n + k``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from faultkit.load.columnar import SCHEMA
from faultkit.load.connections import ReuseStats
from faultkit.load.generator import LoadResult
from faultkit.load.ledger import Clock
from faultkit.load.ledgerfile import iter_batches
from faultkit.load.procworker import WorkerResult
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.shares import process_count, split_profile

__all__ = ["START_AHEAD_S", "SplitRun", "merge_ledgers", "run_in_processes"]

#: the common start is this far after the last process said ready (each must be back
#: waiting on its loop's timer by then)
START_AHEAD_S = 0.05


@dataclass(frozen=True, slots=True)
class SplitRun:
    """A split run's outcome: the merged :class:`LoadResult` and what each process said."""

    result: LoadResult
    processes: list[WorkerResult]
    #: the first requests' classes when every process found the endpoint unreachable
    unreachable: str | None

    @property
    def cpu_s(self) -> float:
        """CPU time (user + system) of the client processes together."""
        return sum(p.cpu_s for p in self.processes)


def run_in_processes(
    target: Target,
    profile: LoadProfile,
    processes: int,
    *,
    workdir: Path,
    columnar_path: Path,
    ledger_path: Path | None = None,
    clock: Clock | None = None,
) -> SplitRun:
    """Run ``profile`` against ``target`` from ``processes`` client processes (at most
    :func:`~faultkit.load.shares.process_count`); blocks until all are done.

    ``workdir`` (it must exist) holds each process's files; ``columnar_path`` is the run's
    columnar ledger (a new file), ``ledger_path`` the JSON lines to append to.
    """
    n = process_count(profile, processes)
    clock = clock or Clock()
    prefix = os.urandom(3).hex()
    procs: list[subprocess.Popen[str]] = []
    columnar = [workdir / f"ledger-p{k}.arrows" for k in range(n)]
    jsonl = [workdir / f"ledger-p{k}.jsonl" for k in range(n)] if ledger_path else None
    try:
        for k, share in enumerate(split_profile(profile, n)):
            spec = {
                "k": k,
                "n": n,
                "target": _target_json(target),
                "profile": share.to_json(),
                "id_prefix": prefix,
                "anchor": [clock.anchor_mono, clock.anchor_epoch],
                "columnar": str(columnar[k]),
                "jsonl": str(jsonl[k]) if jsonl else None,
            }
            procs.append(_spawn(spec))
        reports = _conduct(procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return _merged(reports, n, columnar, jsonl, columnar_path, ledger_path, clock)


def _target_json(target: Target) -> dict[str, Any]:
    return {
        "name": target.name,
        "base_url": target.base_url,
        "model": target.model,
        "engine": target.engine,
        "api_key": target.api_key,  # through the pipe, never argv or the environment
        "served_by_header": target.served_by_header,
    }


def _spawn(spec: dict[str, Any]) -> subprocess.Popen[str]:
    # the directory that holds the faultkit package (this file is faultkit/load/multiproc.py),
    # found without importing the package's top, which offers names of every layer
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultkit.load.procworker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec) + "\n")
    proc.stdin.flush()
    return proc


def _conduct(procs: list[subprocess.Popen[str]]) -> list[WorkerResult | None]:
    """Wait for every process to be ready, start them together, collect their reports.

    Ctrl-C reaches the processes themselves (they cancel what is in flight and report):
    here it only keeps waiting for them.
    """
    ready = [_read(p, "ready") is not None for p in procs]
    go = json.dumps({"go": time.monotonic() + START_AHEAD_S}) + "\n"
    for proc, ok in zip(procs, ready, strict=True):
        if ok and proc.stdin is not None:
            try:
                proc.stdin.write(go)
                proc.stdin.flush()
            except BrokenPipeError:
                pass
    reports: list[WorkerResult | None] = []
    for proc, ok in zip(procs, ready, strict=True):
        message = _read(proc, "result") if ok else None
        reports.append(WorkerResult.from_json(message) if message is not None else None)
    return reports


def _read(proc: subprocess.Popen[str], key: str) -> Any:
    """The value of the process's next message (``key``), or None if it ended first."""
    out: IO[str] | None = proc.stdout
    assert out is not None
    while True:
        try:
            line = out.readline()
        except KeyboardInterrupt:
            continue  # the processes got it too: they stop issuing and report
        if not line:
            return None
        message = json.loads(line)
        if key in message:
            return message[key]


def _merged(
    reports: list[WorkerResult | None],
    n: int,
    columnar: list[Path],
    jsonl: list[Path] | None,
    columnar_path: Path,
    ledger_path: Path | None,
    clock: Clock,
) -> SplitRun:
    done = [r for r in reports if r is not None]
    violations = [f"process {k} of {n}: {line}"
                  for k, r in enumerate(reports) if r is not None for line in r.violations]
    violations += [f"process {k} of {n} ended without reporting its result"
                   for k, r in enumerate(reports) if r is None]
    problems: list[str] = []
    rows = merge_ledgers([p for p in columnar if p.exists()], columnar_path, problems=problems)
    violations += problems
    if jsonl is not None and ledger_path is not None:
        with ledger_path.open("ab") as out:
            for part in jsonl:
                if part.exists():
                    with part.open("rb") as src:
                        shutil.copyfileobj(src, out)
    started = sum(r.started for r in done)
    if rows != started:
        violations.append(
            f"{started} requests started in {len(done)} process(es) but the merged ledger "
            f"holds {rows} records"
        )
    stats = [s for r in done if (s := r.reuse_stats()) is not None]
    connections = None
    if stats:
        no_reuse = tuple(dict.fromkeys(host for s in stats for host in s.no_reuse))
        connections = ReuseStats(
            sum(s.reused for s in stats), sum(s.found_closed for s in stats), no_reuse
        )
    now = clock.now()
    result = LoadResult(
        records=[],
        t_start=min((r.t_start for r in done), default=now),
        t_end=max((r.t_end for r in done), default=now),
        violations=violations,
        late_sends=sum(r.late_sends for r in done),
        requests=sum(r.finished for r in done),
        ledger_file=columnar_path,
        connections=connections,
    )
    lost = [r.unreachable if r is not None else None for r in reports]
    unreachable = (
        ", ".join(sorted({c for classes in lost if classes for c in classes}))
        if lost and all(lost)
        else None
    )
    return SplitRun(result, done, unreachable)


def merge_ledgers(parts: list[Path], out: Path, *, problems: list[str] | None = None) -> int:
    """Append the record batches of the columnar ledgers ``parts`` to the new ledger
    ``out``, one batch in memory at a time; return how many records it holds. A part torn
    by a crash gives its complete batches and a line in ``problems``."""
    rows = 0
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with out.open("xb") as fh:
        writer = pa.ipc.new_stream(fh, SCHEMA, options=options)
        for part in parts:
            for batch in iter_batches(part, problems=problems):
                writer.write_batch(batch)
                rows += batch.num_rows
        writer.close()  # the end-of-stream marker
        fh.flush()
        os.fsync(fh.fileno())
    return rows
