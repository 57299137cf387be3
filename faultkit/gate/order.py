"""The order of the gate's scenarios: what the config diff touches runs first.

A candidate is most likely broken where it differs from the config running now, and the
gate stops at its first scenario that does not pass (unless ``--full``). So the scenarios
that exercise what the diff touches go first, and a broken candidate is judged in the time
of one scenario rather than after the whole catalogue (docs/gate.md, "Scenario order"):

- context, KV cache, batching or memory (``--max-model-len``, ``--gpu-memory-utilization``,
  ``-c``, ``--cache-ram``, the container's memory limit, …) → limits, oom, soak, overload
  (the peak throughput);
- what starts and how it restarts (the image, the executable, the model, the restart
  policy) → kill, engine death;
- where it listens (``--port``, ``--host``) → partition.

A change no area claims (an engine flag not in :data:`RISK_AREAS`, an environment
variable) moves nothing: the scenarios it might touch keep the catalogue's order. Pure
functions over two serving configs; :func:`.run.run_gate` passes the order to the scenario
run (:mod:`.feed`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from faultkit.inventory import Inventory, Node
from faultkit.inventory.settings import ServingConfig

__all__ = ["RISK_AREAS", "RiskArea", "ScenarioOrder", "config_changes", "first_rank",
           "gate_order", "ordered", "scenario_order"]


@dataclass(frozen=True)
class RiskArea:
    """What a group of config changes puts at risk, and the scenarios that exercise it."""

    name: str
    #: scenario functions to run first when a change falls here, in this order
    scenarios: tuple[str, ...]
    #: engine flags (without their dashes; vLLM's, SGLang's and llama.cpp's spellings)
    flags: frozenset[str] = frozenset()
    #: serving-config fields (``faultkit.inventory.settings.ServingConfig``)
    fields: frozenset[str] = frozenset()


RISK_AREAS: tuple[RiskArea, ...] = (
    RiskArea(
        "context, KV cache, batching or memory",
        ("test_limits", "test_oom", "test_soak", "test_overload"),
        flags=frozenset({
            # vLLM
            "max-model-len", "gpu-memory-utilization", "enable-chunked-prefill",
            "no-enable-chunked-prefill", "max-num-seqs", "max-num-batched-tokens",
            "kv-cache-dtype", "block-size", "swap-space", "cpu-offload-gb",
            "kv-cache-memory", "kv-cache-memory-bytes", "num-gpu-blocks-override",
            "enable-prefix-caching",
            "no-enable-prefix-caching", "max-seq-len-to-capture", "dtype", "quantization",
            "tensor-parallel-size", "pipeline-parallel-size", "max-num-partial-prefills",
            # SGLang
            "context-length", "mem-fraction-static", "chunked-prefill-size",
            "max-running-requests", "max-total-tokens", "max-prefill-tokens", "page-size",
            "schedule-conservativeness",
            # llama.cpp
            "c", "ctx-size", "np", "parallel", "b", "batch-size", "ub", "ubatch-size",
            "cache-ram", "ctk", "cache-type-k", "ctv", "cache-type-v", "ngl",
            "n-gpu-layers", "gpu-layers", "kv-unified", "cont-batching", "no-cont-batching",
            "fa", "flash-attn",
        }),
        fields=frozenset({"memory", "shm_size"}),
    ),
    RiskArea(
        "what starts and how it restarts",
        ("test_kill", "test_engine_death"),
        flags=frozenset({"model", "m", "served-model-name", "tokenizer", "model-path"}),
        fields=frozenset({"image", "entrypoint", "restart", "restart_max_retries"}),
    ),
    RiskArea(
        "where it listens",
        ("test_partition",),
        flags=frozenset({"port", "host"}),
    ),
)

#: serving-config fields that do not change how the node serves (the harness's own)
_NOT_SERVING = frozenset({"description", "ready_timeout_s", "apply", "rollback"})


@dataclass(frozen=True)
class ScenarioOrder:
    """Which scenarios run first, and the changes that put them there."""

    #: scenario functions that run first, in order; the rest keep the catalogue's order
    first: tuple[str, ...] = ()
    #: each risk area the diff touches, with the changes that fall in it
    touched: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: changes no area claims
    unknown: tuple[str, ...] = ()

    def why(self) -> str:
        """One sentence: what runs first and why, or why the catalogue's order stands."""
        if not self.first:
            if self.unknown:
                return ("the catalogue's order: no change of the diff has a known risk "
                        f"({', '.join(self.unknown)})")
            return "the catalogue's order: the configs do not differ in how they serve"
        areas = "; ".join(f"{area} ({', '.join(changes)})"
                          for area, changes in self.touched.items())
        return f"{', '.join(self.first)} first: the diff touches {areas}"

    def to_json(self) -> dict[str, object]:
        return {"first": list(self.first), "touched": {k: list(v) for k, v in
                                                      self.touched.items()},
                "unknown": list(self.unknown), "why": self.why()}


