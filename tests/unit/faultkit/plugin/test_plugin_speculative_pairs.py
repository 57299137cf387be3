"""The ``speculative_config`` fixture's parametrisation: a node paired with each of its
candidate configs that changes its speculative decoding, and nothing else (the rule is
``Inventory.speculation_change``; ``candidate_config`` keeps every candidate)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INVENTORY = """\
nodes:
  - {name: plain, engine: sim, personality: vllm, base_url: "http://127.0.0.1:9", model: m,
     serving_config: plain1, candidate_configs: [plain1, plain2, spec], faults: ["*"]}
  - {name: speculating, engine: sim, personality: vllm, base_url: "http://127.0.0.1:9",
     model: m, serving_config: spec, candidate_configs: [plain1, spec, spec5], faults: ["*"]}
  - {name: none, engine: sim, personality: vllm, base_url: "http://127.0.0.1:9", model: m,
     faults: ["*"]}
serving_configs:
  plain1: {image: img}
  plain2: {image: img2}
  spec: {image: img, speculative: "ngram, 4 draft tokens"}
  spec5: {image: img, speculative: "ngram, 5 draft tokens"}
"""

TESTS = """\
import pytest

@pytest.mark.fault("rollout")
def test_speculative(node, speculative_config):
    pass

@pytest.mark.fault("rollout")
def test_rollout(node, candidate_config):
    pass
"""


def test_only_candidates_that_change_speculation_are_paired(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    inventory = pytester.makefile(".yaml", inventory=INVENTORY)
    pytester.makepyfile(test_pairs=TESTS)
    result = pytester.runpytest("--collect-only", "-q", f"--inventory={inventory}")
    ids = {line.strip() for line in result.outlines if "::" in line}
    assert {i for i in ids if "test_speculative" in i} == {
        "test_pairs.py::test_speculative[plain:spec]",
        "test_pairs.py::test_speculative[speculating:plain1]",
        "test_pairs.py::test_speculative[speculating:spec5]",
    }
    assert {i for i in ids if "test_rollout" in i} == {
        "test_pairs.py::test_rollout[plain:plain2]", "test_pairs.py::test_rollout[plain:spec]",
        "test_pairs.py::test_rollout[speculating:plain1]",
        "test_pairs.py::test_rollout[speculating:spec5]",
    }
