"""engine stall: the engine stops making progress while its container runs and its API
answers — its worker process SIGSTOPped (vLLM's ``VLLM::EngineCore``, SGLang's scheduler,
the simulator's engine core; on llama.cpp, whose one process is the server, the whole
server stops). Requests hang; ``/health`` may say 200 throughout and ``up`` stay 1; no
restart policy acts, because nothing exited. The revert (SIGCONT) is the only way back,
so the question is whether monitoring pages anyone meanwhile.

It FAILs when monitoring does not detect the stall within the node's detection objective
(``detection_s_max``) — on an engine whose API outlives its engine, only the stall alert
does (``FaultkitEngineStalled`` in ``faultkit rules``, fed by a probe that asks for a
token: docs/slo.md, "A stalled engine") — or when, once resumed, the node is not back
within its recovery objective. Its latency while it drains the users the stall held is
shown, not judged: the hold is set by the alert's window, not by the node. The report
shows what each signal did: when the readiness probe and ``up`` turned red, or that they
never did."""

import pytest

from faultkit import Experiment
from faultkit.inventory import Node
from scenarios._expect import engine_pattern

#: held past the stall alert's window (15 s, slo.rules.STALL_WINDOW) and its evaluation,
#: inside the lab's detection objective (30 s)
STALL_HOLD_S = 20.0


@pytest.mark.gate
@pytest.mark.fault("stall")
@pytest.mark.node_kind("engine")
async def test_engine_stall(experiment: Experiment, node: Node) -> None:
    await experiment.run_fault("stall", hold_s=STALL_HOLD_S, params={"match": engine_pattern(node)})
    # 20 s of users are released at once by the SIGCONT: the node serves slowly while it
    # drains them, whatever its config — reported (the after window), not judged
    verdict = experiment.check(experiment.default_checks(ttft_after=False))
    assert verdict.passed, verdict.summary()
