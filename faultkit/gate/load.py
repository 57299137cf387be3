"""Which load the gate sends: the scenarios' background load, from the same sources in the
same order as the pytest plugin, and how it is described in progress lines and gate.md."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from faultkit.inventory import Node
from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile

__all__ = ["describe_profile", "gate_load_profile"]


def gate_load_profile(
    pytest_args: Sequence[str], environ: Mapping[str, str] = os.environ,
    node: Node | None = None,
) -> tuple[LoadProfile, str]:
    """The background load the gate scenarios run with, and where it came from, in the
    plugin's order: ``--load-profile`` among the gate's pytest arguments, else
    ``$FAULTKIT_LOAD_PROFILE``, else :data:`~faultkit.load.profile.BACKGROUND_PROFILE` (at
    the node's ``background_rate`` when the inventory gives one). (An
    ini file's ``faultkit_load_profile`` and per-scenario markers are not read: the gate
    scenarios set none.) A malformed profile raises ``ValueError`` naming its source."""
    text, source = None, ""
    for i, arg in enumerate(pytest_args):
        if arg == "--load-profile" and i + 1 < len(pytest_args):
            text, source = pytest_args[i + 1], "--load-profile"
        elif arg.startswith("--load-profile="):
            text, source = arg.partition("=")[2], "--load-profile"
    if text is None and environ.get("FAULTKIT_LOAD_PROFILE"):
        text, source = environ["FAULTKIT_LOAD_PROFILE"], "$FAULTKIT_LOAD_PROFILE"
    if not text and node is not None and node.background_rate is not None:
        profile = dataclasses.replace(BACKGROUND_PROFILE, rate=node.background_rate)
        return profile, f"the scenarios' default background load at {node.name}'s background_rate"
    if not text:
        return BACKGROUND_PROFILE, "the scenarios' default background load"
    try:
        return LoadProfile.from_string(text), source
    except ValueError as exc:
        raise ValueError(f"{source} {text!r}: {exc}") from None


def describe_profile(profile: LoadProfile) -> str:
    """``open loop 10 req/s`` or ``closed loop, 4 workers``."""
    if profile.rate is not None:
        return f"open loop {profile.rate:g} req/s"
    return f"closed loop, {profile.workers} worker{'s' * (profile.workers != 1)}"
