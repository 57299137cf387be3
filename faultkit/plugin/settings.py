"""Plugin settings, resolved once (on first use): command line > ``FAULTKIT_*`` environment > ini
> default (for the inventory: the CLI's :func:`~faultkit.commands.input.default_inventory`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Settings:
    inventory: Path
    inventory_source: str  # where the value came from, for error messages
    nodes: tuple[str, ...]
    prometheus_url: str | None
    runs_dir: Path
    load_profile: str | None
    serving_config: str | None
    dry_run: bool
    #: the live status line: ``auto`` (on a terminal), ``on`` or ``off`` (faultkit.experiment.live)
    live: str = "auto"
    #: how long ``test_soak`` soaks (s); None: the ``soak`` scenarios are deselected
    soak_s: float | None = None
    #: the context limit per request (tokens) of the config the node served before this
    #: candidate; None: not given (``test_limits`` then judges the node's own limit only)
    current_context_limit: int | None = None


#: the values ``--faultkit-live`` / ``$FAULTKIT_LIVE`` / ini ``faultkit_live`` accept
LIVE_MODES = ("auto", "on", "off")


def _pick(
    config: pytest.Config, env: Mapping[str, str], name: str, flag: str | None = None
) -> tuple[Any, str]:
    value = config.getoption(f"faultkit_{name}", default=None)
    if value is not None:
        return value, flag or f"--{name.replace('_', '-')}"
    env_name = f"FAULTKIT_{name.upper()}"
    if env.get(env_name):
        return env[env_name], f"${env_name}"
    ini = config.getini(f"faultkit_{name}")
    if ini not in (None, "", []):
        return ini, f"ini faultkit_{name}"
    return None, "default"


def _truthy(value: object) -> bool:
    return value is True or str(value).lower() in ("1", "true", "yes", "on")


def resolve_settings(config: pytest.Config, env: Mapping[str, str]) -> Settings:
    inventory, source = _pick(config, env, "inventory")
    nodes, _ = _pick(config, env, "node")
    prom, _ = _pick(config, env, "prometheus_url")
    runs, _ = _pick(config, env, "runs_dir")
    profile, _ = _pick(config, env, "load_profile")
    dry, _ = _pick(config, env, "dry_run")
    candidate, _ = _pick(config, env, "serving_config")
    live, live_source = _pick(config, env, "live", "--faultkit-live")
    live = str(live).strip().lower() if live is not None else "auto"
    if live not in LIVE_MODES:
        raise pytest.UsageError(
            f"{live_source}: {live!r} is not a live mode (one of: {', '.join(LIVE_MODES)})"
        )
    soak_s = soak_seconds(config, env)
    current_limit = current_context_limit(config, env)
    # the entry points' default, the same as the CLI's
    from faultkit.commands.input import default_inventory

    inventory_path = Path(inventory) if inventory else default_inventory()
    if not inventory_path.is_absolute():
        inventory_path = Path(config.invocation_params.dir) / inventory_path
    return Settings(
        inventory=inventory_path,
        inventory_source=source if inventory else "the default inventory",
        nodes=tuple(n.strip() for n in str(nodes).split(",") if n.strip()) if nodes else (),
        prometheus_url=str(prom).rstrip("/") if prom else None,
        runs_dir=Path(runs) if runs else Path(config.invocation_params.dir) / "runs",
        load_profile=str(profile) if profile else None,
        serving_config=str(candidate) if candidate else None,
        dry_run=_truthy(dry),
        live=live,
        soak_s=soak_s,
        current_context_limit=current_limit,
    )


#: the longest soak one scenario may ask for: a day (a longer one is a load run)
MAX_SOAK_S = 86_400.0


def soak_seconds(config: pytest.Config, env: Mapping[str, str]) -> float | None:
    """The soak duration given (``--soak-s``, ``$FAULTKIT_SOAK_S``, ini), None if none;
    a bad one is a :class:`pytest.UsageError`."""
    soak, source = _pick(config, env, "soak_s")
    return _seconds(soak, source) if soak not in (None, "") else None


def _seconds(value: object, source: str) -> float:
    """A soak duration: seconds, or a duration with a unit (``90s``, ``5m``, ``1h``)."""
    from faultkit.model.durations import parse_duration

    try:
        seconds = parse_duration(str(value).strip())
    except ValueError as exc:
        raise pytest.UsageError(f"{source}: {exc}") from None
    if not 0 < seconds <= MAX_SOAK_S:
        raise pytest.UsageError(f"{source}: a soak lasts more than 0 s and at most a day "
                                f"(got {value!r})")
    return seconds


def current_context_limit(config: pytest.Config, env: Mapping[str, str]) -> int | None:
    """The current config's context limit per request given (``--current-context-limit``,
    ``$FAULTKIT_CURRENT_CONTEXT_LIMIT``, ini), in tokens; None if none; anything but a
    whole number above 0 is a :class:`pytest.UsageError`."""
    value, source = _pick(config, env, "current_context_limit")
    if value in (None, ""):
        return None
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise pytest.UsageError(
            f"{source}: {value!r} is not a context limit: give the tokens one request may hold "
            "on the node's current config, a whole number above 0 (e.g. 4096)")
    return int(text)
