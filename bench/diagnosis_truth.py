"""The diagnosis truth table of one catalogue run: every incident report against the true
cause of its run (tests/e2e/diagnosis_truth.py), as JSON and a markdown table.

    .venv/bin/python bench/diagnosis_truth.py runs/lanes-<UTC time> [--json] [--dmesg FILE]

Reads the lanes' JUnit files (``faultkit lanes --run``'s ``*.xml``, or the e2e suite's
``<lane>/junit.xml``) for each test's run directory — found under the lanes directory by
its name when the catalogue was copied elsewhere — and the kernel log for the OOM claims:
``--dmesg``, a ``dmesg --follow`` recording of the session (the e2e suite's
``kernel0/dmesg.txt``), else the kernel's ring buffer as it is now.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.diagnosis_truth import judge, oom_kills_in, runs_from_junit
from tests.e2e.kernel_log import KernelLog


def _found(run_dir: Path | None, lanes_dir: Path) -> Path | None:
    """``run_dir`` as the JUnit file names it, or the directory of that name under
    ``lanes_dir`` (a catalogue copied away from where it ran)."""
    if run_dir is None or run_dir.exists():
        return run_dir
    return next(iter(lanes_dir.glob(f"*/runs/{run_dir.name}")), run_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lanes_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--dmesg", type=Path, default=Path("/nonexistent/dmesg.txt"),
                        help="a recorded kernel log (default: the ring buffer now)")
    args = parser.parse_args()
    junit = sorted([*args.lanes_dir.glob("*.xml"), *args.lanes_dir.glob("*/junit.xml")])
    if not junit:
        print(f"{args.lanes_dir}: no JUnit file (run `faultkit lanes --run` first)",
              file=sys.stderr)
        return 2
    kernel = KernelLog(args.dmesg)
    runs = {test: _found(run_dir, args.lanes_dir) for test, run_dir in
            runs_from_junit(junit).items()}
    rows = judge(runs.items(), oom_kills_in(kernel))
    out = {"cases": len(rows), "matches": sum(r.matches for r in rows),
           "misses": [{"test": r.test_id, "cause": r.cause, "problems": r.problems}
                      for r in rows if not r.matches],
           "rows": [{"test": r.test_id, "cause": r.cause, "brought_back": r.brought_back,
                     "match": r.matches} for r in rows]}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print("| Case | Cause the report names | What brought it back | Match |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| `{r.test_id}` | {r.cause} | {r.brought_back} | "
              f"{'yes' if r.matches else 'NO: ' + '; '.join(r.problems)} |")
    print(f"\n{out['matches']} of {out['cases']} cases match.")
    return 0 if out["matches"] == out["cases"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
