"""The diagnosis truth table of one catalogue run: every incident report against the true
cause of its run (tests/e2e/diagnosis_truth.py), as JSON and a markdown table.

    .venv/bin/python bench/diagnosis_truth.py runs/lanes-<UTC time> [--json]

Reads the lanes' JUnit files (``faultkit lanes --run``) for each test's run directory, and
the kernel log (``dmesg``) for the OOM claims.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.diagnosis_truth import judge, oom_kills_in, runs_from_junit
from tests.e2e.kernel_log import KernelLog


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lanes_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    junit = sorted(args.lanes_dir.glob("*.xml"))
    if not junit:
        print(f"{args.lanes_dir}: no JUnit file (run `faultkit lanes --run` first)",
              file=sys.stderr)
        return 2
    # the kernel's ring buffer as it is now (the e2e test records it for the whole session)
    kernel = KernelLog(Path("/nonexistent/dmesg.txt"))
    rows = judge(runs_from_junit(junit).items(), oom_kills_in(kernel))
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
