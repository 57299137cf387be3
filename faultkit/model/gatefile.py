"""``gate.json``, a gate directory's record of what ``faultkit gate`` decided
(docs/run-directory.md, "The gate directory"); read as tolerantly as the run models."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faultkit.model.jsonvalues import lines, number, object_of, objects_of, text

__all__ = ["GateResult"]


@dataclass(slots=True)
class GateResult:
    """``gate.json``: what ``faultkit gate`` decided and the evidence it decided on
    (docs/run-directory.md, "The gate directory").

    The gate fills it in as it goes (it is written once, at the end); readers get it from
    :meth:`from_json`, which is tolerant like the run models: a missing or wrongly typed
    value reads as its default and the object as written stays in ``fields``.
    ``decision`` is ``"pass"`` or ``"fail"`` (``None``: the gate did not get that far).
    ``scenarios`` are ``ScenarioOutcome.to_json()`` rows; ``rollout`` the rollout fault's
    result; ``steady_state`` the steady-state phase's (``SteadyPhase.to_json()``).
    """

    node: str | None = None
    candidate: str | None = None
    current: str | None = None
    config_diff: list[str] = field(default_factory=list)
    decision: str | None = None
    why: str | None = None
    not_passed: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    #: the order the scenarios ran in (``faultkit.gate.order.ScenarioOrder.to_json()``) and
    #: whether the gate stopped at its first scenario that did not pass:
    #: ``{"first", "touched", "unknown", "why", "stop_at_first"}``
    order: dict[str, Any] | None = None
    #: the scenarios collected and never run, and why (``NotRun.to_json()``: name, why, line)
    not_run: list[dict[str, Any]] = field(default_factory=list)
    #: scenarios run a second time, once, because their first run was INCONCLUSIVE for the
    #: load client's stall: ``{"name", "why", "first"}`` (``first``: that outcome's row)
    reruns: list[dict[str, Any]] = field(default_factory=list)
    rollout: dict[str, Any] = field(default_factory=dict)
    steady_state: dict[str, Any] | None = None
    #: the current config's earlier runs of the gate scenarios and the candidate's figure
    #: regressions against them (``faultkit.gate.baseline``): ``{"dir", "runs":
    #: {test: Baseline}, "regressions": [FigureRegression], "tolerances": {figure: text}}``;
    #: ``None`` when no scenario ran
    baseline: dict[str, Any] | None = None
    #: a gate across a pool (``--pool``): one entry per node, the gate's own first —
    #: ``{"node", "rollout", "steady_state", "scenarios": [pytest ids], "junit_xml"}``;
    #: empty for a gate on one node
    pool: list[dict[str, Any]] = field(default_factory=list)
    promoted: bool = False
    rolled_back: bool = False
    junit_xml: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.decision == "pass"

    def fail(self, why: str) -> None:
        """Decide FAIL, for ``why``."""
        self.decision, self.why = "fail", why

    def to_json(self) -> dict[str, Any]:
        """The keys as read (``fields``) under the typed values."""
        out = dict(self.fields)
        for name in _GATE_KEYS:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: Any) -> GateResult:
        if not isinstance(data, dict):
            return cls()
        steady = data.get("steady_state")
        return cls(
            node=text(data.get("node")),
            candidate=text(data.get("candidate")),
            current=text(data.get("current")),
            config_diff=lines(data.get("config_diff")),
            decision=text(data.get("decision")),
            why=text(data.get("why")),
            not_passed=lines(data.get("not_passed")),
            accepted=lines(data.get("accepted")),
            scenarios=objects_of(data.get("scenarios")),
            order=object_of(data.get("order")) or None,
            not_run=objects_of(data.get("not_run")),
            reruns=objects_of(data.get("reruns")),
            rollout=object_of(data.get("rollout")),
            steady_state=steady if isinstance(steady, dict) else None,
            baseline=object_of(data.get("baseline")) or None,
            pool=objects_of(data.get("pool")),
            promoted=data.get("promoted") is True,
            rolled_back=data.get("rolled_back") is True,
            junit_xml=text(data.get("junit_xml")),
            started_at=number(data.get("started_at")),
            finished_at=number(data.get("finished_at")),
            fields=dict(data),
        )


#: the typed keys of ``gate.json``
_GATE_KEYS = tuple(name for name in GateResult.__dataclass_fields__ if name != "fields")
