"""What a snapshot must hold together, beyond each field's type: every problem with its path."""

from __future__ import annotations

from gangway.snapshot.model import ClusterState, Snapshot

__all__ = ["problems"]


def problems(snap: Snapshot) -> list[str]:
    """Every inconsistency in ``snap``, as ``field.path: what is wrong``."""
    out: list[str] = []
    for name, c in snap.clusters.items():
        out += _cluster(f"clusters.{name}", c, snap)
    for team, t in snap.teams.items():
        for cls in t.priority_classes:
            if snap.priority_classes and cls not in snap.priority_classes:
                out.append(f"teams.{team}.priority_classes: no priority class {cls!r}")
    if snap.default_priority_class and snap.default_priority_class not in snap.priority_classes:
        out.append(f"default_priority_class: no priority class {snap.default_priority_class!r}")
    return out


def _cluster(at: str, c: ClusterState, snap: Snapshot) -> list[str]:
    out = []
    names = [n.name for n in c.nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        out.append(f"{at}.nodes: named twice: {', '.join(twice)}")
    for i, n in enumerate(c.nodes):
        extra = sorted(set(n.domains) - set(c.tiers))
        if extra:
            out.append(f"{at}.nodes[{i}].domains: tier(s) {', '.join(extra)} not in tiers")
        if n.gpu_type is None and n.allocatable.gpus:
            out.append(f"{at}.nodes[{i}].gpu_type: a node with GPUs names their model")
    for i, n in enumerate(c.nodes):
        a, u = n.allocatable, n.allocated
        if n.schedulable and (u.cpu > a.cpu or u.memory > a.memory or u.gpus > a.gpus):
            out.append(f"{at}.nodes[{i}].allocated: more than its allocatable")
    for q, queue in c.queues.items():
        if queue.parent not in (None, "root") and queue.parent not in c.queues:
            out.append(f"{at}.queues.{q}.parent: no queue {queue.parent!r}")
        elif q in c.ancestors(str(queue.parent))[:50] or queue.parent == q:
            out.append(f"{at}.queues.{q}.parent: {queue.parent!r} is below it (a cycle)")
    known = set(names)
    held: dict[str, list[int]] = {}
    for i, g in enumerate(c.gangs):
        where = f"{at}.gangs[{i}]"
        if g.queue not in c.queues:
            out.append(f"{where}.queue: no queue {g.queue!r} in this cluster")
        if (
            g.priority_class
            and snap.priority_classes
            and g.priority_class not in snap.priority_classes
        ):
            out.append(f"{where}.priority_class: no priority class {g.priority_class!r}")
        for when in ("started_at", "last_checkpoint_at"):
            t = getattr(g, when)
            if t is not None and t > snap.taken_at:
                out.append(f"{where}.{when}: after the snapshot was taken ({snap.taken_at})")
        if g.phase == "Running" and sum(g.placement.values()) != g.pods:
            out.append(
                f"{where}.placement: {sum(g.placement.values())} pod(s) placed, the gang has "
                f"{g.pods} (a running gang is whole)"
            )
        for node, k in g.placement.items():
            if node not in known:
                out.append(f"{where}.placement: no node {node!r}")
                continue
            h = held.setdefault(node, [0, 0, 0])
            h[0] += k * g.per_pod.cpu
            h[1] += k * g.per_pod.memory
            h[2] += k * g.per_pod.gpus
    for n in c.nodes:
        cpu, mem, gpus = held.get(n.name, (0, 0, 0))
        a = n.allocated
        if cpu > a.cpu or mem > a.memory or gpus > a.gpus:
            out.append(
                f"{at}.nodes[{names.index(n.name)}].allocated: less than its gangs' pods hold "
                f"(cpu {cpu}m, memory {mem}, gpus {gpus})"
            )
    return out
