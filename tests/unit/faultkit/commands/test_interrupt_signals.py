"""Ctrl-C, SIGTERM and SIGHUP revert: `faultkit inject`'s hold loop and the gate's work run
under `until_interrupted` (checked in a subprocess with a fake fault), and an interrupted
gate ends its scenario run (as Ctrl-C would) before it goes on to revert."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from faultkit.commands.interrupt import INTERRUPT_SIGNALS
from faultkit.gate import scenarios as gate_scenarios
from faultkit.journal import FaultJournal
from faultkit.runtime.progress import Progress
from tests.paths import REPO

ROOT = REPO

#: argv[1]: "inject" (faultkit inject's hold loop) or "gate" (a gate-shaped body);
#: argv[2]: the journal directory. Prints "applied" once the fake fault is in, then, at
#: the end, what the fake world looks like and the signal that ended the run.
_CHILD = textwrap.dedent('''
    import asyncio, json, sys
    from pathlib import Path
    from faultkit.commands import inject
    from faultkit.commands.interrupt import until_interrupted
    from faultkit.journal import FaultJournal
    from tests.unit.faults_fake import WORLD, FakeFault, node

    def emit(event):
        if event.kind == "inject_end":
            print("applied", flush=True)

    fault = FakeFault(node(), journal=FaultJournal(Path(sys.argv[2])), timeline=emit)

    async def gate_shaped():
        try:
            await fault.inject()
            await asyncio.sleep(60)
        finally:
            await fault.revert()

    if sys.argv[1] == "inject":
        signum = asyncio.run(inject._run(fault, 60))
    else:
        _, signum = asyncio.run(until_interrupted(gate_shaped()))
    print(json.dumps({"world": WORLD, "signal": signum}), flush=True)
''')


@pytest.mark.parametrize("how", ["inject", "gate"])
@pytest.mark.parametrize("signum", INTERRUPT_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_each_interrupt_signal_reverts(how: str, signum: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, how, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # our own Ctrl-C stays ours
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "applied"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"world": {"a": "ok"}, "signal": signum}
    assert [r.state for r in FaultJournal(tmp_path).records()] == ["reverted"]


def test_sighup_is_an_interrupt_signal() -> None:
    assert signal.SIGHUP in INTERRUPT_SIGNALS


async def test_cancelled_gate_ends_its_scenario_run_first(tmp_path: Path) -> None:
    flag, ready = tmp_path / "sigint", tmp_path / "ready"
    child = textwrap.dedent(f'''
        import signal, sys, time
        def on_sigint(*_):
            time.sleep(0.3)  # pytest tearing down: reverting the fault in hand
            open({str(flag)!r}, "w").write("reverted")
            sys.exit(2)
        signal.signal(signal.SIGINT, on_sigint)
        open({str(ready)!r}, "w").close()
        time.sleep(60)
    ''')
    progress = Progress(live=False, stream=io.StringIO(), tick_s=None)
    run = asyncio.ensure_future(
        gate_scenarios.run_scenarios([sys.executable, "-c", child], tmp_path, progress))
    assert await asyncio.to_thread(_wait_for, ready)
    t0 = time.monotonic()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert flag.read_text() == "reverted"  # the run had ended before the cancellation went on
    assert time.monotonic() - t0 >= 0.3


async def test_a_scenario_run_that_ignores_sigint_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    ready = tmp_path / "ready"
    child = (f"import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             f"open({str(ready)!r}, 'w').close(); time.sleep(60)")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", child)
    assert await asyncio.to_thread(_wait_for, ready)
    t0 = time.monotonic()
    assert await gate_scenarios.end_scenarios(proc, 0.3) == -signal.SIGKILL
    assert 0.3 <= time.monotonic() - t0 < 10


def _wait_for(path: Path) -> bool:
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()
