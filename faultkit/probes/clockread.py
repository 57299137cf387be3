"""Another machine's clock against this one's, with the error bar the reading allows.

A remote clock is read the way NTP reads it: send a request at ``before``, get back the
remote stamp, receive the answer at ``after``. The remote stamp was taken somewhere in
between, so the skew is ``stamp − (before + after) / 2`` to within half the round trip.
On a busy machine one exchange can take a second (`docker info` from the second host took
≈ 1 s with five catalogue lanes running, and read a skew of −0.47 s where both clocks are
this kernel's), so :func:`read_clock` makes up to ``samples`` exchanges and keeps the
fastest: its half round trip is the reading's :attr:`ClockReading.uncertainty_s`.
Whether the clocks are within a bound is then asked honestly (:meth:`ClockReading.within`):
only a reading whose whole error bar lies inside the bound says yes (docs/definitions.md,
"INCONCLUSIVE").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ClockReading", "read_clock"]

#: an exchange this fast settles the reading: no further sample is taken
GOOD_ROUND_TRIP_S = 0.05


@dataclass(frozen=True)
class ClockReading:
    """The remote clock − this machine's (``skew_s``), to within ± ``uncertainty_s``, from
    the fastest of ``samples`` exchanges."""

    skew_s: float
    uncertainty_s: float
    samples: int

    def within(self, bound_s: float) -> bool:
        """Whether the skew is shown to be within ± ``bound_s``: its whole error bar is."""
        return abs(self.skew_s) + self.uncertainty_s <= bound_s

    def describe(self) -> str:
        """``-0.474 ± 0.480 s (the fastest of 5 readings)``."""
        plural = "s" if self.samples > 1 else ""
        return (f"{self.skew_s:+.3f} ± {self.uncertainty_s:.3f} s (the fastest of "
                f"{self.samples} reading{plural})")


def read_clock(
    read_remote: Callable[[], float],
    *,
    samples: int = 5,
    good_round_trip_s: float = GOOD_ROUND_TRIP_S,
    now: Callable[[], float] = time.time,
) -> ClockReading:
    """Read the remote clock (``read_remote()``: its time, epoch seconds) up to ``samples``
    times, stopping at the first exchange faster than ``good_round_trip_s``; the reading of
    the fastest. ``read_remote``'s errors propagate."""
    if samples < 1:
        raise ValueError(f"samples must be 1 or more, not {samples}")
    best: tuple[float, float] | None = None  # (round trip, skew)
    taken = 0
    for _ in range(samples):
        before = now()
        stamp = read_remote()
        after = now()
        taken += 1
        exchange = (after - before, stamp - (before + after) / 2)
        if best is None or exchange[0] < best[0]:
            best = exchange
        if best[0] <= good_round_trip_s:
            break
    assert best is not None
    return ClockReading(skew_s=best[1], uncertainty_s=best[0] / 2, samples=taken)
