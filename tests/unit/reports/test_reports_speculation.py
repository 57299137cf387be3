"""test_speculative's incident report: the per-class table of the change of speculative
decoding, read from run.json's fault result (what the scenario measured), beside the
rollout's own story."""

from __future__ import annotations

import json
import random
from pathlib import Path

from faultkit.experiment.speculation import SpeculationCheck
from faultkit.inventory import parse_inventory
from reports import render_incident
from slo.speculation import ClassFigures
from tests.unit.reports_helpers import copy_run, section, table_problems

INVENTORY = """\
nodes:
  - {name: n, engine: sim, personality: vllm, base_url: "http://127.0.0.1:9", model: m,
     serving_config: plain, workload: extractive}
serving_configs:
  plain: {image: img}
  spec: {image: img, speculative: "ngram, 4 draft tokens"}
"""


def _figures(workload: str, centre: float, seed: int, drafted: float | None) -> ClassFigures:
    rng = random.Random(seed)
    tpots = tuple(centre * rng.uniform(0.9, 1.1) for _ in range(30))
    return ClassFigures(workload, 30, 30, tpots, 120.5 if drafted else 80.25,
                        drafted, None if drafted is None else drafted * 0.7)


def test_the_report_shows_each_class_on_both_configs(tmp_path: Path) -> None:
    node = parse_inventory(INVENTORY, source="<test>").node("n")
    spec = SpeculationCheck(node, 6.0, None, "ngram, 4 draft tokens", say=lambda _: None)
    spec.current = {"free": _figures("free", 0.020, 1, None),
                    "extractive": _figures("extractive", 0.020, 2, None)}
    spec.candidate = {"free": _figures("free", 0.030, 3, 400.0),
                      "extractive": _figures("extractive", 0.008, 4, 400.0)}
    run = copy_run("failed-rollout", tmp_path)
    info = json.loads((run / "run.json").read_text())
    info["fault_result"] = {**info.get("fault_result", {}), "speculation": spec.to_json()}
    (run / "run.json").write_text(json.dumps(info))

    md = render_incident(run).read_text()

    table = section(md, "Speculative decoding: off → ngram, 4 draft tokens")
    assert table, md
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| class")}
    assert set(rows) == {"free", "extractive (declared)", "mixed"}
    assert "| **slower**: TPOT ×1.5" in rows["free"]
    assert "| faster: TPOT ×0.4" in rows["extractive (declared)"]
    # output tokens/s and acceptance, each config's, as the scenario measured them
    assert "| 80.2 → 120.5 |" in rows["free"] and "| — → 70 % |" in rows["free"]
    assert "declared workload: **extractive**" in table
    assert not table_problems(md)


def test_a_run_without_speculation_has_no_such_section(tmp_path: Path) -> None:
    md = render_incident(copy_run("failed-rollout", tmp_path)).read_text()
    assert "Speculative decoding" not in md
