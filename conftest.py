"""Repository-level pytest configuration: nothing to configure here.

The faultkit plugin supplies the fixtures and the default inventory (the testbed's:
``faultkit.commands.input.DEFAULT_INVENTORY``); ``pyproject.toml`` sets ``faultkit = true``
for this repository's tests.
"""
