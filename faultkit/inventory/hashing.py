"""A short, stable hash of a serving config: what run.json and the testbed compare."""

from __future__ import annotations

import hashlib
import json

from faultkit.inventory.models import ServingConfig


def config_hash(config: ServingConfig | None, *extra: object) -> str:
    """The first 12 hex digits of the SHA-256 of ``config`` as JSON (keys sorted; ``null``
    for no config); ``extra`` values, when given, are hashed along with it.

    run.json's ``node_config_hash`` is ``config_hash(config)``; the testbed labels each
    container it creates with the hash of its config plus its volumes, env and URL
    (:data:`faultkit.constants.LABEL_CONFIG_HASH`) and recreates it when that changes.
    """
    data = None if config is None else config.model_dump(mode="json")
    blob = json.dumps([data, *extra] if extra else data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
