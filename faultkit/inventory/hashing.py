"""A short, stable hash of a serving config: what run.json and the testbed compare."""

from __future__ import annotations

import hashlib
import json

from faultkit.inventory.settings import ServingConfig

#: settings faultkit learned after hashes were first recorded: hashed only when a config sets
#: them, so the hash of a config that does not use them stays what it was (and the testbed
#: does not recreate its container for a setting it does not have)
HASHED_WHEN_SET = frozenset({"cpu_shares", "speculative"})


def config_hash(config: ServingConfig | None, *extra: object) -> str:
    """The first 12 hex digits of the SHA-256 of ``config`` as JSON (keys sorted; ``null``
    for no config); ``extra`` values, when given, are hashed along with it.

    run.json's ``node_config_hash`` is ``config_hash(config)``; the testbed labels each
    container it creates with the hash of its config plus its volumes, env and URL
    (:data:`faultkit.constants.LABEL_CONFIG_HASH`) and recreates it when that changes.
    """
    data = None if config is None else config.model_dump(
        mode="json", exclude={f for f in HASHED_WHEN_SET if getattr(config, f) is None})
    blob = json.dumps([data, *extra] if extra else data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
