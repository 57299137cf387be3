"""Workload classes: each class's prompts, the profile key, and the class of every request in
the ledger (docs/load.md, "Workload classes")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pyarrow as pa
import pytest

from faultkit.load import LoadGenerator, LoadProfile, Target
from faultkit.load.bodies import RequestBodies
from faultkit.load.columnar import record_batch, records_from_batch
from faultkit.load.fakeserver import serve
from faultkit.load.prompts import (
    MIXED,
    WORKLOADS,
    synthetic_prompt,
    workload_of,
    workload_prompt,
)
from faultkit.model.records import RequestRecord


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def recurring_trigrams(text: str) -> float:
    """The fraction of the text's word trigrams seen earlier in it: what an n-gram
    (prompt-lookup) drafter can find."""
    words = text.split()
    seen: set[tuple[str, ...]] = set()
    recurring = total = 0
    for i in range(len(words) - 2):
        gram = tuple(words[i:i + 3])
        total += 1
        recurring += gram in seen
        seen.add(gram)
    return recurring / total


def test_a_free_prompt_is_the_synthetic_prompt() -> None:
    assert workload_prompt("free", 64, seed=3, index=7) == synthetic_prompt(64, seed=3, index=7)


@pytest.mark.parametrize("n_tokens", [8, 64, 512])
def test_an_extractive_prompt_repeats_its_passage_at_the_requested_length(n_tokens: int) -> None:
    prompt = workload_prompt("extractive", n_tokens, seed=1, index=5)
    assert prompt == workload_prompt("extractive", n_tokens, seed=1, index=5)  # deterministic
    assert abs(len(prompt.split()) - n_tokens) <= 3
    head, sep, tail = prompt.partition(" repeat it ")
    assert sep and head.split(maxsplit=1)[1] == tail  # the passage, then the passage again
    assert prompt.split()[0] == "5"  # the index leads: no two requests share a prefix


def test_extractive_prompts_recur_where_free_ones_do_not() -> None:
    extractive = recurring_trigrams(workload_prompt("extractive", 400, seed=0, index=1))
    free = recurring_trigrams(workload_prompt("free", 400, seed=0, index=1))
    assert extractive >= 0.45
    assert free <= 0.02


def test_mixed_alternates_the_classes() -> None:
    assert [workload_of(MIXED, i) for i in range(4)] == [*WORKLOADS, *WORKLOADS]
    assert workload_of("extractive", 3) == "extractive"


def test_an_unknown_workload_is_refused_naming_the_classes() -> None:
    with pytest.raises(ValueError, match="free, extractive, mixed"):
        LoadProfile(workload="poetry")
    assert LoadProfile.from_string("workload=extractive").workload == "extractive"


def test_the_body_carries_the_class_prompt() -> None:
    bodies = RequestBodies(Target("t", "http://127.0.0.1:9", "m"),
                           LoadProfile(workload=MIXED, input_tokens=40))
    first, second = (json.loads(bodies.body(i))["messages"][0]["content"] for i in (0, 1))
    assert " repeat it " not in first and bodies.workload(0) == "free"
    assert " repeat it " in second and bodies.workload(1) == "extractive"


async def test_every_request_of_a_mixed_run_carries_its_class(server: str) -> None:
    profile = LoadProfile(concurrency=2, requests=10, output_tokens=4, workload=MIXED)
    result = await LoadGenerator(Target("t", server, "m"), profile).run()
    classes = sorted((int(r.id.rsplit("-", 1)[1]), r.workload) for r in result.records)
    assert [c for _, c in classes] == [workload_of(MIXED, i) for i, _ in classes]
    assert {c for _, c in classes} == set(WORKLOADS)


def test_the_columnar_ledger_keeps_the_class_and_reads_old_files() -> None:
    record = RequestRecord(id="r-1", node="n", kind="chat", t_invoke=1.0, status="ok",
                           t_end=2.0, workload="extractive")
    assert records_from_batch(record_batch([record])) == [record]
    batch = record_batch([record])
    old = pa.RecordBatch.from_arrays(
        [batch.column(name) for name in batch.schema.names if name != "workload"],
        names=[name for name in batch.schema.names if name != "workload"])
    assert records_from_batch(old)[0].workload is None
