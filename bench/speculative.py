"""Speculative decoding per workload class: TPOT, output tokens/s and acceptance with and
without speculation, and the verdict per class (``slo.speculation``).

Each workload class (free, extractive) runs as a closed loop of ``--concurrency`` users
for ``--seconds`` against a server without speculation and one with it, the two arms
interleaved class by class in one run (the machine is shared: compare within a run). The
acceptance rate comes from the engine's own counters (vLLM's
``vllm:spec_decode_num_{draft,accepted}_tokens_total``), read from its ``/metrics`` before
and after each phase.

By default it starts two simulator nodes on loopback ports (``python -m
testbed.simnode``, the second with ``--num-speculative-tokens K``); ``--without URL
--with URL --model NAME`` measures two servers of your own instead (e.g. vLLM without and
with ``--speculative-config '{"method": "ngram", ...}'``).

    .venv/bin/python bench/speculative.py [--seconds 15] [--concurrency 4] [--k 4] \\
        [--json bench/results/speculative.json]

It prints one line per class and writes JSON; figures, not assertions
(docs/slo.md, "Speculative decoding, per workload").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from faultkit.experiment.speculation import measure_class
from faultkit.load import Target
from faultkit.load.prompts import WORKLOADS
from slo.speculation import ClassFigures, judge_class


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def simulators(k: int, personality: str) -> Iterator[tuple[str, str, str]]:
    """Two simulator nodes, without and with speculation; yields their URLs and model."""
    procs: list[subprocess.Popen[bytes]] = []
    urls = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for drafts in (0, k):
                port = _free_port()
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "testbed.simnode", "--personality", personality,
                     "--port", str(port), "--model", "sim-bench", "--load-seconds", "0",
                     "--num-speculative-tokens", str(drafts),
                     "--truth-file", f"{tmp}/truth-{drafts}.jsonl"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                urls.append(f"http://127.0.0.1:{port}")
            for url in urls:
                _wait_ready(url)
            yield urls[0], urls[1], "sim-bench"
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(15)


def _wait_ready(url: str, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"{url} did not become ready within {within_s:g} s")


async def phase(url: str, model: str, workload: str, args: argparse.Namespace) -> ClassFigures:
    """One class on one server: a closed loop for ``args.seconds``."""
    return await measure_class(Target("bench", url, model), workload, args.seconds,
                               users=args.concurrency, input_tokens=args.input_tokens,
                               output_tokens=args.output_tokens, id_prefix="bench")


def _row(label: str, f: ClassFigures) -> dict[str, Any]:
    return {"arm": label, "requests": f.requests, "ok": f.ok, "tpot_p50_s": f.tpot_p50_s,
            "output_tokens_per_s": f.output_tokens_per_s, "acceptance_rate": f.acceptance_rate,
            "drafted_tokens": f.drafted_tokens, "accepted_tokens": f.accepted_tokens}


async def measure(without: str, with_spec: str, model: str,
                  args: argparse.Namespace) -> dict[str, Any]:
    classes = []
    for workload in WORKLOADS:
        off = await phase(without, model, workload, args)
        on = await phase(with_spec, model, workload, args)
        verdict = judge_class(on, off)
        classes.append({"workload": workload, "without": _row("without", off),
                        "with": _row("with", on), "verdict": verdict.to_json()})
        rate = "—" if on.acceptance_rate is None else f"{on.acceptance_rate:.0%}"
        print(f"{workload:<11} TPOT p50 {off.tpot_p50_s or 0:.4f} s → {on.tpot_p50_s or 0:.4f} s, "
              f"output {off.output_tokens_per_s or 0:.0f} → {on.output_tokens_per_s or 0:.0f} "
              f"tok/s, acceptance {rate}: speculation {verdict.outcome} ({verdict.why})",
              flush=True)
    return {"classes": classes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4, help="simulator drafts per step")
    parser.add_argument("--personality", choices=["vllm"], default="vllm")
    parser.add_argument("--without", help="URL of a server without speculation")
    parser.add_argument("--with", dest="with_spec", help="URL of the same server with it")
    parser.add_argument("--model", help="the model both serve (with --without/--with)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    setup: dict[str, Any] = {k: v for k, v in vars(args).items() if k != "json"}
    if args.without or args.with_spec:
        if not (args.without and args.with_spec and args.model):
            parser.error("--without, --with and --model go together")
        out = asyncio.run(measure(args.without, args.with_spec, args.model, args))
    else:
        with simulators(args.k, args.personality) as (without, with_spec, model):
            out = asyncio.run(measure(without, with_spec, model, args))
    out = {"setup": setup, **out}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
