"""A run's route and pages (:mod:`faultkit.experiment.pages`): the root route noted by the
harness as the run starts, each page naming the node put on the timeline at its arrival,
the pager not answering noted by the harness when the pages are collected; nothing
without an Alertmanager. Against the loopback fakes of ``tests/unit/paging_fakes.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultkit.experiment.pages import collect_pages, watch_alertmanager
from faultkit.experiment.state import ExperimentState
from faultkit.inventory import Inventory
from faultkit.load.profile import LoadProfile
from faultkit.model.events import EventKind
from faultkit.rundir import RunDir
from tests.unit.paging_fakes import CLOSED, PagingFakes, inventory_with


@pytest.fixture
def fakes() -> Iterator[PagingFakes]:
    served = PagingFakes()
    with served.server:
        yield served


def state_of(inventory: Inventory, tmp_path: Path) -> ExperimentState:
    return ExperimentState(scenario="s", node=inventory.node("n"), inventory=inventory,
                           run=RunDir(tmp_path), load_profile=LoadProfile())


def test_the_route_as_the_run_starts_and_the_pages_naming_the_node(
        fakes: PagingFakes, tmp_path: Path) -> None:
    state = state_of(inventory_with(
        f"alertmanager: {{url: '{fakes.url}', pager_url: '{fakes.url}'}}"), tmp_path)
    before = time.time()
    alertmanager = watch_alertmanager(state)
    assert alertmanager is not None and alertmanager.url == fakes.url
    alertmanager.close()
    collect_pages(state, 100.0, 200.0)
    route, page = state.events
    assert (route.kind, route.source, route.node) == (EventKind.AM_ROUTE, "harness", "n")
    assert before <= route.t <= time.time()
    assert route.data["url"] == fakes.url and route.data["pager"] is True
    assert route.data["group_wait_s"] == 2.0 and "from_history" not in route.data
    assert (page.kind, page.t, page.node, page.data["status"]) == (
        EventKind.PAGED, 105.0, "n", "firing")
    [asked] = fakes.asked
    assert float(asked["since"][0]) == 100.0 and float(asked["until"][0]) == 200.0
    assert state.run.timeline() == [page, route]  # the run's timeline file, oldest first


def test_a_pager_that_does_not_answer_is_a_harness_note_when_collected(
        fakes: PagingFakes, tmp_path: Path) -> None:
    state = state_of(inventory_with(
        f"alertmanager: {{url: '{fakes.url}', pager_url: '{CLOSED}'}}"), tmp_path)
    before = time.time()
    collect_pages(state, 100.0, 200.0)
    [down] = state.events
    assert (down.kind, down.source, down.node) == (EventKind.PAGER_DOWN, "harness", "n")
    assert before <= down.t <= time.time() and down.data["detail"]


def test_no_pager_no_pages_and_no_alertmanager_nothing(
        fakes: PagingFakes, tmp_path: Path) -> None:
    state = state_of(inventory_with(f"alertmanager: {{url: '{fakes.url}'}}"), tmp_path)
    collect_pages(state, 100.0, 200.0)
    assert state.events == [] and fakes.asked == []
    bare = state_of(inventory_with(""), tmp_path / "bare")
    assert watch_alertmanager(bare) is None
    collect_pages(bare, 100.0, 200.0)
    assert bare.events == []
