"""Timeline event kinds: every ``Event.kind`` that faultkit, ``slo`` and the scenarios write.

:class:`EventKind` is a :class:`~enum.StrEnum`: a member *is* its string (``EventKind.ACT ==
"act"``), so ``timeline.jsonl`` holds plain words and an event read back from a file
compares equal to the member. Emitters and readers use the members, never the
literals. Two families are open-ended and built by a function instead: Docker's container
events (:func:`docker_kind`, any action Docker reports) and Prometheus alert states
(:func:`alert_kind`); the members below name the ones the harness reads.

Which source writes which kind (``Event.source``):

- ``fault`` — a fault's lifecycle (:mod:`faultkit.faults.base`) and what it saw
  (:mod:`faultkit.faults.process`, :mod:`faultkit.faults.rollout`);
- ``harness`` — the experiment (:mod:`faultkit.experiment`, scenarios through
  ``Experiment.note``) and Docker's container events (:mod:`faultkit.docker.events`);
- ``observer`` — readiness, Prometheus, ``up`` and alerts (:mod:`slo.observer`).

What each kind means for the measurement: docs/definitions.md; the file:
docs/run-directory.md.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    """Every kind of timeline event (see the module docstring)."""

    # -- a fault's lifecycle (source "fault")
    INJECT_START = "inject_start"  # data["effect"]: what will prove the fault took effect
    ACT = "act"  # just before the fault's first disruptive act
    EFFECT = "effect"  # the fault's mechanism is confirmed in place
    NO_EFFECT = "no_effect"  # the mechanism demonstrably did nothing (INCONCLUSIVE)
    NOT_APPLIED = "not_applied"  # an act failed after its retries; reverted (INCONCLUSIVE)
    HARNESS_INTERVENED = "harness_intervened"  # the harness brought the node back
    INJECT_END = "inject_end"
    GUARD_TRIPPED = "guard_tripped"  # a guard ended the injection early
    REVERT_START = "revert_start"
    REVERT_END = "revert_end"

    # -- what a fault saw while waiting for the node (source "fault")
    START_AFTER_DEADLINE = "start_after_deadline"  # the harness started a stopped container
    RESTARTED = "restarted"
    READY = "ready"
    FIRST_TOKEN = "first_token"
    CONFIG_FAILED = "config_failed"  # a rolled-out config never became ready
    ROLLBACK_START = "rollback_start"
    ROLLBACK_DONE = "rollback_done"
    PROMOTED = "promoted"

    # -- the experiment (source "harness")
    DRY_RUN = "dry_run"
    SCENARIO_START = "scenario_start"
    EVIDENCE_GAP = "evidence_gap"  # evidence the verdict needs is missing (INCONCLUSIVE)
    BASELINE_START = "baseline_start"
    ABORTED = "aborted"  # not injected: the node was not steady or not running
    RECOVERY_DEADLINE = "recovery_deadline"  # stopped waiting for recovery
    SCENARIO_END = "scenario_end"
    SATURATION = "saturation"  # noted by the overload scenario
    MACHINE_LOCK_WAITED = "machine_lock_waited"  # waited for another lane's flood first
    SPECULATION_CLASS = "speculation_class"  # a workload class measured (test_speculative)

    # -- Docker's own container events (source "harness"; any action: docker_kind())
    DOCKER_DIE = "docker_die"
    DOCKER_OOM = "docker_oom"
    DOCKER_START = "docker_start"
    DOCKER_PAUSE = "docker_pause"
    DOCKER_UPDATE = "docker_update"
    RESTART_SEEN = "restart_seen"  # a die followed by a start: exit code, OOM kill

    # -- the observer (source "observer")
    HEALTH_OK = "health_ok"
    HEALTH_FAIL = "health_fail"
    PROMETHEUS_DOWN = "prometheus_down"
    PROMETHEUS_UP = "prometheus_up"
    UP_0 = "up_0"  # Prometheus' `up` sample for the node went to 0
    UP_1 = "up_1"
    ALERT_PENDING = "alert_pending"  # alert_kind(state)
    ALERT_FIRING = "alert_firing"
    ALERT_RESOLVED = "alert_resolved"
    # Alertmanager, when the inventory names one (source "observer"): its state of the
    # node's alerts, and the pages its route delivered
    AM_ALERT = "am_alert"  # an alert first seen in Alertmanager, or its state changed
    ALERTMANAGER_DOWN = "alertmanager_down"
    ALERTMANAGER_UP = "alertmanager_up"
    AM_ROUTE = "am_route"  # the root route's timing (group_wait …), read as the run starts
    PAGED = "paged"  # a firing notification naming the node reached the pager (t: arrival)
    PAGER_DOWN = "pager_down"  # the pager did not answer when its pages were collected

    # -- recognised by the reports, written by no emitter here: hand-made run directories
    READINESS_TIMEOUT = "readiness_timeout"
    ROLLOUT_FAILED = "rollout_failed"


#: prefix of the kinds of Docker's container events (:func:`docker_kind`)
DOCKER_PREFIX = "docker_"
#: prefix of the kinds of Prometheus alert state changes (:func:`alert_kind`)
ALERT_PREFIX = "alert_"
#: prefix of harness events for a manual action (``manual_restart``): the reports count it
#: as what brought the node back; written by hand-made run directories, no emitter here
MANUAL_PREFIX = "manual"


def docker_kind(action: str) -> str:
    """``docker_<action>``: the kind of a Docker container event (``die`` → ``docker_die``)."""
    return f"{DOCKER_PREFIX}{action}"


def alert_kind(state: str) -> str:
    """``alert_<state>``: the kind of an alert state change (``firing`` → ``alert_firing``)."""
    return f"{ALERT_PREFIX}{state}"
