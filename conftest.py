"""Repo-level pytest configuration only: the default inventory is the testbed's."""

from pathlib import Path

TESTBED_INVENTORY = Path(__file__).parent / "testbed" / "inventory.yaml"
