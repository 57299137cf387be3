"""What measurement and judgement produce: :class:`Measurement` and :class:`Verdict`.

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

DetectSignal = Literal["alert", "up", "probe"]
WindowName = Literal["baseline", "fault", "after"]


@dataclass(frozen=True, slots=True)
class WindowSLIs:
    """Client-side SLIs of the requests *invoked* in one window."""

    start: float
    end: float
    requests: int = 0
    ok: int = 0
    failed: int = 0
    error_ratio: float | None = None  # None when no requests
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p95_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    e2e_p99_s: float | None = None
    output_tokens_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class Measurement:
    """Detection, recovery and loss for one fault injection (definitions: DESIGN.md).

    - detection_s = t_detect − t_inject; ``detect_signal`` says which signal saw it first
      (``alert`` firing > ``up`` == 0 > failed ``probe``).
    - recovery_s = t_recovered − t_inject; recovery_after_revert_s = t_recovered − t_revert.
    - lost = requests invoked in [t_inject, t_recovered] (or in flight at t_inject) whose
      status is fail/unknown, by error class; clean rejections (4xx/429/5xx with a body)
      are in ``lost_by_class`` too and also summed in ``clean_rejections``.
    """

    node: str
    t_inject: float
    t_revert: float | None
    t_window_end: float
    t_impact: float | None = None
    t_detect: float | None = None
    detect_signal: DetectSignal | None = None
    detect_detail: str | None = None
    detection_s: float | None = None
    #: first time each signal (alert / up / probe) showed the fault, seconds after t_inject
    detection_by_signal_s: dict[str, float] = field(default_factory=dict)
    t_recovered: float | None = None
    recovery_s: float | None = None
    recovery_after_revert_s: float | None = None
    lost_total: int = 0
    lost_by_class: dict[str, int] = field(default_factory=dict)
    clean_rejections: int = 0
    in_flight_at_inject: int = 0
    requests_total: int = 0
    slis: dict[str, WindowSLIs] = field(default_factory=dict)
    server_cross_check: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

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
        values["slis"] = {k: WindowSLIs(**v) for k, v in (values.get("slis") or {}).items()}
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One judged objective: what was expected, what was observed, and why it passed/failed."""

    name: str
    passed: bool
    expected: str
    observed: str
    why: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a scenario: passed only if every check passed."""

    checks: tuple[CheckResult, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def summary(self) -> str:
        if self.passed:
            return f"PASS ({len(self.checks)} checks)"
        return "FAIL: " + "; ".join(f"{c.name}: {c.why}" for c in self.failures)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [dataclasses.asdict(c) for c in self.checks]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(checks=tuple(CheckResult(**c) for c in data.get("checks", ())))
