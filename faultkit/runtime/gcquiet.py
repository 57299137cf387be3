"""Keep Python's garbage collector from pausing the load client during a run.

A full (generation 2) collection walks every tracked object, and it stops the event
loop that runs the load, the observer and the fault while it does. In a pytest process
that has imported the whole harness and run scenarios before, that is 0.1–0.3 s on the
idle lab machine, and more on a busy one: long enough for requests to leave late and for
the ledger to read a stall of the client (``client_stalled``, docs/definitions.md).

:func:`collector_frozen` collects once *before* the run (no load yet), then moves every
object that survived into the collector's permanent generation (:func:`gc.freeze`): the
collections during the run walk only what the run itself allocates. On exit the objects
are unfrozen, so garbage among them is collected by the next run's collection.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_frozen"]


@contextmanager
def collector_frozen() -> Iterator[None]:
    """Collect now, freeze the survivors for the block, unfreeze after it."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
