"""A postmortem's run directory: ``<runs>/<utc-stamp>-postmortem-<node>/`` holding
``postmortem.json`` (:class:`~faultkit.postmortem.model.Postmortem`) and ``postmortem.md``
(:func:`~faultkit.postmortem.render.render_markdown`), each written whole or not at all.

Named like a scenario run's directory (:meth:`faultkit.rundir.RunDir.create`, scenario
``postmortem``), so it sorts among them. It is the index of the window's incidents: each
incident is a run directory of its own beside it (``Postmortem.runs``,
:mod:`faultkit.postmortem.incident_run`), with the shared incident report; this directory
holds none of a run's files, so ``faultkit runs`` lists the incidents, not the index.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from faultkit.postmortem.evidence import NodeEvidence
from faultkit.postmortem.model import EvidenceSummary, Findings, Postmortem, Related
from faultkit.postmortem.render import render_markdown
from faultkit.rundir import RunDir, replaced_whole

__all__ = ["POSTMORTEM_JSON", "POSTMORTEM_MD", "SCENARIO", "postmortem_of", "write_postmortem"]

POSTMORTEM_JSON = "postmortem.json"
POSTMORTEM_MD = "postmortem.md"
#: the scenario part of the directory's name
SCENARIO = "postmortem"


def postmortem_of(evidence: NodeEvidence, findings: Findings, *,
                  t_written: float | None = None, runs: tuple[str, ...] = (),
                  related: tuple[Related, ...] = ()) -> Postmortem:
    """The record of one node's postmortem: the evidence's window and sources, the
    findings, and the other nodes' incidents that overlapped them."""
    return Postmortem(
        node=evidence.node, job=evidence.job, prometheus_url=evidence.prometheus_url,
        t_from=evidence.t_from, t_to=evidence.t_to,
        t_written=time.time() if t_written is None else t_written,
        scrape_interval_s=evidence.scrape_interval_s,
        evidence=EvidenceSummary(
            up_samples=len(evidence.up), up_series=evidence.up_series,
            alert_series=len(evidence.alerts),
            process_start_metric=evidence.process_start_metric,
            process_start_samples=sum(len(s) for s in evidence.process_start or ()),
            missing=evidence.missing),
        findings=findings,
        runs=runs,
        related=related,
    )


def write_postmortem(runs_dir: Path, pm: Postmortem) -> RunDir:
    """Create the postmortem's directory under ``runs_dir`` and write both files."""
    run = RunDir.create(runs_dir, SCENARIO, pm.node,
                        now=datetime.fromtimestamp(pm.t_written, UTC))
    run.write_model(run.path / POSTMORTEM_JSON, pm)
    with replaced_whole(run.path / POSTMORTEM_MD) as tmp:
        tmp.write_text(render_markdown(pm), encoding="utf-8")
    return run
