"""What every diagnosis rule shares: the :class:`Diagnosis` it returns, the engine's words
it looks for, and how it cites the run's evidence (times from the effect, Docker's deaths,
the client's drops)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from reports.evidence import ContainerFacts, Death
from reports.load import RunData

DROP_CLASSES = frozenset(
    {
        "refused",
        "reset",
        "timeout_connect",
        "timeout_first_token",
        "timeout_total",
        "stream_error",
        "truncated",
    }
)
#: log lines that are routine traffic, never the engine's words about a failure
ROUTINE_LOG_RE = re.compile(
    r'"(?:GET|POST) /(?:health|metrics|v1/models|ready)|\b200 OK\b|GET /health'
    # an answered request in an access log (uvicorn: vLLM, SGLang, the simulator)
    r'|"POST /v1/(?:chat/)?completions HTTP/[\d.]+" 200\b'
    # llama.cpp's per-request slot lines and vLLM's periodic throughput line
    r"|\bslot\s+(?:print_timing|release|launch_slot_|get_availabl)|Avg prompt throughput",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """One conclusion: ``key`` indexes the prevention rules; ``evidence`` is why."""

    key: str
    title: str
    evidence: tuple[str, ...]
    #: the config value, limit or gap behind the immediate cause, where the evidence shows it
    underlying: str = ""


UNDIAGNOSED_KEY = "undiagnosed"

GPU_OOM_RE = re.compile(r"CUDA out of memory|OutOfMemoryError", re.IGNORECASE)
CONTEXT_RE = re.compile(
    r"maximum context length|maximum model length|exceed_context_size_error|"
    r"exceeds the available context size|longer than the model's context length",
    re.IGNORECASE,
)
STARTUP_KV_RE = re.compile(
    r"KV cache is needed|(?:ValueError|Error).*max_model_len|max_model_len.*(?:too large|"
    r"larger than|exceeds|cannot)|max seq len",
    re.IGNORECASE,
)


def params_of(data: RunData) -> dict[str, object]:
    """The injected fault's parameters as run.json holds them ({} when none)."""
    return dict(data.run.fault.params) if data.run.fault is not None else {}


def rel(data: RunData, t: float) -> str:
    """``t`` (epoch seconds) as a report cites it: ``+1.2 s`` from the effect."""
    t0 = data.t0
    return f"t={t:.3f}" if t0 is None else f"{t - t0:+.1f} s"


def telling_lines(log: str | None, limit: int = 5) -> list[str]:
    """The log's last lines that are not routine traffic (health checks, ``200 OK``)."""
    if not log:
        return []
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return [ln for ln in lines if not ROUTINE_LOG_RE.search(ln)][-limit:]


def log_lines(data: RunData, pattern: re.Pattern[str]) -> list[str]:
    """The lines of the container's log (this run's) that match ``pattern``."""
    tail = data.container.log_tail
    if tail is None:
        return []
    return [line.strip() for line in tail.splitlines() if pattern.search(line)]


def deaths_words(data: RunData, deaths: tuple[Death, ...]) -> list[str]:
    """Each death as one line of evidence: when, its exit code, who ended it."""
    return [d.words(rel(data, d.t)) for d in deaths]


#: a rule: the run and its container facts → a conclusion, or None when it does not match
Rule = Callable[[RunData, ContainerFacts], "Diagnosis | None"]


def drops(data: RunData) -> str:
    """The client drops (by class) of requests overlapping the fault, ``""`` when none."""
    m = data.measurement
    if m is None:
        return ""
    end = m.t_revert if m.t_revert is not None else m.t_window_end
    dropped = Counter(
        r.error_class
        for r in data.ledger
        if r.status != "ok" and r.error_class in DROP_CLASSES
        and r.t_invoke <= end and r.t_end >= m.t_effect
    )
    return ", ".join(f"{c} {n}" for c, n in sorted(dropped.items()))
