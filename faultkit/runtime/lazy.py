"""Names a package offers at its top but imports on first use (PEP 562).

A package whose ``__init__`` must stay light (``faultkit``, imported by every
``faultkit.*`` import, the pytest plugin's included; ``faultkit.experiment``, whose light
modules the plugin imports) lists its names as ``name → module`` and installs the two
hooks this module makes::

    __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)

The type checker reads the same names from an ``if TYPE_CHECKING:`` import block.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name of ``exports`` is imported
    from its module when first read and kept in the package's namespace; any other
    unknown name raises ``AttributeError`` as usual."""
    namespace = sys.modules[package].__dict__

    def getattr_(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
