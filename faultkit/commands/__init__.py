"""Subcommands of the ``faultkit`` CLI that belong to the ``faultkit`` package itself."""
