"""engine stall: the engine stops making progress while its container runs and its API
answers — its worker process SIGSTOPped (vLLM's ``VLLM::EngineCore``, SGLang's scheduler,
the simulator's engine core; on llama.cpp, whose one process is the server, the whole
server stops). Requests hang; ``/health`` may say 200 throughout and ``up`` stay 1; no
restart policy acts, because nothing exited. The revert (SIGCONT) is the only way back,
so the question is whether monitoring pages anyone meanwhile.

It FAILs when monitoring does not detect the stall within the node's detection objective
(``detection_s_max``, which the stall outlasts) — on an engine whose API outlives its
engine, only the stall alert does (``FaultkitEngineStalled`` in ``faultkit rules``, fed by
a probe that asks for a token: docs/slo.md, "A stalled engine") — or when, once resumed,
the node is not back within its recovery objective. Its latency while it drains the users
the stall held is shown, not judged: the hold is set by the objective, not by the node.
The report shows what each signal did: when the readiness probe and ``up`` turned red, or
that they never did."""

import pytest

from faultkit import Experiment, Node
from scenarios._expect import engine_pattern

#: how long the stall outlasts the node's detection objective: a stall reverted before the
#: objective elapsed could not tell monitoring that never sees it from monitoring that sees
#: only its aftermath (the latency burn of the users the SIGCONT releases)
PAST_OBJECTIVE_S = 5.0
#: users who wait a stall out (a first token within 90 s), at a rate whose held requests
#: stay under the client's concurrency through a 35 s stall: what the run measures is the
#: node's stall, not the load client's own timeouts or shedding
STALL_USERS = ("rate=5,concurrency=256,input_tokens=32,output_tokens=24,"
               "first_token_timeout_s=90,total_timeout_s=120,connect_timeout_s=2")


@pytest.mark.gate
@pytest.mark.fault("stall")
@pytest.mark.load_profile(STALL_USERS)
@pytest.mark.node_kind("engine")
async def test_engine_stall(experiment: Experiment, node: Node) -> None:
    hold_s = experiment.slo.detection_s_max + PAST_OBJECTIVE_S
    await experiment.run_fault("stall", hold_s=hold_s, params={"match": engine_pattern(node)})
    # the stall's users are released at once by the SIGCONT: the node serves slowly while
    # it drains them, whatever its config — the fault window's, reported, not judged; the
    # after window starts once they are served (docs/definitions.md, "The after window")
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
