"""How one load is divided among several client processes (:mod:`faultkit.load.multiproc`).

Process ``k`` of ``n`` gets a *share*: a :class:`~faultkit.load.profile.LoadProfile` whose
counts are its part of the whole run's, and a place in the run's request numbering
(``LoadGenerator(share=(k, n))``): its ``j``-th request is request ``j·n + k`` of the
whole run — the same id and prompt as in a one-process run — and in an open loop it sends
exactly the arrivals ``k, k + n, k + 2n, …`` of the one schedule ``(rate, burstiness,
seed)`` defines. So the shares together send the run's requests, each exactly once:

* ``requests`` R → ``R // n`` each, the first ``R % n`` processes one more (the indices
  ``j·n + k`` with ``j`` below a process's share are then exactly ``0 … R-1``);
* ``concurrency`` C (closed-loop workers, or the open loop's in-flight cap) → the same
  division: the caps add up to C, and each process keeps at most its part in flight;
* ``warmup`` likewise; ``duration_s``, ``rate`` and every other field unchanged (the
  open loop's rate is the whole schedule's, which each process thins to its own arrivals).

A run is never divided into more processes than it has requests or concurrency: every
share has at least one of each (:func:`process_count`).
"""

from __future__ import annotations

from faultkit.load.profile import LoadProfile

__all__ = ["part", "process_count", "split_profile"]


def part(total: int, k: int, n: int) -> int:
    """Process ``k``'s part of ``total`` among ``n``: ``total // n``, + 1 for the first
    ``total % n``; the parts add up to ``total``."""
    return total // n + (1 if k < total % n else 0)


def process_count(profile: LoadProfile, wanted: int) -> int:
    """How many processes the run is divided into: ``wanted``, but no more than its
    concurrency (each process needs a worker or a slot) or its requests (each needs one)."""
    if wanted < 1:
        raise ValueError(f"processes must be >= 1 (got {wanted})")
    n = wanted
    if profile.concurrency is not None:
        n = min(n, profile.concurrency)
    elif not profile.open_loop:
        n = 1  # one closed-loop worker cannot be divided
    if profile.requests is not None:
        n = min(n, max(1, profile.requests))
    return n


def split_profile(profile: LoadProfile, n: int) -> list[LoadProfile]:
    """The ``n`` shares of ``profile`` (``n`` from :func:`process_count`), in order."""
    if n != process_count(profile, n):
        raise ValueError(f"{profile} cannot be divided into {n} processes")
    shares = []
    for k in range(n):
        changes: dict[str, object] = {"warmup": part(profile.warmup, k, n)}
        if profile.requests is not None:
            changes["requests"] = part(profile.requests, k, n)
        if profile.concurrency is not None:
            changes["concurrency"] = part(profile.concurrency, k, n)
        shares.append(profile.replace(**changes))
    return shares
