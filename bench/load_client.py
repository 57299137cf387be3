"""How much load can faultkit's client generate, and how exact are its timestamps?

Runs a zero-latency OpenAI-compatible SSE server (``faultkit.load.fakeserver``) in a
separate process on loopback (pinned to the last CPU when there are several) and drives it
from this process pinned to CPU 0 ("one client core"):

A. streamed tokens/s — 32 streams × 500 one-token chunks (server writes each whole stream at once)
B. requests/s        — 64 concurrent streams × 10 chunks
C. TTFT timestamp error at 256 concurrent streams: the server stamps the wall-clock time
   it wrote each request's first content chunk (keyed by X-Request-Id); the error is the
   client's ``t_first_token`` minus that send time (p50 / p99 / max, pooled over
   ``--stamp-rounds`` runs of 2,048 requests). Tokens paced at 20 ms (a realistic decode
   speed: 12,800 chunks/s in total), from one event loop in this process on the client
   core (the earlier design) and from ``--processes N`` client processes
   (``faultkit.load.multiproc``, N = 2, 3, 4, free to use both cores), with the client's
   CPU time and the time its loop thread(s) waited for a core (``/proc/…/schedstat``);
   once at zero latency from this process (the client saturated: mostly its own queue).
   The headline ``ttft_stamp_error_ms`` is ``--stamp-processes`` (default 4: in two runs on
   2026-12-03, 4 processes met p99 ≤ 1 ms both times, 3 processes once).

D. honesty of connection reuse — requests that fail only because the client reused a
   connection the server had closed: against the fake server's ``close_after`` mode (it
   closes every streamed connection, as llama.cpp does) and, when its binary and model are
   under ``$FAULTKIT_HOME``, llama.cpp's own server on loopback (400 requests, 8 streams,
   32 in / 24 out), for faultkit's default mode, ``vllm bench serve`` and GuideLLM.

A and B run ``--rounds`` times, interleaved with vLLM's runs, and report best and median:
the machine may be shared, and the best run is the closest to the client's capacity. The
ratios are best ÷ best (``ratio_default_*``) and median ÷ median (``…_median``). B also
reports faultkit's CPU time per request (noise from other processes costs wall time, not
this).

If ``vllm`` is importable in ``$FAULTKIT_HOME/vllm-venv`` (default ``~/.cache/faultkit``),
``vllm bench serve`` runs A and B against the same server on the same core and both
figures are printed with the ratio ours / vLLM's. Otherwise that part says why it was
skipped. Likewise GuideLLM (``guidellm run``, concurrent profile, synthetic 32-token
prompts) from ``$FAULTKIT_HOME/guidellm-venv`` (``python bench/guidellm_peer.py
--install``), on the same core, interleaved in the same rounds. Usage:
``python bench/load_client.py [--quick] [--skip-vllm] [--skip-guidellm] [--json FILE]``;
``--json`` writes every figure, with ``ratio_default_req_per_s``,
``ratio_default_tok_per_s`` (best faultkit ÷ best vLLM, default mode, this run), the same
against GuideLLM (``ratio_default_req_per_s_vs_guidellm``, ``…_tok_per_s_vs_guidellm``) and
``ttft_stamp_error_ms`` (``p50``/``p99``/``max``, 256 streams paced at 20 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from guidellm_peer import guidellm_bench, guidellm_cli
from ttft_stamps import pooled, ttft_error, ttft_error_split
from vllm_peer import tokenizer_dir, vllm_bench, vllm_python

from faultkit.constants import faultkit_home
from faultkit.load import LoadGenerator, LoadProfile, Target, summarize
from faultkit.runtime.gcquiet import collector_frozen

CLIENT_CPU = 0


def _pick_server_cpu() -> int | None:
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if len(cpus) > 1 else None


SERVER_CPU = _pick_server_cpu()


def start_server() -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "faultkit.load.fakeserver", "--port", "0"]
    if SERVER_CPU is not None:
        cmd = ["taskset", "-c", str(SERVER_CPU), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}"


async def ours(
    url: str, model: str, concurrency: int, requests: int, tokens: int, reuse: bool = True
) -> dict[str, float]:
    profile = LoadProfile(
        reuse_connections=reuse,
        concurrency=concurrency,
        requests=requests,
        output_tokens=tokens,
        input_tokens=32,
        warmup=min(concurrency, 32),
    )
    cpu0 = time.process_time()
    result = await LoadGenerator(Target("bench", url, model), profile).run()
    cpu = time.process_time() - cpu0
    s = summarize(result.records, duration_s=result.duration_s)
    assert s.ok == requests, f"{requests - s.ok} requests failed: {s.errors_by_class}"
    assert not result.violations, result.violations
    return {"tok_s": s.output_token_rate_tps, "req_s": s.request_rate_rps, "dur_s": s.duration_s,
            "cpu_us_per_req": 1e6 * cpu / (requests + profile.warmup)}


def ours_frozen(*args: object) -> dict[str, float]:
    """``ours`` as ``faultkit load`` runs it: the collector frozen for the run."""
    with collector_frozen():
        return asyncio.run(ours(*args))  # type: ignore[arg-type]


INVALID: list[str] = []


def ours_round(label: str, *args: object) -> dict[str, float] | None:
    """One of faultkit's runs; a run with failed requests is not a figure: it is kept in
    ``invalid_rounds`` with its error classes (on a busy machine the client's own stalls
    show as ``client_stalled``), and that round's figure is left out."""
    try:
        return ours_frozen(*args)
    except AssertionError as exc:
        INVALID.append(f"{label}: {exc}")
        print(f"   ({label}: round left out: {exc})")
        return None


