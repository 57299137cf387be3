"""The fault kit: every fault is an async context manager built by :func:`make_fault`.

See :mod:`faultkit.faults.base` for the lifecycle contract and :mod:`faultkit.faults.registry`
for the blast-radius policy. One module per family: ``process``, ``network``, ``memory``,
``requests``, ``rollout``; undo steps (shared with the sweep) live in ``undo``, node
locks (one fault per node) in ``locks``, and the shielding of acts in ``acts``.
"""

from faultkit.faults.base import Fault
from faultkit.faults.registry import check_policy, fault_class, make_fault
from faultkit.model.kinds import FAULTS

__all__ = ["FAULTS", "Fault", "check_policy", "fault_class", "make_fault"]
