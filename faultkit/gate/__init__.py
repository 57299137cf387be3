"""``faultkit gate``'s phases: the run (:mod:`.run`), the plan, the scenario order, the
capabilities, the baseline, the steady state, the scenario pool, the live feed and the
decision. The click command is :mod:`faultkit.commands.gate`; the gate directory's record
is :mod:`faultkit.model.gatefile`."""
