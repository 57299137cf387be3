"""The second peer of the load-client bench: GuideLLM (``guidellm run``) from a virtualenv
of its own (``$FAULTKIT_HOME/guidellm-venv``), run against the same server on the same
client core as faultkit and ``vllm bench serve``. Used by ``bench/load_client.py``.

GuideLLM pulls in torch; the CUDA build PyPI serves by default is gigabytes, so the
virtualenv is made with the CPU build that pip's configured find-links hold (the one the
lab's vLLM uses, ``testbed/vllm_node.py``): ``python bench/guidellm_peer.py --install``.

Its figures are its own JSON report's: completed requests and output tokens over the
benchmark's ``duration`` (GuideLLM's own clock, start-up and data generation excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from faultkit.constants import faultkit_home

__all__ = ["GUIDELLM_REQUIREMENT", "guidellm_bench", "guidellm_cli"]

#: the version measured in docs/load-client.md's table
GUIDELLM_REQUIREMENT = "guidellm==0.8.1"
#: the CPU torch the lab's vLLM uses; pip finds it through its configured find-links
TORCH_REQUIREMENT = "torch==2.13.0+cpu"


def venv_dir() -> Path:
    return faultkit_home() / "guidellm-venv"


def guidellm_cli() -> tuple[Path | None, str]:
    """The ``guidellm`` of the virtualenv and its version; (None, why) when there is none."""
    cli = venv_dir() / "bin" / "guidellm"
    if not cli.exists():
        return None, (f"no GuideLLM at {cli} (install it: python bench/guidellm_peer.py "
                      "--install)")
    check = subprocess.run([str(cli), "--version"], capture_output=True, text=True,
                           timeout=300, check=False)
    if check.returncode != 0:
        return None, f"guidellm --version failed: {check.stderr.strip().splitlines()[-1:]}"
    return cli, check.stdout.strip().rsplit(" ", 1)[-1]


def install() -> None:
    """Make the virtualenv: the CPU torch first, so that GuideLLM's ``torch`` requirement
    is met without the CUDA build."""
    venv = venv_dir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "--quiet"]
    subprocess.run([*pip, TORCH_REQUIREMENT, GUIDELLM_REQUIREMENT], check=True)
    print(f"GuideLLM installed in {venv}")


def guidellm_bench(
    cli: Path,
    tok: Path,
    url: str,
    concurrency: int,
    requests: int,
    tokens: int,
    *,
    cpu: int,
) -> dict[str, float]:
    """``guidellm run`` at ``concurrency`` streams for ``requests`` requests (synthetic
    32-token prompts, ``tokens`` out) against ``url`` from CPU ``cpu``: output tokens/s,
    requests/s, its duration, completed and errored requests."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "guidellm.json"
        cmd = [
            "taskset", "-c", str(cpu), str(cli), "run",
            "--backend", f"kind=openai_http,target={url},model={tok}",
            "--profile", f"kind=concurrent,streams={concurrency}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={tokens}",
            "--output", f"kind=json,path={report}",
            "--disable-console",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                              check=False, cwd=tmp)
        if proc.returncode != 0 or not report.exists():
            raise RuntimeError(f"guidellm run failed: {(proc.stderr or proc.stdout)[-800:]}")
        return _figures(json.loads(report.read_text()))


def _figures(report: dict[str, Any]) -> dict[str, float]:
    """Rates from the requests its metrics kept (it may leave one out of them); completed
    and errored from its scheduler, which counts every request it made."""
    bench = report["benchmarks"][0]
    measured = bench["metrics"]["request_totals"]
    made = bench["scheduler_metrics"]["requests_made"]
    output_tokens = bench["metrics"]["output_token_count"]["successful"]["total_sum"]
    duration = float(bench["duration"])
    return {
        "tok_s": float(output_tokens) / duration,
        "req_s": float(measured["successful"]) / duration,
        "dur_s": duration,
        "completed": float(made["successful"]),
        "errored": float(made["errored"]) + float(made["incomplete"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="GuideLLM, the load-client bench's peer")
    parser.add_argument("--install", action="store_true",
                        help=f"make {venv_dir()} ({GUIDELLM_REQUIREMENT}, {TORCH_REQUIREMENT})")
    args = parser.parse_args()
    if args.install:
        install()
    cli, version = guidellm_cli()
    print(f"guidellm: {version if cli else 'missing'} ({cli or version})")


if __name__ == "__main__":
    main()
