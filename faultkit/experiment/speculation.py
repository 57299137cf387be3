"""The speculative-decoding check: a config that turns speculation on, off or changes it
(its serving config's ``speculative`` differs from the other's) is measured per workload
class against the other config, and loses when the node's declared workload (inventory
``workload``) is served slower (docs/gate.md, "Speculative decoding"). The gate runs it
beside its steady state (:mod:`faultkit.gate.steady`); the ``test_speculative`` scenario
runs it under the node's own background load. It lives in the runner's layer, below both.

Each class runs as a closed loop of :data:`USERS` users for the phase's seconds on each
config — the current one first, then the candidate — and ``slo.speculation.judge_class``
compares the candidate's per-request TPOTs with the current config's: faster, slower or no
difference within noise. Acceptance (accepted / drafted tokens) comes from the engine's own
counters, read from its ``/metrics`` before and after each class: it explains a verdict,
never makes one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from faultkit.inventory import Inventory, Node
from faultkit.load.generator import LoadGenerator
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.prompts import WORKLOADS
from slo.speculation import (
    ClassFigures,
    ClassVerdict,
    class_figures,
    combined,
    judge_class,
)

__all__ = [
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "USERS",
    "SpeculationCheck",
    "class_seconds",
    "measure_class",
    "spec_counters",
    "speculation_check",
]

#: the closed loop each class runs: users, and the shape of their requests
USERS = 4
INPUT_TOKENS = 256
OUTPUT_TOKENS = 64
#: the engines' spec-decode counters (vLLM V1)
DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def class_seconds(steady_s: float) -> float:
    """How long each class runs on each config: half the steady state, at least 5 s."""
    return max(5.0, steady_s / 2)


def speculation_check(inventory: Inventory, node: Node, config: str, steady_s: float,
                      say: Callable[[str], None]) -> SpeculationCheck | None:
    """The check for gating ``config`` on ``node``, or ``None``: the candidate's
    ``speculative`` is the current config's, or the steady state is off (``--steady-s 0``,
    and the check with it: both measure the configs as users meet them)."""
    change = inventory.speculation_change(node, config)
    if steady_s <= 0 or change is None:
        return None
    return SpeculationCheck(node, class_seconds(steady_s), change.current, change.candidate,
                            say)


async def spec_counters(base_url: str) -> tuple[float | None, float | None]:
    """The drafted and accepted token counters of the engine at ``base_url``, from its
    ``/metrics`` (``None``: not exposed — no speculation, or an engine without them)."""
    try:
        async with httpx.AsyncClient() as client:
            text = (await client.get(base_url.rstrip("/") + "/metrics", timeout=5)).text
    except httpx.HTTPError:
        return None, None
    values: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in (DRAFTED, ACCEPTED):
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return values.get(DRAFTED), values.get(ACCEPTED)


async def measure_class(target: Target, workload: str, seconds: float, *, users: int = USERS,
                        input_tokens: int = INPUT_TOKENS, output_tokens: int = OUTPUT_TOKENS,
                        id_prefix: str = "spec") -> ClassFigures:
    """One workload class on the engine serving ``target`` now: ``users`` in a closed loop
    for ``seconds``, with its drafted and accepted tokens counted over the run."""
    profile = LoadProfile(concurrency=users, duration_s=seconds, input_tokens=input_tokens,
                          output_tokens=output_tokens, workload=workload, warmup=users)
    drafted0, accepted0 = await spec_counters(target.base_url)
    result = await LoadGenerator(target, profile, id_prefix=f"{id_prefix}-{workload}").run()
    drafted1, accepted1 = await spec_counters(target.base_url)
    drafted = None if drafted0 is None or drafted1 is None else drafted1 - drafted0
    accepted = None if accepted0 is None or accepted1 is None else accepted1 - accepted0
    return class_figures(workload, result.records, seconds, drafted, accepted)


@dataclass
class SpeculationCheck:
    """Per-class figures of the current config and the candidate, and the judgement on the
    node's declared workload. ``say`` prints a progress line (the gate's)."""

    node: Node
    seconds: float
    current_spec: str | None
    candidate_spec: str | None
    say: Callable[[str], None]
    #: each request's answer length (a shorter answer: more timed requests a second)
    output_tokens: int = OUTPUT_TOKENS
    current: dict[str, ClassFigures] = field(default_factory=dict)
    candidate: dict[str, ClassFigures] = field(default_factory=dict)

    async def measure(self, side: str) -> None:
        """Run every class on the config serving now (``side``: current|candidate)."""
        into = self.current if side == "current" else self.candidate
        for workload in WORKLOADS:
            into[workload] = await measure_class(Target.from_node(self.node), workload,
                                                 self.seconds, output_tokens=self.output_tokens)
            f = into[workload]
            rate = "" if f.acceptance_rate is None else f", {f.acceptance_rate:.0%} accepted"
            self.say(f"speculation check, {side}, {workload}: {f.ok} requests, TPOT p50 "
                     f"{(f.tpot_p50_s or 0) * 1000:.1f} ms{rate}")

    def verdicts(self) -> dict[str, ClassVerdict]:
        """The candidate against the current config, per class and for the mix."""
        if set(self.current) != set(WORKLOADS) or set(self.candidate) != set(WORKLOADS):
            return {}
        out = {w: judge_class(self.candidate[w], self.current[w]) for w in WORKLOADS}
        out["mixed"] = judge_class(combined("mixed", list(self.candidate.values())),
                                   combined("mixed", list(self.current.values())))
        return out

    def failure(self) -> str | None:
        """The gate's ``why`` when the declared workload is served slower, else ``None``."""
        verdict = self.verdicts().get(self.node.workload)
        if verdict is None or verdict.outcome != "loses":
            return None
        return (f"speculative decoding {self._change()}: the node's {self.node.workload} "
                f"workload is served slower — {verdict.why}")

    def _change(self) -> str:
        before, after = self.current_spec or "off", self.candidate_spec or "off"
        return f"changes from {before!r} to {after!r}"

    def to_json(self) -> dict[str, Any]:
        """gate.json ``steady_state.speculation``."""
        verdicts = self.verdicts()
        return {
            "current": self.current_spec, "candidate": self.candidate_spec,
            "workload": self.node.workload, "seconds": self.seconds,
            "users": USERS, "input_tokens": INPUT_TOKENS, "output_tokens": self.output_tokens,
            "classes": [
                {"workload": w,
                 "current": self.current[w].to_json() if w in self.current else None,
                 "candidate": self.candidate[w].to_json() if w in self.candidate else None,
                 "verdict": verdicts[w].to_json() if w in verdicts else None}
                for w in (*WORKLOADS, "mixed")],
            "failure": self.failure(),
        }