async def false_failures(url: str, model: str, requests: int, concurrency: int,
                         tokens: int) -> dict[str, object]:
    """faultkit's default mode against a server: how many requests failed, and why."""
    profile = LoadProfile(
        concurrency=concurrency, requests=requests, input_tokens=32, output_tokens=tokens
    )
    result = await LoadGenerator(Target("bench", url, model), profile).run()
    s = summarize(result.records, duration_s=result.duration_s)
    return {
        "requests": requests,
        "failed": requests - s.ok,
        "errors": dict(s.errors_by_class),
        "connections": result.connections.to_json() if result.connections else None,
    }


def start_llama_server() -> tuple[subprocess.Popen[str] | None, str]:
    """llama.cpp's server from ``$FAULTKIT_HOME`` on a free loopback port (None, why if absent)."""
    home = faultkit_home()
    binaries = sorted(home.glob("llama-server-*/llama-server"))
    models = sorted((home / "models").glob("*.gguf"))
    if not binaries or not models:
        return None, f"no llama-server binary or GGUF model under {home}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [str(binaries[-1]), "-m", str(models[0]), "--host", "127.0.0.1", "--port", str(port),
           "-c", "4096", "-np", "8", "-t", "1"]
    if SERVER_CPU is not None:
        cmd = ["taskset", "-c", str(SERVER_CPU), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    return None, "llama-server did not become healthy within 60 s"


def _fmt(values: list[float], unit: str) -> str:
    return f"best {max(values):,.0f} {unit}  median {statistics.median(values):,.0f} {unit}"


def _ratios(name: str, ours: list[float], peer: list[float]) -> dict[str, float]:
    """``ratio_default_<name>`` (best ÷ best) and ``…_median`` (median ÷ median)."""
    return {
        f"ratio_default_{name}": round(max(ours) / max(peer), 3),
        f"ratio_default_{name}_median": round(statistics.median(ours) / statistics.median(peer), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="faultkit load client capacity")
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best-of)")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--skip-guidellm", action="store_true")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--stamp-rounds", type=int, default=3, help="C: runs per client shape")
    parser.add_argument("--stamp-processes", type=int, default=4,
                        help="C: the client processes of the headline figure")
    args = parser.parse_args()
    all_cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {CLIENT_CPU})
    scale = 0.2 if args.quick else 1.0
    a = (32, int(640 * scale), 500)
    b = (64, int(10_000 * scale), 10)
    c = int(2048 * scale)
    python, why = (None, "--skip-vllm") if args.skip_vllm else vllm_python()
    tok = tokenizer_dir()
    guidellm, guidellm_why = (None, "--skip-guidellm") if args.skip_guidellm else guidellm_cli()
    if tok is None:
        no_tok = "no tokenizer under $FAULTKIT_HOME/models"
        python, why = (None, no_tok) if python is not None else (python, why)
        guidellm, guidellm_why = (None, no_tok) if guidellm is not None else (None, guidellm_why)
    server, url = start_server()
    keys = ("ours_a", "ours_b", "ours_b_fresh", "vllm_a", "vllm_b", "guidellm_a", "guidellm_b",
            "ours_b_cpu_us_per_req")
    results: dict[str, list[float]] = {k: [] for k in keys}
    out: dict[str, object] = {
        "machine": {"python": sys.version.split()[0], "cpus": os.cpu_count(),
                    "load_average_at_start": os.getloadavg()[0]},
        "vllm": why if python is not None else f"skipped: {why}",
        "guidellm": guidellm_why if guidellm is not None else f"skipped: {guidellm_why}",
    }
    try:
        print(
            f"server {url} (CPU {SERVER_CPU}), client on CPU {CLIENT_CPU}, "
            f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
        )
        if python is None:
            print(f"vllm bench serve: skipped ({why})")
        else:
            print(f"vllm bench serve: vllm {why}, tokenizer {tok}")
        print(f"guidellm: {guidellm_why}" if guidellm is not None
              else f"guidellm: skipped ({guidellm_why})")
        # Interleave the clients so that noise from a shared machine hits both alike.
        for _ in range(args.rounds):
            if (run_a := ours_round("A default", url, "burst", *a)) is not None:
                results["ours_a"].append(run_a["tok_s"])
            if (run_b := ours_round("B default", url, "burst", *b)) is not None:
                results["ours_b"].append(run_b["req_s"])
                results["ours_b_cpu_us_per_req"].append(run_b["cpu_us_per_req"])
            if (fresh := ours_round("B fresh", url, "burst", *b, False)) is not None:
                results["ours_b_fresh"].append(fresh["req_s"])
            if python is not None and tok is not None:
                results["vllm_a"].append(vllm_bench(python, tok, url, *a, cpu=CLIENT_CPU)["tok_s"])
                results["vllm_b"].append(vllm_bench(python, tok, url, *b, cpu=CLIENT_CPU)["req_s"])
            if guidellm is not None and tok is not None:
                results["guidellm_a"].append(
                    guidellm_bench(guidellm, tok, url, *a, cpu=CLIENT_CPU)["tok_s"])
                results["guidellm_b"].append(
                    guidellm_bench(guidellm, tok, url, *b, cpu=CLIENT_CPU)["req_s"])
        out["rounds"] = {k: v for k, v in results.items() if v}
        out["invalid_rounds"] = INVALID
        print(f"A  {a[0]} streams x {a[2]} tokens, {a[1]} requests, {args.rounds} rounds")
        print(f"   faultkit  {_fmt(results['ours_a'], 'tok/s')}   (default)")
        if results["vllm_a"]:
            ratio = max(results["ours_a"]) / max(results["vllm_a"])
            median = statistics.median(results["ours_a"]) / statistics.median(results["vllm_a"])
            out["ratio_default_tok_per_s"] = round(ratio, 3)
            out["ratio_default_tok_per_s_median"] = round(median, 3)
            print(f"   vllm      {_fmt(results['vllm_a'], 'tok/s')}   ratio (best) {ratio:.2f}x"
                  f"  (median) {median:.2f}x")
        if results["guidellm_a"]:
            out.update(_ratios("tok_per_s_vs_guidellm", results["ours_a"], results["guidellm_a"]))
            print(f"   guidellm  {_fmt(results['guidellm_a'], 'tok/s')}   ratio (best) "
                  f"{out['ratio_default_tok_per_s_vs_guidellm']:.2f}x  (median) "
                  f"{out['ratio_default_tok_per_s_vs_guidellm_median']:.2f}x")
        print(f"B  {b[0]} streams x {b[2]} tokens, {b[1]} requests, {args.rounds} rounds")
        print(f"   faultkit  {_fmt(results['ours_b'], 'req/s')}   (default: reuse, checked; "
              f"CPU {min(results['ours_b_cpu_us_per_req']):.0f} µs/request at best)")
        print(f"   faultkit  {_fmt(results['ours_b_fresh'], 'req/s')}   (--fresh-connections)")
        if results["vllm_b"]:
            best = max(results["vllm_b"])
            ratio = max(results["ours_b"]) / best
            ratio_fresh = max(results["ours_b_fresh"]) / best
            median = statistics.median(results["ours_b"]) / statistics.median(results["vllm_b"])
            out["ratio_default_req_per_s"] = round(ratio, 3)
            out["ratio_default_req_per_s_median"] = round(median, 3)
            out["ratio_fresh_req_per_s"] = round(ratio_fresh, 3)
            print(
                f"   vllm      {_fmt(results['vllm_b'], 'req/s')}   (keep-alive)   "
                f"ratio (best) {ratio:.2f}x default (median {median:.2f}x), "
                f"{ratio_fresh:.2f}x fresh connections"
            )
        if results["guidellm_b"]:
            out.update(_ratios("req_per_s_vs_guidellm", results["ours_b"], results["guidellm_b"]))
            print(f"   guidellm  {_fmt(results['guidellm_b'], 'req/s')}   ratio (best) "
                  f"{out['ratio_default_req_per_s_vs_guidellm']:.2f}x default (median "
                  f"{out['ratio_default_req_per_s_vs_guidellm_median']:.2f}x)")
        paced = "slow,delay=0.02"
        shapes: dict[str, list[dict[str, object]]] = {"one loop, client core": []}
        for n in (2, 3, 4):
            shapes[f"{n} processes"] = []
        for _ in range(args.stamp_rounds):  # interleaved, like A and B
            shapes["one loop, client core"].append(asyncio.run(ttft_error(url, paced, 256, c)))
            os.sched_setaffinity(0, all_cpus)  # the client processes may use every core
            try:
                for n in (2, 3, 4):
                    shapes[f"{n} processes"].append(ttft_error_split(url, paced, 256, c, n))
            finally:
                os.sched_setaffinity(0, {CLIENT_CPU})
        stamp = {label: pooled(rounds) for label, rounds in shapes.items()}
        for label, figures in stamp.items():
            per_round = figures["rounds"]  # pooled()'s figures of each round
            assert isinstance(per_round, list)
            cpu = statistics.median(float(r["cpu_s"]) for r in per_round)
            wait = statistics.median(float(r["wait_s"]) for r in per_round)
            print(
                f"C  TTFT timestamp error, 256 streams paced 20 ms, {label} "
                f"({args.stamp_rounds} x {c} req): p50 {figures['p50']:.2f} ms  p99 "
                f"{figures['p99']:.2f} ms  max {figures['max']:.2f} ms  (> 1 ms: "
                f"{figures['over_1ms']}; client CPU {cpu:.2f} s, waited for a core "
                f"{wait:.2f} s per run)"
            )
        headline = stamp[f"{args.stamp_processes} processes"]
        out["ttft_stamp_error_ms"] = {k: headline[k] for k in ("p50", "p99", "max")}
        out["ttft_stamp_error_processes"] = args.stamp_processes
        out["ttft_stamp_error_by_client"] = stamp
        zero = asyncio.run(ttft_error(url, "ok", 256, c))
        out["ttft_stamp_error_zero_latency_ms"] = {
            k: v for k, v in pooled([zero]).items() if k != "rounds"
        }
        print(f"C  zero latency, one loop: {out['ttft_stamp_error_zero_latency_ms']}")
        honesty: dict[str, object] = {}
        closing = asyncio.run(false_failures(url, "close_after", int(2000 * scale), 8, 24))
        honesty["fakeserver_close_after"] = closing
        print(f"D  false failures, server closing every streamed connection: "
              f"{closing['failed']} of {closing['requests']}  ({closing['connections']})")
        llama, llama_url = start_llama_server()
        if llama is None:
            honesty["llama_server"] = f"skipped: {llama_url}"
            print(f"D  llama.cpp server: skipped ({llama_url})")
        else:
            try:
                ours_llama = asyncio.run(false_failures(llama_url, "m", 400, 8, 24))
                on_llama: dict[str, object] = {"faultkit": ours_llama}
                line = f"faultkit {ours_llama['failed']} of 400 failed"
                if python is not None and tok is not None:
                    theirs = vllm_bench(python, tok, llama_url, 8, 400, 24, served_model="m",
                                        cpu=CLIENT_CPU)
                    on_llama["vllm_bench_failed"] = failed = 400 - int(theirs["completed"])
                    line += f", vllm bench serve {failed} of 400"
                if guidellm is not None and tok is not None:
                    peer = guidellm_bench(guidellm, tok, llama_url, 8, 400, 24, cpu=CLIENT_CPU)
                    on_llama["guidellm_failed"] = failed = 400 - int(peer["completed"])
                    line += f", guidellm {failed} of 400"
                honesty["llama_server"] = on_llama
                print(f"D  llama.cpp server (400 req, 8 streams, 32 in / 24 out): {line}")
            finally:
                llama.kill()
                llama.wait()
        out["honesty"] = honesty
    finally:
        server.kill()
        server.wait()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
