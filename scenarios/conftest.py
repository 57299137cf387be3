"""Scenario catalogue configuration: fixtures come from the faultkit plugin (faultkit.plugin)."""
