"""The shapes faultkit writes and reads: records, timeline events, fault kinds (one
:class:`~faultkit.model.kinds.FaultSpec` per kind), window SLIs, durations and times, and
the typed run and gate files. Pure data: nothing here acts or imports above it."""
