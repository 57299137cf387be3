"""The scratch nodes the fault integration tests act on live in :mod:`testbed.scratch`
(the torture bench uses them too); re-exported here for the tests' imports."""

from testbed.scratch import (
    TEST_LABELS,
    assert_restored,
    free_port,
    remove_scratch,
    scratch_node,
    snapshot,
    write_inventory,
)

__all__ = ["TEST_LABELS", "assert_restored", "free_port", "remove_scratch", "scratch_node",
           "snapshot", "write_inventory"]
