"""slo.checks.window_objectives: the one statement of which objectives a window of client
requests is held to (error ratio ≤ ``error_ratio_max``, TTFT p95 ≤ ``ttft_s``), and the
three places that judge a window by it agreeing at the limit and just above it: the checks
after a fault (``window_checks``, ``checks_from_slo``), the steady-state hypothesis before
it (``slo.evidence.steady_state_violations``) and the gate's steady-state phase
(``faultkit.gate.steady.judge_steady_state``)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from faultkit.gate.steady_judge import judge_steady_state
from faultkit.inventory import SLOSettings
from faultkit.model.windows import WindowSLIs
from slo.checks import (
    WindowObjective,
    checks_from_slo,
    window_checks,
    window_objectives,
)
from slo.evidence import steady_state_violations
from slo.types import Measurement

SLO = SLOSettings(error_ratio_max=0.05, ttft_s=1.5)


def window(**kw: Any) -> WindowSLIs:
    """A 30 s window of 300 requests within ``SLO``, ``kw`` overriding any field."""
    values: dict[str, Any] = {"start": 0.0, "end": 30.0, "requests": 300, "ok": 300,
                              "failed": 0, "error_ratio": 0.0, "ttft_p95_s": 0.2}
    values.update(kw)
    return WindowSLIs(**values)


def test_the_objectives_are_the_error_ratio_then_the_ttft_p95_of_the_settings() -> None:
    assert window_objectives(SLO) == (
        WindowObjective("error_ratio", "error_ratio", 0.05, ""),
        WindowObjective("ttft_p95", "ttft_p95_s", 1.5, " s"),
    )


def test_an_objective_holds_up_to_its_limit_included_and_has_no_say_without_a_figure() -> None:
    error_ratio, ttft_p95 = window_objectives(SLO)
    assert error_ratio.met(window(error_ratio=0.05)) is True
    assert error_ratio.met(window(error_ratio=0.0501)) is False
    assert ttft_p95.met(window(ttft_p95_s=1.5)) is True
    assert ttft_p95.met(window(ttft_p95_s=1.51)) is False
    empty = window(requests=0, ok=0, error_ratio=None, ttft_p95_s=None)
    assert error_ratio.met(empty) is None and ttft_p95.met(empty) is None


# --------------------------------------------------------------------------- the three judges


def _after_the_fault(sli: WindowSLIs) -> list[bool]:
    measurement = Measurement(node="n", t_effect=0.0, t_revert=None, t_window_end=30.0,
                              slis={"after": sli})
    verdict = window_checks(SLO)(measurement)
    return [c.passed for c in verdict.checks]


def _gate(sli: WindowSLIs) -> list[bool]:
    return [c.passed for c in judge_steady_state(sli, SLO).checks]


def _baseline(sli: WindowSLIs, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    # the module by name: the package's `measure` attribute is the function of that name
    monkeypatch.setattr(importlib.import_module("slo.measure"), "window_slis", lambda *_: sli)
    found = steady_state_violations([], [], "n", SLO, 0.0, 30.0)
    return [not any(r.startswith("baseline error ratio") for r in found),
            not any(r.startswith("baseline TTFT p95") for r in found)]


@pytest.mark.parametrize(("sli", "held"), [
    (window(), [True, True]),
    (window(failed=15, ok=285, error_ratio=0.05, ttft_p95_s=1.5), [True, True]),
    (window(failed=16, ok=284, error_ratio=16 / 300), [False, True]),
    (window(ttft_p95_s=1.500001), [True, False]),
    (window(failed=30, ok=270, error_ratio=0.1, ttft_p95_s=3.0), [False, False]),
], ids=["within", "at-the-limits", "error-ratio-above", "ttft-above", "both-above"])
def test_the_checks_the_baseline_and_the_gate_agree_on_a_window(
    sli: WindowSLIs, held: list[bool], monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _after_the_fault(sli) == held
    assert _gate(sli) == held
    assert _baseline(sli, monkeypatch) == held


def test_the_default_checks_end_with_the_window_checks_after_the_fault() -> None:
    names = [fn.__qualname__ for fn in checks_from_slo(SLO).fns[-2:]]
    assert names == [fn.__qualname__ for fn in window_checks(SLO).fns]
    measurement = Measurement(node="n", t_effect=0.0, t_revert=None, t_window_end=30.0,
                              slis={"after": window()})
    assert [c.name for c in checks_from_slo(SLO)(measurement).checks][-2:] == [
        "error_ratio_after", "ttft_p95_after"]
