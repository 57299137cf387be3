"""How long the scenario catalogue takes in lanes, and what every scenario concluded.

Runs ``faultkit lanes --run`` with the given plan (or reads the directory of an earlier
run) and summarises each pass from its JUnit file: when it started, how long it took, how
many scenarios passed, and every one that did not, with its verdict (faultkit's
``faultkit_verdict`` property: FAIL or INCONCLUSIVE) and message. The wall time is from the
first pass's start to the last one's end, as the JUnit files stamp them.

    .venv/bin/python bench/catalogue_lanes.py --lanes 5 --json …                  # CI's plan
    .venv/bin/python bench/catalogue_lanes.py --lanes 5 --alone litellm --json …  # gateway alone
    .venv/bin/python bench/catalogue_lanes.py --from runs/lanes-20261205T004433Z --json …

Run it on the testbed with nothing else running: the lanes share its two cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any


def _junit_files(logs: Path) -> dict[str, Path]:
    """label → JUnit file, for ``faultkit lanes --run`` (``LABEL.xml``; its merge of them
    all, ``junit.xml``, is no pass) and the e2e suite's layout (``LABEL/junit.xml``)."""
    found = {p.stem: p for p in logs.glob("*.xml") if p.name != "junit.xml"}
    found.update({p.parent.name: p for p in logs.glob("*/junit.xml")})
    return dict(sorted(found.items()))


def summarise(logs: Path) -> dict[str, Any]:
    passes: dict[str, Any] = {}
    bounds: list[tuple[float, float]] = []
    for label, path in _junit_files(logs).items():
        root = ET.parse(path).getroot()
        suite = root.find("testsuite") if root.tag == "testsuites" else root
        assert suite is not None, path
        start = datetime.fromisoformat(suite.get("timestamp", "")).timestamp()
        seconds = float(suite.get("time", "0"))
        bounds.append((start, start + seconds))
        not_passed = {}
        passed = 0
        for case in suite.iter("testcase"):
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                not_passed[case.get("name", "?")] = {
                    "verdict": props.get("faultkit_verdict"),
                    "message": (bad.get("message") or "")[:300]}
            elif case.find("skipped") is None:
                passed += 1
        passes[label] = {"started_s": start, "seconds": round(seconds, 1), "passed": passed,
                         "not_passed": not_passed}
    first = min(b[0] for b in bounds)
    for entry in passes.values():
        entry["started_s"] = round(entry["started_s"] - first, 1)
    return {"wall_s": round(max(b[1] for b in bounds) - first, 1), "passes": passes,
            "not_passed": sum(len(p["not_passed"]) for p in passes.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--alone", action="append", default=[], metavar="ENGINE")
    parser.add_argument("--from", dest="source", type=Path,
                        help="summarise this earlier run's directory instead of running")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    args = parser.parse_args()
    logs = args.source
    if logs is None:
        logs = Path("runs") / time.strftime("lanes-bench-%Y%m%dT%H%M%SZ", time.gmtime())
        argv = [sys.executable, "-m", "faultkit.cli", "lanes", "--lanes", str(args.lanes),
                *(a for engine in args.alone for a in ("--alone", engine)), "--run",
                "--logs", str(logs)]
        subprocess.run(argv, check=False)
    summary = {"plan": {"lanes": args.lanes, "alone": args.alone, "logs": str(logs)}
               if args.source is None else {"from": str(args.source)}, **summarise(logs)}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
