"""Routing around a dead upstream: when a gateway stopped sending users to it.

A pure function over the gateway's ledger (``RequestRecord.served_by``: the upstream its
answer named, LiteLLM's ``x-litellm-model-id``). A gateway request **hit the dead
upstream** when, arriving at or after ``t_effect``, it

* failed and its answer named that upstream (a stream cut by the dying upstream), or
* failed naming no upstream at all, not on the client's side (the gateway's own error
  after its retries: while one upstream is down, those attempts were on it; a transport
  error to the gateway itself counts too — it is a user lost either way), or
* arrived before ``t_back`` (the upstream serving again: ready after a kill, unpaused,
  reconnected) and named that upstream, whatever its outcome: the gateway sent it to the
  upstream while it was down, and it waited there (a hang the gateway did not route
  around: its users are served only when the upstream comes back).

**t_routed** is the start of the first stretch of at least ``stretch_s`` seconds, from
``t_effect`` on, in which requests arrived and none of them hit the dead upstream: the
arrival of the first request after the last hit before such a stretch (``t_effect`` if
none hit). ``route_around_s = t_routed − t_effect``. None when no such stretch lies
within the window (the gateway kept sending users to it, or the window ended).

``routed_while_down`` says whether the gateway stopped using the upstream while it was
down: the stretch began before ``t_back``, no request from its start until ``t_back`` hit
the upstream (stopped *for the rest of the outage*: a hit-free stretch in the middle of a
hang is chance — with one upstream in three at 6 req/s, a 3 s gap without it comes in
about one outage of 8 s in 25 — while a gateway that cooled the upstream down sends it
nothing more until it is back), *and* no request of that stretch named the
upstream at all (after ``t_back`` a served request is no hit, but it shows the upstream
was never taken out of rotation: with one upstream in three, a hit-free half second
before it came back is chance, not routing). False means the gateway kept sending users
there until the upstream was back. None when no clean stretch was found, **or when the
upstream was down for less than ``stretch_s``** (``outage_s``): no stretch fits in the
outage, so what the gateway did cannot be told from chance (measured on the lab: a
sim-vllm restarted by Docker in 2.6 s, one failed attempt retried elsewhere, no cooldown;
judged "kept sending users" by the rule above, with not one user sent there). The
scenario must then hold the upstream down longer: a verdict on it is INCONCLUSIVE.

**Back in rotation**: ``t_back_in_rotation`` is the arrival of the first request from
``t_back`` on (``t_effect`` without it) that the upstream served (named it and
succeeded): when the gateway gave it traffic again. ``back_in_rotation_s`` counts from
``t_effect``; ``idle_after_back_s`` from ``t_back`` (the gateway's cooldown of an upstream
that already serves again).

What the client cannot see: an attempt on the dead upstream that the gateway retried on
a live one and then served (the user got an answer, later; LiteLLM's
``x-litellm-attempted-retries`` header, ``RequestRecord.gateway_retries``, counts them per
user). A success naming the upstream after ``t_back`` means it serves again: not a hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faultkit.model.records import CLIENT_SIDE, RequestRecord

__all__ = ["RouteAround", "hit_dead_upstream", "route_around"]

#: failures that say nothing about where the gateway sent the request
_NOT_ROUTED = CLIENT_SIDE | {"cancelled"}


def hit_dead_upstream(r: RequestRecord, upstream: str, t_back: float | None = None) -> bool:
    """``r`` failed on ``upstream``, failed naming no upstream, or was sent to ``upstream``
    before ``t_back`` (module docstring)."""
    if r.served_by == upstream and t_back is not None and r.arrival < t_back:
        return True
    if r.status == "ok" or r.error_class in _NOT_ROUTED:
        return False
    return r.served_by in (upstream, None)


@dataclass(frozen=True, slots=True)
class RouteAround:
    """How the gateway routed around ``upstream`` after ``t_effect``."""

    upstream: str
    t_effect: float
    stretch_s: float
    t_routed: float | None
    #: requests that hit the dead upstream from t_effect to the window end, by arrival
    hits: int
    t_last_hit: float | None
    #: requests from t_effect on that the upstream served (named it and succeeded)
    served_by_upstream_after: int
    #: requests from t_effect on, and how many named no upstream at all
    requests: int
    unnamed: int
    #: when the upstream served again (None: not given), and the first request it served
    #: from then on (None: none within the window)
    t_back: float | None = None
    t_back_in_rotation: float | None = None
    #: the gateway took the upstream out of rotation while it was down (module docstring);
    #: None when no clean stretch was found or the outage was shorter than ``stretch_s``
    routed_while_down: bool | None = None

    @property
    def outage_s(self) -> float | None:
        """How long the upstream was down: ``t_back − t_effect`` (None without t_back)."""
        return None if self.t_back is None else self.t_back - self.t_effect

    @property
    def outage_too_short(self) -> bool:
        """The upstream was back before a whole stretch could pass: routing not judgeable."""
        return self.outage_s is not None and self.outage_s < self.stretch_s

    @property
    def route_around_s(self) -> float | None:
        return None if self.t_routed is None else self.t_routed - self.t_effect

    @property
    def back_in_rotation_s(self) -> float | None:
        if self.t_back_in_rotation is None:
            return None
        return self.t_back_in_rotation - self.t_effect

    @property
    def idle_after_back_s(self) -> float | None:
        if self.t_back_in_rotation is None or self.t_back is None:
            return None
        return max(0.0, self.t_back_in_rotation - self.t_back)

    def to_json(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "t_effect": self.t_effect,
            "stretch_s": self.stretch_s,
            "t_routed": self.t_routed,
            "route_around_s": self.route_around_s,
            "hits": self.hits,
            "t_last_hit": self.t_last_hit,
            "served_by_upstream_after": self.served_by_upstream_after,
            "requests": self.requests,
            "unnamed": self.unnamed,
            "routed_while_down": self.routed_while_down,
            "t_back": self.t_back,
            "outage_s": self.outage_s,
            "t_back_in_rotation": self.t_back_in_rotation,
            "back_in_rotation_s": self.back_in_rotation_s,
            "idle_after_back_s": self.idle_after_back_s,
        }


def route_around(
    records: Sequence[RequestRecord],
    node: str,
    upstream: str,
    t_effect: float,
    t_end: float,
    *,
    stretch_s: float = 3.0,
    t_back: float | None = None,
) -> RouteAround:
    """:class:`RouteAround` of gateway ``node``'s requests (``records`` may hold others);
    ``t_back``: when the upstream served again (module docstring)."""
    mine = sorted(
        (
            r
            for r in records
            if r.node == node and r.kind != "probe" and t_effect <= r.arrival <= t_end
        ),
        key=lambda r: r.arrival,
    )
    hits = [r for r in mine if hit_dead_upstream(r, upstream, t_back)]
    t_routed: float | None = None
    start = t_effect  # candidate start of a clean stretch
    for r in mine:
        t = r.arrival
        if hit_dead_upstream(r, upstream, t_back):
            if t - start >= stretch_s and _arrived_in(mine, start, t):
                t_routed = start
                break
            start = _next_arrival(mine, t, t_end)  # the next arrival starts a candidate
    else:
        if t_end - start >= stretch_s and _arrived_in(mine, start, t_end):
            t_routed = start
    routed_while_down: bool | None = None
    outage_too_short = t_back is not None and t_back - t_effect < stretch_s
    if t_routed is not None and not outage_too_short:
        routed = t_routed
        down_until = t_end if t_back is None else t_back
        routed_while_down = (
            routed < down_until
            and not any(r.served_by == upstream and routed <= r.arrival < routed + stretch_s
                        for r in mine)
            and not any(routed <= r.arrival < down_until for r in hits)
        )
    since = t_effect if t_back is None else max(t_effect, t_back)
    back = next(
        (r.arrival for r in mine
         if r.status == "ok" and r.served_by == upstream and r.arrival >= since),
        None,
    )
    return RouteAround(
        upstream=upstream,
        t_effect=t_effect,
        stretch_s=stretch_s,
        t_routed=t_routed,
        hits=len(hits),
        t_last_hit=max((r.arrival for r in hits), default=None),
        served_by_upstream_after=sum(
            1 for r in mine if r.status == "ok" and r.served_by == upstream
        ),
        requests=len(mine),
        unnamed=sum(1 for r in mine if r.served_by is None),
        t_back=t_back,
        t_back_in_rotation=back,
        routed_while_down=routed_while_down,
    )


def _next_arrival(records: Sequence[RequestRecord], after: float, t_end: float) -> float:
    """The first arrival strictly after ``after`` (``t_end`` if none)."""
    return next((r.arrival for r in records if r.arrival > after), t_end)


def _arrived_in(records: Sequence[RequestRecord], start: float, end: float) -> bool:
    return any(start <= r.arrival < end for r in records)
