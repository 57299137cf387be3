"""A neighbour in ``test_contained_failure`` takes load at no more than its own background
rate: at the victim's rate the lab's gateway (≈ 8 req/s, ``background_rate: 5``) queued
its users past the end of the run, and the check counted them as the fault's harm (run K3,
``test_contained_failure[sim-vllm-h2]``: 74 "failed elsewhere", every one a gateway user
still waiting)."""

from __future__ import annotations

import dataclasses

from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile, within_node_rate


def test_a_neighbour_sized_for_less_gets_its_own_rate() -> None:
    slower = within_node_rate(BACKGROUND_PROFILE, 5.0)
    assert slower.rate == 5.0
    assert dataclasses.replace(slower, rate=BACKGROUND_PROFILE.rate) == BACKGROUND_PROFILE


def test_a_neighbour_that_takes_more_keeps_the_victims_rate() -> None:
    assert within_node_rate(BACKGROUND_PROFILE, 50.0) is BACKGROUND_PROFILE
    assert within_node_rate(BACKGROUND_PROFILE, None) is BACKGROUND_PROFILE


def test_a_closed_loop_profile_is_left_alone() -> None:
    closed = LoadProfile(concurrency=4, requests=10)
    assert within_node_rate(closed, 1.0) is closed
