"""A pytest plugin the gate loads into its scenario run (``-p faultkit.gate.feed``).

It appends one JSON line per event to the file named by ``$FAULTKIT_GATE_FEED``, flushed at
once, so ``faultkit gate`` can show progress while pytest runs: ``{"event": "collected",
"names": [...]}`` when collection (with ``-m gate``'s deselection) is final, then
``{"event": "result", "name", "word", "passed", "duration_s"}`` as each scenario finishes.

The word is pytest's own (``pytest_report_teststatus``, so faultkit's INCONCLUSIVE and
ACCEPTED appear as the terminal shows them): that of the first phase (setup, call,
teardown) that did not pass, else the call's. Names are JUnit's testcase names, as in
``gate.json``. This reads pytest's hooks, not its terminal output, so it does not depend on
verbosity, colour or pytest's output format; JUnit XML stays the gate's source of truth for
the decision. Without the variable the plugin does nothing.

A gate across a pool (:mod:`.gate_pool`) gives each node's run its share of the scenarios
in ``$FAULTKIT_GATE_ONLY`` (a JSON list of test names, ``test_kill[sim-vllm-h2]``): the
plugin deselects every other collected scenario, as ``-m gate`` does, before the
``collected`` event.

``$FAULTKIT_GATE_ORDER`` (a JSON list of scenario functions, ``test_limits``) moves those
scenarios ahead in that order — the gate's risk-first order (:mod:`.order`) — and the
``collected`` event lists them in the order they run.

``$FAULTKIT_GATE_STOP_FILE`` (a gate across a pool that stops at its first failure) is
written by the first scenario of any node's run that does not pass; every other run ends
after the scenario it has in hand (:meth:`_Feed._stop_with_the_pool`).

The gate's side: :func:`watching` follows the file while pytest runs and
:class:`FeedState` prints the list and each result once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import pytest

from faultkit.gate.decision import client_stalled
from faultkit.gate.order import first_rank
from faultkit.runtime.progress import Progress

FEED_ENV = "FAULTKIT_GATE_FEED"
ONLY_ENV = "FAULTKIT_GATE_ONLY"
ORDER_ENV = "FAULTKIT_GATE_ORDER"
STOP_ENV = "FAULTKIT_GATE_STOP_FILE"


class _Feed:
    def __init__(self, path: str, config: pytest.Config) -> None:
        self.config = config
        self.fh: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 (session-long)
        self.reports: dict[str, list[pytest.TestReport]] = {}
        self.session: pytest.Session | None = None
        stop = os.environ.get(STOP_ENV)
        self.stop_file = Path(stop) if stop else None

    def write(self, data: dict[str, Any]) -> None:
        self.fh.write(json.dumps(data) + "\n")
        self.fh.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.session = session
        self.write({"event": "collected", "names": [item.name for item in session.items]})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.setdefault(report.nodeid, []).append(report)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        reports = self.reports.pop(nodeid, [])
        if not reports:
            return
        config = self.config
        chosen = next((r for r in reports if not r.passed), None) or next(
            (r for r in reports if r.when == "call"), reports[0]
        )
        category, _letter, word = config.hook.pytest_report_teststatus(
            report=chosen, config=config
        )
        if isinstance(word, tuple):
            word = word[0]
        name = nodeid.rsplit("::", 1)[-1]
        self.write(
            {
                "event": "result",
                "name": name,
                "word": str(word or category).upper(),
                "passed": category == "passed",
                "duration_s": round(sum(r.duration for r in reports), 3),
            }
        )
        self._stop_with_the_pool(name, category == "passed", reports)

    def _stop_with_the_pool(self, name: str, passed: bool,
                            reports: list[pytest.TestReport]) -> None:
        """A pool node's run (``$FAULTKIT_GATE_STOP_FILE``, shared by the pool's runs):
        a scenario that did not pass writes the file; once it exists, every run ends after
        its scenario in hand — as ``-x`` ends its own (exit 1), none cut short. A scenario
        INCONCLUSIVE because the load client stalled does not write it: the gate runs it
        again (:func:`faultkit.gate.run.run_gate`), and it decides nothing yet."""
        if self.stop_file is None:
            return
        if not passed and not self.stop_file.exists() and not _client_stalled(reports):
            self.stop_file.write_text(name, encoding="utf-8")
        if self.stop_file.exists() and self.session is not None and passed:
            failed = self.stop_file.read_text(encoding="utf-8", errors="replace").strip()
            self.session.shouldfail = (f"{failed or 'a scenario'} did not pass on another "
                                       "node of the pool: the gate's decision is FAIL")

    def close(self) -> None:
        self.fh.close()


def _client_stalled(reports: list[pytest.TestReport]) -> bool:
    """Whether the scenario's run directory (its ``faultkit_run_dir`` property) says it was
    INCONCLUSIVE because the load client stalled (:func:`.decision.client_stalled`)."""
    run_dir = next((str(v) for r in reports for k, v in r.user_properties
                    if k == "faultkit_run_dir"), None)
    return run_dir is not None and client_stalled(Path(run_dir))


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(FEED_ENV)
    if path:
        config.pluginmanager.register(_Feed(path, config), "faultkit-gate-feed")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the scenarios ``$FAULTKIT_GATE_ONLY`` names (when it is set), then move
    the scenario functions ``$FAULTKIT_GATE_ORDER`` lists ahead, in its order (the gate's
    risk-first order, :mod:`.order`); the rest keep the catalogue's order."""
    raw = os.environ.get(ONLY_ENV)
    if raw is not None:
        wanted = set(json.loads(raw))
        kept = [item for item in items if item.name in wanted]
        dropped = [item for item in items if item.name not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    first = os.environ.get(ORDER_ENV)
    if first is not None:
        key = first_rank(json.loads(first))
        items[:] = sorted(items, key=lambda item: key(item.name))


def collected_names(feed: Path) -> list[str] | None:
    """The scenario names the feed's ``collected`` event lists, in the order they run;
    ``None`` when the run wrote none (it ended before its collection did)."""
    try:
        text = feed.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for raw in text.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "collected":
            return [str(n) for n in event.get("names") or ()]
    return None


def pytest_unconfigure(config: pytest.Config) -> None:
    feed = config.pluginmanager.get_plugin("faultkit-gate-feed")
    if isinstance(feed, _Feed):
        feed.close()


# --------------------------------------------------------------------------- the gate's side


@contextlib.asynccontextmanager
async def watching(feed: Path, state: FeedState) -> AsyncIterator[None]:
    """Follow ``feed`` while the body runs (``faultkit gate``'s side of the feed); read what
    is left of it once the body ends."""
    watcher = asyncio.create_task(_follow(feed, state))
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        state.read(feed)


class FeedState:
    """What has been read of the feed file, and printing each new event once."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.offset = 0
        self.total = 0
        self.finished = 0
        self.step: Any = None

    def read(self, feed: Path) -> None:
        try:
            with feed.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for raw in complete.splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.show(event)

    def show(self, event: dict[str, Any]) -> None:
        if event.get("event") == "collected":
            names = [str(n) for n in event.get("names") or ()]
            self.total = len(names)
            self.progress(f"{len(names)} gate scenario{'s' * (len(names) != 1)}:")
            for name in names:
                self.progress(f"  · {name}")
        elif event.get("event") == "result":
            self.finished += 1
            mark = "✓" if event.get("passed") else "✗"
            duration = event.get("duration_s")
            took = f" ({duration:.1f} s)" if isinstance(duration, int | float) else ""
            self.progress(
                f"{mark} [{self.finished}/{self.total or '?'}] {event.get('name')}: "
                f"{event.get('word')}{took}"
            )


async def _follow(feed: Path, state: FeedState) -> None:
    while True:
        state.read(feed)
        await asyncio.sleep(0.3)
