"""The peer of the load-client bench: ``vllm bench serve`` from the lab's vLLM virtualenv
(``$FAULTKIT_HOME/vllm-venv``), run against the same server on the same client core.
Used by ``bench/load_client.py``."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from faultkit.constants import faultkit_home

__all__ = ["tokenizer_dir", "vllm_bench", "vllm_python"]


def vllm_python() -> tuple[Path | None, str]:
    """The python of ``$FAULTKIT_HOME/vllm-venv`` and its vLLM version; (None, why) when
    there is none or vLLM does not import there."""
    home = faultkit_home()
    python = home / "vllm-venv" / "bin" / "python"
    if not python.exists():
        return None, f"no virtualenv at {python.parent.parent}"
    check = subprocess.run(
        [str(python), "-c", "import vllm; print(vllm.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check.returncode != 0:
        return None, f"vllm is not importable there: {check.stderr.strip().splitlines()[-1:]}"
    return python, check.stdout.strip()


def tokenizer_dir() -> Path | None:
    home = faultkit_home()
    for candidate in sorted((home / "models").glob("*/tokenizer.json")):
        return candidate.parent
    return None


def vllm_bench(
    python: Path,
    tok: Path,
    url: str,
    concurrency: int,
    requests: int,
    tokens: int,
    served_model: str = "burst",
    *,
    cpu: int,
) -> dict[str, float]:
    """``vllm bench serve`` (random 32-token prompts, ``tokens`` out, ``--ignore-eos``)
    against ``url`` from CPU ``cpu``: its output tokens/s, requests/s, duration and
    completed requests."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "taskset",
            "-c",
            str(cpu),
            str(python),
            "-m",
            "vllm.entrypoints.cli.main",
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--base-url",
            url,
            "--endpoint",
            "/v1/chat/completions",
            "--model",
            str(tok),
            "--served-model-name",
            served_model,
            "--tokenizer",
            str(tok),
            "--dataset-name",
            "random",
            "--random-input-len",
            "32",
            "--random-output-len",
            str(tokens),
            "--num-prompts",
            str(requests),
            "--max-concurrency",
            str(concurrency),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--num-warmups",
            str(min(concurrency, 32)),
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            tmp,
            "--result-filename",
            "r.json",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=900, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed: {proc.stderr[-800:]}")
        data = json.loads((Path(tmp) / "r.json").read_text())
    return {
        "tok_s": float(data["output_throughput"]),
        "req_s": float(data["request_throughput"]),
        "dur_s": float(data["duration"]),
        "completed": float(data["completed"]),
    }
