"""``faultkit load``: streaming load against an OpenAI-compatible endpoint, with a summary.

Target a node of the inventory (``--node``) or any endpoint (``--endpoint URL --model M``).
The run keeps no record in memory, whatever its length: records stream to a columnar
ledger file (``--columnar FILE``, else a temporary file removed at the end) and the summary
is computed from that file (``load.colstats.summarize_file``: the same figures as
``stats.summarize``). ``--ledger FILE`` also writes the JSON lines, for humans.
Exit status: 0 when the run completed (failed requests are *measured*, not an error),
1 when the endpoint cannot be reached at all (pre-flight ``GET /v1/models`` refused or
timed out, or the first requests all refused), 3 when the ledger invariant was violated.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import httpx

from faultkit.commands.input import FiniteFloat, inventory_option
from faultkit.commands.load_output import append_csv, format_summary, write_json
from faultkit.commands.summary_text import ms
from faultkit.errors import LoadError
from faultkit.inventory import load_inventory
from faultkit.load import (
    Ledger,
    LoadGenerator,
    LoadProfile,
    LoadResult,
    Target,
    procworker,
)
from faultkit.load.colstats import summarize_file
from faultkit.load.ledger import LedgerCounts
from faultkit.load.multiproc import run_in_processes
from faultkit.load.profile import MAX_RATE_RPS
from faultkit.load.prompts import MIXED, WORKLOADS
from faultkit.load.stats import percentile, ttft_s
from faultkit.model.records import CLIENT_SIDE, RequestRecord
from faultkit.rundir import LEDGER_ARROWS
from faultkit.runtime.gcquiet import collector_frozen
from faultkit.runtime.progress import Progress, format_elapsed, is_live

#: This many first requests all refused (or connect-timed-out) = the endpoint is unreachable
#: (the same rule in each process of a split run: ``procworker``).
UNREACHABLE_AFTER = procworker.UNREACHABLE_AFTER
_UNREACHABLE = procworker.UNREACHABLE
#: timeouts and thresholds: finite and above 0 (a negative timeout or ``nan`` is bad input)
_SECONDS = FiniteFloat(gt=0, unit="s")


@click.command()
@click.option("--node", help="node name from the inventory")
@inventory_option
@click.option("--endpoint", help="base URL of an OpenAI-compatible server (instead of --node)")
@click.option("--model", help="model name (with --endpoint)")
@click.option("--api-key-env", help="env var holding the API key (with --endpoint)")
@click.option(
    "--concurrency", type=click.IntRange(min=1), help="closed loop workers / open loop cap"
)
@click.option(
    "--rate",
    type=FiniteFloat(gt=0, le=MAX_RATE_RPS, unit="req/s"),
    help=f"open loop: req/s (at most {MAX_RATE_RPS:g}, what one client core can schedule)",
)
@click.option("--burstiness", type=FiniteFloat(gt=0), default=1.0, show_default=True,
              help="1 = Poisson")
@click.option("--requests", type=click.IntRange(min=1), help="stop after N requests")
@click.option("--duration", type=FiniteFloat(gt=0, unit="s"), help="stop after S s")
@click.option("--input-tokens", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--output-tokens", type=click.IntRange(min=1), default=32, show_default=True)
@click.option(
    "--endpoint-kind", type=click.Choice(["chat", "completion"]), default="chat", show_default=True
)
@click.option(
    "--workload", type=click.Choice([*WORKLOADS, MIXED]), default="free", show_default=True,
    help="what the prompts ask for (docs/load.md, 'Workload classes'); each request's class "
         "is in the ledger",
)
@click.option("--no-stream", is_flag=True, help="non-streaming requests (TTFT = E2E)")
@click.option(
    "--fresh-connections", is_flag=True,
    help="one connection per request (default: reuse those proven open; see LoadProfile)",
)
@click.option("--warmup", type=click.IntRange(min=0), default=0, help="warm-up requests")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--connect-timeout", type=_SECONDS, default=5.0, show_default=True)
@click.option("--first-token-timeout", type=_SECONDS, default=60.0, show_default=True)
@click.option("--timeout", "total_timeout", type=_SECONDS, default=300.0, show_default=True)
@click.option("--ttft-max", type=_SECONDS, help="goodput threshold on TTFT (s)")
@click.option("--tpot-max", type=_SECONDS, help="goodput threshold on TPOT (s)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write summary JSON")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="append summary CSV row")
@click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False),
              help="raw records as JSON lines (appended)")
@click.option("--columnar", "columnar_path", type=click.Path(dir_okay=False),
              help="raw records as a columnar ledger (Arrow stream; a new file; see "
                   "`faultkit ledger`); default: a temporary file")
@click.option(
    "--processes", type=click.IntRange(min=1), default=1, show_default=True,
    help="client processes sharing the load, each with its own event loop (more cores "
         "reading the sockets: exact token times at high stream counts; no live line)",
)
def load(**opts: Any) -> None:
    """Run streaming load and print TTFT / TPOT percentiles and throughput.

    Closed loop by default (--concurrency workers, default 1); --rate makes it open loop.
    Without --requests or --duration, 100 requests are sent.
    """
    target = _target(opts)
    try:
        profile = LoadProfile(
            endpoint=opts["endpoint_kind"],
            stream=not opts["no_stream"],
            concurrency=opts["concurrency"],
            rate=opts["rate"],
            burstiness=opts["burstiness"],
            requests=opts["requests"] if opts["requests"] or opts["duration"] else 100,
            duration_s=opts["duration"],
            input_tokens=opts["input_tokens"],
            output_tokens=opts["output_tokens"],
            connect_timeout_s=opts["connect_timeout"],
            first_token_timeout_s=opts["first_token_timeout"],
            total_timeout_s=opts["total_timeout"],
            seed=opts["seed"],
            warmup=opts["warmup"],
            reuse_connections=not opts["fresh_connections"],
            workload=opts["workload"],
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    columnar = Path(opts["columnar_path"]) if opts["columnar_path"] else None
    if columnar is not None and columnar.exists():
        raise click.UsageError(f"--columnar {columnar}: the file exists (a ledger is never "
                               "overwritten); remove it or give a new path")
    preflight(target, timeout_s=profile.connect_timeout_s)
    ledger_path = Path(opts["ledger_path"]) if opts["ledger_path"] else None
    live = _live_wanted(opts["json_path"])
    with tempfile.TemporaryDirectory(prefix="faultkit-load-") as tmp:
        ledger_file = columnar or Path(tmp) / LEDGER_ARROWS
        if opts["processes"] > 1:
            split = run_in_processes(
                target, profile, opts["processes"], workdir=Path(tmp),
                columnar_path=ledger_file, ledger_path=ledger_path,
            )
            result, unreachable = split.result, split.unreachable
        else:
            with collector_frozen():  # collections walk what the run allocates, not the CLI
                result, unreachable = asyncio.run(
                    _run(target, profile, ledger_path, live=live, columnar_path=ledger_file)
                )
        if unreachable:
            raise LoadError(
                f"{target.api_root}: the first {UNREACHABLE_AFTER} requests could not connect "
                f"({unreachable}); is the server up and listening there?"
            )
        summary = summarize_file(
            ledger_file,
            duration_s=result.duration_s,
            ttft_max_s=opts["ttft_max"],
            tpot_max_s=opts["tpot_max"],
        )
    click.echo(format_summary(summary, profile, late_sends=result.late_sends,
                              connections=result.connections))
    if opts["json_path"]:
        write_json(Path(opts["json_path"]), target, profile, result, summary)
    if opts["csv_path"]:
        append_csv(Path(opts["csv_path"]), target, profile, summary)
    if result.violations:
        for line in result.violations:
            click.secho(f"LEDGER INVARIANT VIOLATED: {line}", fg="red", err=True)
        raise SystemExit(3)


def _target(opts: dict[str, Any]) -> Target:
    if opts["node"] and opts["endpoint"]:
        raise click.UsageError("give either --node or --endpoint, not both")
    if opts["endpoint"]:
        if not opts["model"]:
            raise click.UsageError("--endpoint needs --model")
        key = os.environ.get(opts["api_key_env"]) if opts["api_key_env"] else None
        url = str(opts["endpoint"])
        if not url.startswith(("http://", "https://")):
            raise click.UsageError(f"--endpoint must be an http:// URL (got {url!r})")
        return Target("endpoint", url, opts["model"], None, key)
    if not opts["node"]:
        raise click.UsageError("give --node NAME (from the inventory) or --endpoint URL --model M")
    inventory = load_inventory(opts["inventory_path"])
    return Target.from_node(inventory.node(opts["node"]))


def preflight(target: Target, *, timeout_s: float) -> None:
    """``GET /v1/models`` once; raise :class:`LoadError` if nothing answers there.

    Any HTTP answer (even 401/404/503) means something is listening; the load run itself
    then measures what it does.
    """
    url = target.api_root + "/models"
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    try:
        httpx.get(url, headers=headers, timeout=httpx.Timeout(timeout_s, read=30.0))
    except httpx.ConnectError as exc:
        raise LoadError(f"cannot reach {url}: {exc}; is the server up and listening?") from None
    except httpx.TimeoutException:
        raise LoadError(f"{url}: no answer within the timeout; is the server overloaded?") from None
    except httpx.HTTPError as exc:
        raise LoadError(f"{url}: {type(exc).__name__}: {exc}") from None


def _live_wanted(json_path: str | None) -> bool:
    """The live progress line: only when stdout and stderr are terminals (not CI, not
    ``TERM=dumb``) and the summary JSON does not go to stdout."""
    if json_path in ("-", "/dev/stdout"):
        return False
    return is_live(sys.stderr) and is_live(sys.stdout)


async def _run(
    target: Target,
    profile: LoadProfile,
    ledger_path: Path | None,
    *,
    live: bool = False,
    columnar_path: Path | None = None,
) -> tuple[LoadResult, str | None]:
    """Run the load with a bounded-memory ledger (no record kept in memory): records go to
    ``columnar_path`` (and ``ledger_path``, JSON lines) as they finish."""
    first: list[str] = []

    def watch(record: RequestRecord) -> None:
        if record.error_class in CLIENT_SIDE:
            return  # the client's own doing: says nothing about whether the server is there
        if len(first) < UNREACHABLE_AFTER:
            first.append(record.error_class or "ok")
            if len(first) == UNREACHABLE_AFTER and set(first) <= _UNREACHABLE:
                gen.cancel_in_flight()

    ledger = Ledger(
        ledger_path, on_record=watch, keep_records=False, columnar_path=columnar_path
    )
    gen = LoadGenerator(target, profile, ledger=ledger)
    task = asyncio.create_task(gen.run())
    progress = asyncio.create_task(_progress(gen, profile)) if live else None
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:  # Ctrl-C: record what is in flight, report what we have
        gen.cancel_in_flight()
        result = await task
    finally:
        ledger.close()
        if progress is not None:
            progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress
    unreachable = (
        ", ".join(sorted(set(first)))
        if len(first) >= UNREACHABLE_AFTER and set(first) <= _UNREACHABLE
        else None
    )
    return result, unreachable


#: the live line's TTFT p50 is over this many most recent ok requests ("current")
_RECENT = 1000


def progress_status(
    records: list[RequestRecord], in_flight: int, elapsed_s: float, profile: LoadProfile
) -> str:
    """The live line's sub-status: requests done / planned (or elapsed / duration), ok and
    failed so far, in flight, and the TTFT p50 of the recent ok requests."""
    ok = [r for r in records if r.status == "ok"]
    counts = LedgerCounts(finished=len(records), ok=len(ok))
    return counts_status(counts, ok[-_RECENT:], in_flight, elapsed_s, profile)


def counts_status(
    counts: LedgerCounts,
    recent_ok: Iterable[RequestRecord],
    in_flight: int,
    elapsed_s: float,
    profile: LoadProfile,
) -> str:
    """:func:`progress_status` from a ledger's running counts and its latest ok records."""
    done = counts.finished
    where = f"{done}/{profile.requests} requests" if profile.requests else f"{done} requests"
    if profile.duration_s:
        where += f"  {format_elapsed(elapsed_s)} / {format_elapsed(profile.duration_s)}"
    p50 = percentile([v for r in recent_ok if (v := ttft_s(r)) is not None], 50)
    return (
        f"{where}  ok {counts.ok}  failed {done - counts.ok}  in flight {in_flight}"
        f"  TTFT p50 {ms(p50)}"
    )


async def _progress(gen: LoadGenerator, profile: LoadProfile) -> None:
    """The live line on stderr (terminal only) until cancelled; it leaves nothing behind."""
    reporter = Progress(live=True, stream=sys.stderr, tick_s=None)
    start = gen.clock.now()
    with (
        reporter.step(f"load on {gen.target.name}", report_end=False) as s,
        contextlib.suppress(asyncio.CancelledError),  # cancelled = the run ended: not a failure
    ):
        while True:
            ledger = gen.ledger
            s.update(
                counts_status(
                    ledger.counts,
                    list(ledger.recent_ok),
                    len(ledger.in_flight()),
                    gen.clock.now() - start,
                    profile,
                )
            )
            await asyncio.sleep(0.5)
