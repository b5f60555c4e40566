"""Replaying a GPU-cluster trace against placement policies, by the method of the FGD paper's
artifact ("Beware of Fragmentation", USENIX ATC'23) as ``docs/simulation.md`` writes it down:
:mod:`~gangway.scheduling.simulation.trace` reads the trace's CSV files,
:mod:`~gangway.scheduling.simulation.arrivals` makes a seed's arrival order,
:mod:`~gangway.scheduling.simulation.replay` places the pods one at a time and records GPU
allocation against arrived demand,
:mod:`~gangway.scheduling.simulation.policies` holds the node-choosing policies."""
