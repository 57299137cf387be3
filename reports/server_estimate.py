"""Lost requests of a run no client recorded, as the server's own counters estimate them.

``faultkit postmortem`` has no ledger: it writes ``measurement.json`` ``server_cross_check``
with ``estimate: server_counters`` (:data:`SERVER_ESTIMATE`), the estimated ``lost``, its
range ``low``–``high`` and its ``method`` — or ``lost: null`` and ``why`` it could not be
estimated. :func:`server_estimate` finds that record; the rest phrase it. Slow answers are
not seen without a ledger, so affected users are never claimed from it.
"""

from __future__ import annotations

from faultkit.rundir import MEASUREMENT_JSON
from reports.provenance import Figure, Source
from slo.types import Measurement

#: ``server_cross_check["estimate"]`` of a run with no ledger whose lost requests were
#: estimated from the server's counters (``faultkit postmortem``)
SERVER_ESTIMATE = "server_counters"


def server_estimate(m: Measurement | None) -> dict[str, object] | None:
    """The server-side estimate of lost requests of a run no client recorded (a postmortem:
    ``measurement.json`` ``server_cross_check`` with ``estimate: server_counters``), else
    ``None``. Its ``lost`` is ``None`` when it could not be estimated (``why`` says why)."""
    check = m.server_cross_check if m is not None else None
    if not isinstance(check, dict) or check.get("estimate") != SERVER_ESTIMATE:
        return None
    return check


def unwatched(m: Measurement | None) -> bool:
    """No harness watched the run (a postmortem): no client's record, no probe, nothing
    reverted — what the report says of it rests on monitoring and Docker alone."""
    return server_estimate(m) is not None


def steady_state_basis(m: Measurement | None) -> str:
    """What the run's steady state (``t_recovered``) rests on, in the report's words."""
    return ("the node's scrapes answered for the recovery hold" if unwatched(m)
            else "every request OK for the recovery hold")


def estimate_words(estimate: dict[str, object]) -> str:
    """``an estimated 12 requests (8–17) were lost`` or why they were not estimated."""
    lost, low, high = estimate.get("lost"), estimate.get("low"), estimate.get("high")
    if not isinstance(lost, int):
        return f"users affected were not estimated ({estimate.get('why') or 'no counters'})"
    verb = "was" if lost == 1 else "were"
    return (f"an estimated {lost} request{'' if lost == 1 else 's'} ({low}–{high}) {verb} "
            "lost, by the server's own counters (no client recorded them)")


def estimated_impact(estimate: dict[str, object]) -> list[Figure]:
    """The key figures of impact of a run no client recorded: the server-side estimate,
    its method and range, and why affected users are not measured."""
    source = (Source(MEASUREMENT_JSON, ("server_cross_check",)),)
    return [Figure("Lost requests (server-side estimate)",
                   f"{estimate_words(estimate)}. Method: {estimate.get('method')}", source),
            Figure("Affected users (lost + slow)",
                   "not measured: no ledger (no client recorded the users' requests, so "
                   "slow answers are not seen); lost is the server-side estimate above",
                   source)]
