"""scenarios._expect.node_not_crashed: missing container state is inconclusive, not a pass."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultkit.rundir import RunDir
from scenarios._expect import node_not_crashed
from slo.types import Measurement

M = Measurement(node="n", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
UP = {"restart_count": 0, "oom_killed": False, "started_at": "2026-01-01T11:00:00Z"}


def judged(tmp_path: Path, container: dict[str, Any] | None) -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    run = RunDir(tmp_path)
    if container is not None:
        run.write_json(run.container_json, container)
    experiment = SimpleNamespace(run=run)
    return node_not_crashed(experiment)(M).checks[0]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("container", "why"),
    [
        (None, "container state before the run not captured"),
        ({"before": None, "after": None}, "container state before the run not captured"),
        ({"before": UP, "after": None}, "container state after the run not captured"),
        ({"before": UP, "after": {"error": "no such container"}},
         "container state after the run unreadable: no such container"),
    ],
)
def test_missing_container_state_is_inconclusive(
    tmp_path: Path, container: dict[str, Any] | None, why: str
) -> None:
    result = judged(tmp_path, container)
    assert result.inconclusive and not result.passed
    assert result.why == why


def test_same_container_passes_and_a_restart_fails(tmp_path: Path) -> None:
    assert judged(tmp_path / "a", {"before": UP, "after": UP}).passed
    restarted = UP | {"restart_count": 1, "started_at": "2026-01-01T12:00:05Z"}
    result = judged(tmp_path / "b", {"before": UP, "after": restarted})
    assert result.failed
    assert result.why == "the node crashed and was restarted"


def test_wrongly_typed_or_torn_container_json_is_inconclusive(tmp_path: Path) -> None:
    """A container.json the harness could not have written is never read as "no crash"."""
    result = judged(tmp_path / "a", {"before": UP, "after": UP | {"restart_count": "1"}})
    assert result.inconclusive and not result.passed
    assert result.why == "container state after the run unreadable: wrong type of restart_count"
    torn = RunDir(tmp_path / "b")
    torn.path.mkdir()
    torn.container_json.write_text('{"before": {', encoding="utf-8")
    result = node_not_crashed(SimpleNamespace(run=torn))(M).checks[0]  # type: ignore[arg-type]
    assert result.inconclusive and result.why.startswith("container.json: unreadable")
