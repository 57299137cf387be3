"""What measurement and judgement produce: :class:`Measurement` and :class:`Verdict`
(defined in :mod:`slo.verdict`, re-exported here).

These are the contract between ``slo`` (which computes them), ``reports`` (which renders
them) and the run directory (``measurement.json`` / ``verdict.json``). All times are Unix
epoch seconds; all durations are seconds. ``None`` means "did not happen in the window"
(e.g. not detected, not recovered) and is a finding, not an error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# CheckResult and Verdict live in slo.verdict; re-exported for existing imports
from faultkit.model.windows import WindowSLIs as WindowSLIs
from faultkit.rundir import RunDir
from slo.paging import Paging
from slo.verdict import CheckResult as CheckResult
from slo.verdict import Verdict as Verdict

#: the monitoring signal that detected a fault (the harness's probe is not one)
DetectSignal = Literal["alert", "up"]


@dataclass(frozen=True, slots=True)
class Measurement:
    """Detection, recovery and loss for one fault (definitions: docs/definitions.md).

    Every duration counts from ``t_effect``, the moment the fault took effect, fixed by the
    best evidence available (``effect_evidence``: ``observed`` > ``docker_event`` > ``mechanism`` >
    ``act`` > ``call``; ``effect_detail`` says which event). No duration is negative.

    - detection_s = t_detect − t_effect, by *monitoring* only (``detect_signal``: an
      ``alert`` firing, else ``up`` == 0). The harness's own readiness probe is a figure
      (``probe_detection_s``), never detection.
    - recovery_s = t_recovered − t_effect; recovery_after_revert_s = t_recovered − t_revert
      (negative: the node was back before the revert, which reports phrase as such).
    - lost = requests *scheduled* in [t_effect, t_recovered] (or in flight at t_effect)
      whose status is fail/unknown, plus client-shed arrivals, by error class; clean
      rejections (4xx/429/503 with an OpenAI-style error body) are in ``lost_by_class``
      and also summed in ``clean_rejections``.
    - slow_total = requests in the same span that succeeded but whose user-facing TTFT
      (from the scheduled arrival) exceeded the objective; ``affected_total`` = lost + slow.
    - harness_intervened: what the harness had to do to bring the node back (e.g. start a
      crashed container its restart policy left down). Non-empty ⇒ not the system's own
      recovery.
    - inconclusive: evidence that was missing (Prometheus down, no proof the fault took
      effect, no steady state, client exhaustion, clock skew). Non-empty ⇒ INCONCLUSIVE.
    """

    node: str
    t_effect: float
    t_revert: float | None
    t_window_end: float
    effect_evidence: str = "call"
    effect_detail: str = ""
    t_impact: float | None = None
    t_detect: float | None = None
    detect_signal: DetectSignal | None = None
    detect_detail: str | None = None
    detection_s: float | None = None
    #: first time each signal (alert / up / probe) showed the fault, seconds after t_effect
    detection_by_signal_s: dict[str, float] = field(default_factory=dict)
    probe_detection_s: float | None = None
    t_recovered: float | None = None
    recovery_s: float | None = None
    recovery_after_revert_s: float | None = None
    lost_total: int = 0
    lost_by_class: dict[str, int] = field(default_factory=dict)
    clean_rejections: int = 0
    slow_total: int = 0
    affected_total: int = 0
    in_flight_at_effect: int = 0
    requests_total: int = 0
    #: requests arriving from t_effect to the end of the recovery stretch (t_recovered +
    #: recovery_hold_s, else the window's end) that the client sent ``LATE_CLIENT_S`` (0.5 s)
    #: or more after their users arrived: its own event loop was stalled (a starved
    #: harness), so the run is INCONCLUSIVE
    sent_late: int = 0
    slis: dict[str, WindowSLIs] = field(default_factory=dict)
    server_cross_check: dict[str, Any] | None = None
    harness_intervened: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: detection to the page through Alertmanager (``None``: no Alertmanager watched it)
    paging: Paging | None = None

    @property
    def detected(self) -> bool:
        return self.t_detect is not None

    @property
    def recovered(self) -> bool:
        return self.t_recovered is not None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        values = dict(data)
        # run directories written before t_effect existed measured from inject_end
        for old, new in (("t_inject", "t_effect"), ("in_flight_at_inject", "in_flight_at_effect")):
            if new not in values and old in values:
                values[new] = values[old]
        values["slis"] = {k: WindowSLIs(**v) for k, v in (values.get("slis") or {}).items()}
        values["paging"] = Paging.from_json(values.get("paging"))
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def read_measurement(run: RunDir) -> Measurement | None:
    """``measurement.json`` of ``run``; ``None`` when absent. Raises
    :class:`faultkit.rundir.UnreadableRunFile` when it is torn or not a Measurement."""
    return run.read_model(run.measurement_json, Measurement.from_json, "slo.Measurement")


def read_verdict(run: RunDir) -> Verdict | None:
    """``verdict.json`` of ``run``; ``None`` when absent. Raises
    :class:`faultkit.rundir.UnreadableRunFile` when it is torn or not a Verdict."""
    return run.read_model(run.verdict_json, Verdict.from_json, "slo.Verdict")
