"""scenarios.test_latency.ttft_floor: which answers the delay's floor is judged on.

The window's end is the revert's *start*: a request sent once the redirect is gone reaches
the node directly, so its fast answer says nothing about the delay (a lab run of
2026-12-05 had eleven of them, TTFT 0.06–0.16 s, and failed on them). An undelayed answer
that came before the revert began still counts, and still fails the check.
"""

from __future__ import annotations

from faultkit.model.records import RequestRecord
from scenarios.test_latency import TTFT_FLOOR_S, ttft_floor

T_EFFECT, REVERT_BEGAN = 100.0, 108.0


def answered(sent: float, ttft: float) -> RequestRecord:
    return RequestRecord(id=f"r{sent}", node="n", kind="chat", t_invoke=sent, status="ok",
                         t_end=sent + ttft + 0.1, t_first_token=sent + ttft, t_scheduled=sent)


DELAYED = [answered(T_EFFECT + 0.5 * i, 0.21) for i in range(15)]  # 100.0 … 107.0


def test_answers_sent_as_the_revert_began_are_not_judged() -> None:
    # scheduled 0.04 s before the revert began, sent as it began: straight to the node
    sent_after = [answered(REVERT_BEGAN - 0.04 + 0.001 * i, 0.06) for i in range(11)]
    floor = ttft_floor(DELAYED + sent_after, T_EFFECT, REVERT_BEGAN, answered_by=REVERT_BEGAN)
    assert floor is not None and floor >= TTFT_FLOOR_S
    # without the first-token bound they would be judged (the old window), and fail it
    old = ttft_floor(DELAYED + sent_after, T_EFFECT, REVERT_BEGAN + 1)
    assert old is not None and old < TTFT_FLOOR_S


def test_an_undelayed_stretch_before_the_revert_still_fails() -> None:
    bypassed = [answered(T_EFFECT + 2 + 0.1 * i, 0.02) for i in range(10)]  # answered by 103.1
    floor = ttft_floor(DELAYED + bypassed, T_EFFECT, REVERT_BEGAN, answered_by=REVERT_BEGAN)
    assert floor is not None and floor < TTFT_FLOOR_S


def test_a_delayed_answer_that_crosses_the_revert_is_left_out() -> None:
    crossing = answered(REVERT_BEGAN - 0.1, 0.2)  # first token after the revert began
    assert ttft_floor([crossing], T_EFFECT, REVERT_BEGAN, answered_by=REVERT_BEGAN) is None
