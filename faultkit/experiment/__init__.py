"""The experiment runner: one fault (or harness action) run against one node, start to
incident report — or the node's steady state with no fault — usable without pytest.

preflight → load → baseline → inject → revert → recover → measure → judge → report, as
:class:`Experiment` (the run's state and what scenarios call) and the run's steps as
functions over that state (:mod:`faultkit.experiment.lifecycle`). The pytest plugin
(:mod:`faultkit.plugin`) is one adapter: its ``experiment`` fixture builds an
:class:`Experiment`, finalizes it at teardown and reports its verdict;
``testbed/truth.py`` builds one directly.

Modules, each with its contract in its docstring:

- :mod:`~faultkit.experiment.experiment` — :class:`Experiment`: ``run_fault``,
  ``run_action``, ``not_judgeable``, ``check``, ``finalize``;
- :mod:`~faultkit.experiment.state` — :class:`ExperimentState`: inputs, timeline,
  ``run.json``, findings;
- :mod:`~faultkit.experiment.lifecycle` — :func:`run_steps` and :class:`RunPlan`;
- :mod:`~faultkit.experiment.node_evidence` — the container's state, log tail, clock and
  Docker events, secrets redacted; ``run.json``'s first content;
- :mod:`~faultkit.experiment.steady` — a steady-state run: the node under load, no fault
  (the gate's steady-state phase), kept as every run is;
- :mod:`~faultkit.experiment.action` — a harness action's window, marked as a fault's;
- :mod:`~faultkit.experiment.candidate` — a candidate serving config kept on a node for a
  session;
- :mod:`~faultkit.experiment.live` — a run's live status (:class:`LiveStatus`);
- :mod:`~faultkit.experiment.outcomes` — :class:`DryRunPlan`, :class:`NotJudgeable`.

Never imports pytest (a contract in ``pyproject.toml``). The names below are imported on
first use: the light modules (``live``, ``outcomes``) are imported by the pytest
plugin's entry module, which must not pull in the harness (Docker, aiohttp, Prometheus).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faultkit.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from faultkit.experiment.candidate import CandidateSession
    from faultkit.experiment.experiment import During, Experiment
    from faultkit.experiment.lifecycle import RunPlan, run_steps
    from faultkit.experiment.live import LiveStatus
    from faultkit.experiment.outcomes import DryRunPlan, NotJudgeable
    from faultkit.experiment.state import ExperimentState
    from faultkit.experiment.steady import SteadyWindow, run_steady

#: name → the module it comes from
_EXPORTS: dict[str, str] = {
    "CandidateSession": "faultkit.experiment.candidate",
    "DryRunPlan": "faultkit.experiment.outcomes",
    "During": "faultkit.experiment.experiment",
    "Experiment": "faultkit.experiment.experiment",
    "ExperimentState": "faultkit.experiment.state",
    "LiveStatus": "faultkit.experiment.live",
    "NotJudgeable": "faultkit.experiment.outcomes",
    "RunPlan": "faultkit.experiment.lifecycle",
    "SteadyWindow": "faultkit.experiment.steady",
    "run_steady": "faultkit.experiment.steady",
    "run_steps": "faultkit.experiment.lifecycle",
}

__all__ = [
    "CandidateSession",
    "DryRunPlan",
    "During",
    "Experiment",
    "ExperimentState",
    "LiveStatus",
    "NotJudgeable",
    "RunPlan",
    "SteadyWindow",
    "run_steady",
    "run_steps",
]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
