"""One scenario run in a process of its own, for the tests that kill or starve the harness
(``test_harness_chaos``)::

    python -m tests.integration.chaos_scenario INVENTORY NODE RUNS_DIR KIND HOLD_S

It runs ``KIND`` on ``NODE`` for ``HOLD_S`` seconds under the background load, judges it on
the node's objectives and renders its report, as a scenario does. Its first line on stdout
is the run directory (so the test knows where to watch), its last the verdict's outcome.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from faultkit.experiment import Experiment, NotJudgeable
from faultkit.inventory import load_inventory
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.rundir import RunDir


def main(argv: list[str]) -> int:
    inventory_file, node_name, runs_dir, kind, hold_s = argv
    inventory = load_inventory(Path(inventory_file))
    node = inventory.node(node_name)
    run = RunDir.create(Path(runs_dir), kind, node.name)
    print(run.path, flush=True)
    exp = Experiment(scenario=kind, node=node, inventory=inventory, run=run,
                     load_profile=BACKGROUND_PROFILE)

    async def scenario() -> None:
        await exp.run_fault(kind, hold_s=float(hold_s))
        exp.check()

    try:
        asyncio.run(scenario())
    except NotJudgeable:
        pass  # INCONCLUSIVE before injecting: the verdict says why
    finally:
        exp.finalize()
    print(exp.verdict.outcome if exp.verdict is not None else "no verdict", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
