"""Replaying a GPU-cluster trace against placement policies, by the method of the FGD paper's
artifact ("Beware of Fragmentation", USENIX ATC'23) as ``docs/simulation.md`` writes it down:
:mod:`~gangway.simulation.trace` reads the trace's CSV files, :mod:`~gangway.simulation.arrivals`
makes a seed's arrival order, :mod:`~gangway.simulation.replay` places the pods one at a time
and records GPU allocation against arrived demand, :mod:`~gangway.simulation.policies` holds
the node-choosing policies."""
