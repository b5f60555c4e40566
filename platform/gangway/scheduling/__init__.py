"""Deciding where and whether gangs run: pure functions over a snapshot of the clusters.

Admission, preemption, placement, capacity and packing read a
:class:`~gangway.scheduling.snapshot.cluster_state.Snapshot` and return decisions with reasons;
only :mod:`gangway.scheduling.snapshot.live` reads a cluster.
"""
