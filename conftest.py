"""Repository-level pytest configuration: nothing to configure here.

The faultkit plugin supplies the fixtures and the default inventory
(``faultkit.commands.input.default_inventory``: here, the testbed's); ``pyproject.toml``
sets ``faultkit = true`` for this repository's tests.
"""
