"""reports: render run directories into incident reports, gate summaries and budget reviews.

``render_incident(run_dir)`` writes ``incident.md`` + ``timeline.png`` from the run
directory's files alone; ``render_gate`` / ``render_budget`` render the gate and budget JSON.
"""

from reports.diagnosis import UNDIAGNOSED_KEY, Diagnosis, diagnose
from reports.load import RunData, is_run_dir, load_run
from reports.prevention import RULES, Change, changes_for
from reports.render import render_budget, render_gate, render_incident

__all__ = [
    "RULES",
    "UNDIAGNOSED_KEY",
    "Change",
    "Diagnosis",
    "RunData",
    "changes_for",
    "diagnose",
    "is_run_dir",
    "load_run",
    "render_budget",
    "render_gate",
    "render_incident",
]