def config_changes(current: ServingConfig | None, candidate: ServingConfig) -> list[str]:
    """What differs between the two configs, as names: an engine flag as it is spelled
    (``--max-model-len``, ``-c``) when it is added, removed or given another value,
    ``entrypoint`` for the executable, ``env FOO`` for an environment variable, the field's
    name for any other serving field. With the current config unknown, the candidate's
    entrypoint and every flag count as changed."""
    if current is None:
        return ["entrypoint", *_flags(candidate.command)[1]]
    changes = []
    entry_before, flags_before = _flags(current.command)
    entry_after, flags_after = _flags(candidate.command)
    if entry_before != entry_after:
        changes.append("entrypoint")
    changes += [name for name in sorted(flags_before.keys() | flags_after.keys(),
                                        key=lambda n: n.lstrip("-"))
                if flags_before.get(name) != flags_after.get(name)]
    changes += [f"env {key}" for key in sorted(current.env.keys() | candidate.env.keys())
                if current.env.get(key) != candidate.env.get(key)]
    before, after = current.model_dump(), candidate.model_dump()
    changes += [name for name in before if name not in ("command", "env", *_NOT_SERVING)
                and before[name] != after[name]]
    return changes


def gate_order(inventory: Inventory, node: Node, candidate: str) -> ScenarioOrder:
    """The scenario order of a gate of ``candidate`` on ``node``: from the diff between the
    config the node serves now (unknown: every change) and the candidate."""
    current = (inventory.serving_config(node.serving_config) if node.serving_config
               else None)
    return scenario_order(config_changes(current, inventory.serving_config(candidate)))


def scenario_order(changes: Iterable[str]) -> ScenarioOrder:
    """The scenario order for a diff of ``changes`` (:func:`config_changes`): the scenarios
    of every area a change falls in, in :data:`RISK_AREAS`' order."""
    touched: dict[str, list[str]] = {}
    unknown = []
    for change in changes:
        area = _area_of(change)
        if area is None:
            unknown.append(change)
        else:
            touched.setdefault(area.name, []).append(change)
    first: list[str] = []
    for area in RISK_AREAS:
        if area.name in touched:
            first += [s for s in area.scenarios if s not in first]
    ordered_touched = {a.name: tuple(touched[a.name]) for a in RISK_AREAS if a.name in touched}
    return ScenarioOrder(tuple(first), ordered_touched, tuple(unknown))


def first_rank(first: Sequence[str]) -> Callable[[str], int]:
    """A sort key on pytest test names (``test_kill[n]``): a function in ``first`` ranks by
    its place there, every other one after them all (so a stable sort keeps their order)."""
    rank = {function: i for i, function in enumerate(first)}
    return lambda name: rank.get(name.split("[", 1)[0], len(rank))


def ordered(names: Sequence[str], first: Sequence[str]) -> list[str]:
    """``names`` with those whose function is in ``first`` moved ahead in that order; the
    others keep their order."""
    return sorted(names, key=first_rank(first))


def _area_of(change: str) -> RiskArea | None:
    flag = change.lstrip("-") if change.startswith("-") else None
    for area in RISK_AREAS:
        if (change in area.fields) if flag is None else (flag in area.flags):
            return area
    return None


def _flags(command: Sequence[str]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """A command's entrypoint (the executable; for ``python -m module``, the module too)
    and its flags as spelled, each with the values given to it (a flag given twice keeps
    both)."""
    tokens = list(command)
    cut = 3 if (len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1].startswith("python")
                and tokens[1] == "-m") else min(1, len(tokens))
    while cut < len(tokens) and not _is_flag(tokens[cut]):
        cut += 1  # positional arguments before the first flag belong to the entrypoint
    entry, rest = tuple(tokens[:cut]), tokens[cut:]
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for token in rest:
        if _is_flag(token):
            name, eq, value = token.partition("=")
            flags.setdefault(name, [])
            current = None if eq else name
            if eq:
                flags[name].append(value)
        elif current is not None:
            flags[current].append(token)
            current = None
    return entry, {name: tuple(values) for name, values in flags.items()}


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False  # a negative number is a value
