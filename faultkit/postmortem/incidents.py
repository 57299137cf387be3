"""The incident finder: outages, their detection and the engine's restarts, from one node's
monitoring alone (:class:`~faultkit.postmortem.evidence.NodeEvidence`). Pure functions.

Method (docs/postmortem.md):

- **An outage** is a run of failed scrapes (``up == 0``). It *starts* after the last good
  scrape before it and by the first failed one: ``start = (t_last_good, t_first_failed]``.
  Two runs belong to one incident unless the good scrapes between them held ``hold_s``
  (first to last good sample); a flap of a few good scrapes stays inside the incident.
- It *ends* after its last failed scrape and by the first good scrape of the stretch that
  held: ``end = (t_last_failed, t_first_good]``. Still failing at the window's last sample:
  ``end = None``. A good stretch that reaches the window's end before lasting ``hold_s``
  gives the end's bound with ``held = False``.
- **Detection** is the first alert for the node that *began* firing inside the incident,
  ``(start.after, end.by]`` (to the window's end while open): an alert already firing before
  the last good scrape is not detection. An alert's firing samples form one episode while
  they follow each other at its evaluation interval (the series' smallest spacing); a gap
  longer than 1.5 of those starts a new one.
- **Restarts** are changes of ``process_start_time_seconds`` between consecutive samples of
  one series; a restart belongs to the incident whose span holds the scrape that first
  showed it (``t_seen``), else it is listed apart (a crash and restart faster than a scrape).
- **Gaps**: no ``up`` sample for more than 2 scrape intervals is a gap in the evidence, not
  an outage; a bound across one is as wide as the gap and says so by its width.

Every stamp is Prometheus' own: a scrape is stamped when it began, so the instant a bound
encloses may trail its ``by`` by up to one scrape's duration (its timeout at most).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from faultkit.postmortem.evidence import AlertSeries, NodeEvidence, Samples
from faultkit.postmortem.model import AlertEpisode, Bound, Findings, Gap, Incident, Restart

__all__ = ["EPISODE_GAP_INTERVALS", "GAP_INTERVALS", "alert_episodes", "find_incidents", "gaps",
           "restarts"]

#: no ``up`` sample for more than this many scrape intervals is a gap in the evidence
GAP_INTERVALS = 2.0
#: a firing sample more than this many evaluation intervals after the previous one starts
#: a new episode of that alert
EPISODE_GAP_INTERVALS = 1.5
#: a process start time must move by more than this (s) to count as a restart (the metric
#: is a float of the same process: it never moves by itself)
RESTART_MIN_STEP_S = 0.5


def find_incidents(evidence: NodeEvidence, *, hold_s: float) -> Findings:
    """Every outage of the node in the evidence's window, oldest first (module docstring)."""
    up = sorted(s for s in evidence.up if evidence.t_from <= s[0] <= evidence.t_to)
    episodes = [e for series in evidence.alerts for e in alert_episodes(series)]
    all_restarts = sorted((r for series in evidence.process_start or ()
                           for r in restarts(series)), key=lambda r: r.t_seen)
    incidents: list[Incident] = []
    for first, last, good_inside in _failed_stretches(up, hold_s):
        start = Bound(after=up[first - 1][0] if first > 0 else None, by=up[first][0])
        end, held = _end(up, last, hold_s)
        span_end = evidence.t_to if end is None or end.by is None else end.by
        span = Bound(after=start.after if start.after is not None else evidence.t_from,
                     by=span_end)
        began = sorted((e for e in episodes if span.contains(e.t_first)),
                       key=lambda e: (e.t_first, e.alert))
        incidents.append(Incident(
            start=start, end=end, held=held,
            failed_scrapes=sum(1 for t, v in up[first:last + 1] if _failed(v)),
            good_scrapes_inside=good_inside,
            detection=began[0] if began else None,
            alerts=tuple(began),
            restarts=tuple(r for r in all_restarts if span.contains(r.t_seen)),
        ))
    claimed = {r for i in incidents for r in i.restarts}
    return Findings(
        incidents=tuple(incidents),
        restarts_outside=tuple(r for r in all_restarts if r not in claimed),
        gaps=gaps([t for t, _ in up], evidence.t_from, evidence.t_to,
                  evidence.scrape_interval_s),
        hold_s=hold_s,
    )


def _failed(value: float) -> bool:
    return value == 0.0


def _failed_stretches(up: Sequence[tuple[float, float]], hold_s: float
                      ) -> list[tuple[int, int, int]]:
    """(first failed index, last failed index, good samples inside) of each incident: runs
    of failed samples, merged across good stretches that did not hold ``hold_s``."""
    runs: list[tuple[int, int]] = []
    for i, (_t, value) in enumerate(up):
        if not _failed(value):
            continue
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    merged: list[tuple[int, int, int]] = []
    for first, last in runs:
        if merged:
            m_first, m_last, good = merged[-1]
            between = up[m_last + 1:first]  # the good samples since the previous run
            if between[-1][0] - between[0][0] < hold_s:
                merged[-1] = (m_first, last, good + len(between))
                continue
        merged.append((first, last, 0))
    return merged


def _end(up: Sequence[tuple[float, float]], last: int, hold_s: float
         ) -> tuple[Bound | None, bool]:
    """The end after the failed sample at ``last``, and whether the good stretch held."""
    if last + 1 >= len(up):
        return None, False
    stretch_end = next((i for i in range(last + 1, len(up)) if _failed(up[i][1])), len(up))
    held = up[stretch_end - 1][0] - up[last + 1][0] >= hold_s
    return Bound(after=up[last][0], by=up[last + 1][0]), held


def alert_episodes(series: AlertSeries) -> list[AlertEpisode]:
    """The stretches in which one alert series fired (module docstring: episodes)."""
    stamps = sorted(series.firing)
    if not stamps:
        return []
    spacing = min((b - a for a, b in pairwise(stamps) if b > a),
                  default=None)
    episodes: list[AlertEpisode] = []
    first = prev = stamps[0]
    for t in stamps[1:]:
        if spacing is not None and t - prev > EPISODE_GAP_INTERVALS * spacing:
            episodes.append(AlertEpisode(series.name, first, prev, series.labels))
            first = t
        prev = t
    episodes.append(AlertEpisode(series.name, first, prev, series.labels))
    return episodes


def restarts(samples: Samples | Sequence[tuple[float, float]]) -> list[Restart]:
    """Each change of one series' process start time between consecutive samples, oldest
    first."""
    found: list[Restart] = []
    ordered = sorted(samples)
    for (_t0, before), (t, after) in pairwise(ordered):
        if abs(after - before) > RESTART_MIN_STEP_S:
            found.append(Restart(t_seen=t, t_process_start=after, previous=before))
    return found


def gaps(stamps: Sequence[float], t_from: float, t_to: float, interval_s: float
         ) -> tuple[Gap, ...]:
    """Stretches of ``[t_from, t_to]`` longer than :data:`GAP_INTERVALS` scrape intervals
    with no sample (the window's edges included)."""
    limit = GAP_INTERVALS * interval_s
    edges = [t_from, *sorted(stamps), t_to]
    return tuple(Gap(a, b) for a, b in pairwise(edges) if b - a > limit)

