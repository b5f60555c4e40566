"""Rendering admission and placement decisions, queues and "why pending" as tables — and a
decision as a JSON record (:func:`placement_record`) for scripts: output only, no decisions
here."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gangway.scheduling.admission import Verdict
from gangway.scheduling.capacity import ClusterView, view_of
from gangway.scheduling.pending import GangWhy
from gangway.scheduling.placement import WEIGHTS, Placement
from gangway.scheduling.snapshot.cluster_state import ClusterState, Snapshot
from gangway.units import amount
from gangway.volcano.job import POD_EVICTED, RESTART_JOB

__all__ = [
    "placement_record",
    "render_placement",
    "render_queues",
    "render_snapshot",
    "render_source",
    "render_why",
]

COLOURS = {
    Verdict.ADMIT: "green",
    Verdict.PREEMPT: "yellow",
    Verdict.WAIT: "yellow",
    Verdict.REJECT: "red",
}


def _verdict(v: Verdict) -> Text:
    return Text(str(v), style=f"bold {COLOURS[v]}")


def render_source(snap: Snapshot) -> Text:
    """Which snapshot a decision was made over."""
    return Text(
        f"over the {snap.source} snapshot of {', '.join(snap.clusters)} taken "
        f"{snap.taken_at:%Y-%m-%d %H:%M %Z}",
        style="dim",
    )


def placement_record(p: Placement, snap: Snapshot) -> dict[str, Any]:
    """``p`` as plain data (``--output json``): the workload as decided (its queue and class
    resolved), the verdict and reason, every field problem, each cluster ranked with its
    factors, and for the chosen cluster the nodes per pod, the evictions with their rules and
    the topology written on the Job. Amounts are in base units (millicores, bytes, GPUs)."""
    d = p.decision
    w = d.workload
    out: dict[str, Any] = {
        "workload": {
            "name": w.name,
            "team": w.team,
            "queue": w.queue,
            "priority_class": w.priority_class,
            "pods": w.pods,
            "per_pod": {"cpu_millicores": w.per_pod.cpu, "memory_bytes": w.per_pod.memory,
                        "gpus": w.per_pod.gpus},
            "gpu_type": w.gpu_type,
            "within": w.within,
            "data_region": w.data_region,
        },
        "verdict": str(d.verdict),
        "reason": d.reason,
        "problems": [{"field": e.path, "message": e.message, "hint": e.hint} for e in d.problems],
        "clusters": [
            {
                "cluster": o.cluster,
                "verdict": str(o.decision.verdict),
                "reason": o.decision.reason,
                "score": None if o.decision.verdict == Verdict.REJECT else round(o.score, 4),
                "factors": {k: round(v, 4) for k, v in o.factors.items()},
                "notes": list(o.notes),
            }
            for o in p.options
        ],
        "cluster": None,
        "nodes": {},
        "domain": None,
        "victims": [],
        "volcano_acts": None,
        "note": None,
        "topology": None,
    }  # fmt: skip
    chosen = p.chosen
    if chosen is None:
        return out
    out["cluster"] = chosen.cluster
    a = chosen.decision.assignment
    if a is not None:
        names = [n.name for n in snap.clusters[chosen.cluster].nodes]
        out["nodes"] = {names[i]: pods for i, pods in sorted(a.nodes.items())}
        out["domain"] = {"tier": a.tier, "name": a.domain}
    plan = chosen.decision.preemption
    if plan is not None:
        out["victims"] = [
            {
                "gang": v.gang.name,
                "namespace": v.gang.namespace,
                "queue": v.gang.queue,
                "priority_class": v.gang.priority_class,
                "priority": v.gang.priority,
                "pods": v.gang.pods,
                "gpus_per_pod": v.gang.per_pod.gpus,
                "gpu_type": v.gang.gpu_type,
                "rule": v.rule,
                "lost_gpu_hours": v.lost_gpu_hours,
            }
            for v in plan.victims
        ]
        out["volcano_acts"] = plan.volcano_acts
        out["note"] = plan.note
    if p.topology is not None:
        t = p.topology
        out["topology"] = {"highest_tier_allowed": t.tier, "tier": t.tier_name,
                           "mode": None if t.tier is None else ("hard" if t.hard else "soft"),
                           "gpu_product": t.gpu_product, "note": t.note}  # fmt: skip
    return out


def render_placement(p: Placement) -> Group:
    """The decision, the ranked clusters with their reasons, evictions and topology."""
    d = p.decision
    w = d.workload
    head = Text.assemble(
        (f"{w.name}: ", "bold"),
        _verdict(d.verdict),
        f" — {w.shape()}, queue {w.queue}, "
        + (
            f"priority class {w.priority_class}"
            if w.priority_class
            else "no priority class (priority 0)"
        ),
    )
    parts: list[Table | Text | Group] = [head]
    for problem in d.problems:
        parts.append(Text(f"  {problem}", style="red"))
    if p.options:
        parts.append(_options(p))
    chosen = p.chosen
    if chosen and chosen.decision.preemption:
        plan = chosen.decision.preemption
        parts.append(_evictions(chosen.cluster, plan))
        if plan.note:
            parts.append(Text(f"note: {plan.note}", style="yellow"))
    if chosen and p.topology:
        t = p.topology
        hard = "hard: never wider" if t.hard else "soft: preferred"
        where = f"within one {t.tier_name} (tier {t.tier}, {hard})" if t.tier else "anywhere"
        a = chosen.decision.assignment
        domain = f", now {a.tier} {a.domain}" if a and a.tier else ""
        model = f"; on nodes of {t.gpu_product}" if t.gpu_product else ""
        now = chosen.decision.verdict in (Verdict.ADMIT, Verdict.PREEMPT)
        lead = f"placement on {chosen.cluster}" if now else f"once admitted, on {chosen.cluster}"
        parts.append(Text(f"{lead}: {where}{domain}{model}"))
        if t.note:
            parts.append(Text(f"  ({t.note})"))
    return Group(*parts)


def _options(p: Placement) -> Group:
    t = Table(title="clusters, best first", header_style="bold", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("cluster", no_wrap=True)
    t.add_column("verdict")
    t.add_column("score", justify="right")
    for k in WEIGHTS:
        t.add_column(f"{k} ×{WEIGHTS[k]:.2f}", justify="right")
    reasons = []
    for i, o in enumerate(p.options, 1):
        rejected = o.decision.verdict == Verdict.REJECT
        t.add_row(
            str(i),
            Text(o.cluster),
            _verdict(o.decision.verdict),
            "-" if rejected else f"{o.score:.2f}",
            *("-" if rejected else f"{o.factors[k]:.2f}" for k in WEIGHTS),
        )
        why = "; ".join([o.decision.reason, *o.notes])
        reasons.append(Text(f"  {i}. {o.cluster}: {why}"))
    return Group(t, *reasons)


def _evictions(cluster: str, plan: object) -> Table:
    from gangway.scheduling.preemption import Preemption

    assert isinstance(plan, Preemption)
    cost = "unknown" if plan.cost is None else f"{plan.cost:.1f} GPU-h"
    title = (
        f"would evict on {cluster} (lost work {cost}; Volcano evicts pod by pod and each "
        f"victim's Job then restarts all its pods: {POD_EVICTED} → {RESTART_JOB})"
        if plan.volcano_acts
        else f"evicting these on {cluster} would make room, but Volcano will not (see the note)"
    )
    t = Table(
        title=title,
        header_style="bold",
        title_justify="left",
    )
    for col in ("gang", "queue", "priority", "pods", "rule", "lost GPU-h"):
        t.add_column(col, overflow="fold")
    for v in plan.victims:
        g = v.gang
        lost = "unknown" if v.lost_gpu_hours is None else f"{v.lost_gpu_hours:.1f}"
        shape = f"{g.pods} × {g.per_pod.gpus} {g.gpu_type or 'GPU'}"
        cells = (g.name, g.queue, f"{g.priority_class} ({g.priority})", shape, v.rule, lost)
        t.add_row(*(Text(c) for c in cells))
    return t


def _amount(key: str, n: int | None) -> str:
    return "-" if n is None else amount(key, n)


def _tree(c: ClusterState) -> list[tuple[str, int]]:
    """Queues parents first, each with its depth."""
    out: list[tuple[str, int]] = []

    def walk(parent: str | None, depth: int) -> None:
        for name, q in c.queues.items():
            top = q.parent in (None, "root") and parent is None
            if (top or q.parent == parent) and all(name != n for n, _ in out):
                out.append((name, depth))
                walk(name, depth + 1)

    walk(None, 0)
    return out + [(n, 0) for n in c.queues if all(n != m for m, _ in out)]


def _queue_table(view: ClusterView) -> Table:
    name, c = view.name, view.state
    t = Table(title=f"{name} ({c.region}): queues", header_style="bold", title_justify="left")
    t.add_column("queue", overflow="fold")
    t.add_column("run/wait", justify="right", overflow="fold")
    t.add_column("resource", overflow="fold")
    for col in ("used", "guarantee", "deserved", "capability"):
        t.add_column(col, justify="right", overflow="fold")
    for qname, depth in _tree(c):
        q = c.queues[qname]
        inside = view.subtree(qname)  # a parent counts its children's gangs, as its usage does
        run = sum(1 for g in c.gangs if g.queue in inside and g.phase == "Running")
        pend = sum(1 for g in c.gangs if g.queue in inside and g.phase == "Pending")
        named = {*q.guarantee, *q.deserved, *q.capability, *view.usage.get(qname, {})}
        keys = sorted(k for k in named if k.startswith("gpu"))
        rows = [*keys, *(k for k in ("cpu", "memory") if k in named)]
        for i, key in enumerate(rows):
            used = view.used(qname, key)
            over = q.reclaimable and q.deserved.get(key) is not None and used > q.deserved[key]
            t.add_row(
                Text("  " * depth + qname) if i == 0 else "",
                f"{run}/{pend}" if i == 0 else "",
                key,
                Text(_amount(key, used), style="yellow" if over else ""),
                _amount(key, q.guarantee.get(key)),
                _amount(key, q.deserved.get(key)),
                _amount(key, q.capability.get(key)),
                end_section=i == len(rows) - 1,
            )
    return t


def render_queues(snap: Snapshot, cluster: str | None) -> Group:
    """Per cluster: each queue's usage against its guarantee, deserved share and capability."""
    names = [cluster] if cluster else list(snap.clusters)
    all_views = view_of(snap).clusters
    return Group(*(_queue_table(all_views[n]) for n in names))


def render_snapshot(snap: Snapshot) -> Table:
    """One line a cluster and GPU model: nodes, GPUs free of allocatable, gangs."""
    t = Table(
        title=f"snapshot ({snap.source}) taken {snap.taken_at:%Y-%m-%d %H:%M %Z}",
        header_style="bold",
        title_justify="left",
    )
    for col in ("cluster", "region", "model", "nodes", "GPUs free", "gangs running", "pending"):
        t.add_column(col)
    for name, c in snap.clusters.items():
        models = sorted({n.gpu_type or "(CPU)" for n in c.nodes}) or ["-"]
        run = sum(1 for g in c.gangs if g.phase == "Running")
        pend = len(c.gangs) - run
        for i, m in enumerate(models):
            nodes = [n for n in c.nodes if (n.gpu_type or "(CPU)") == m]
            total = sum(n.allocatable.gpus for n in nodes)
            free = sum(
                max(n.allocatable.gpus - n.allocated.gpus, 0) for n in nodes if n.schedulable
            )
            cordoned = sum(1 for n in nodes if not n.schedulable)
            t.add_row(
                Text(name) if i == 0 else "",
                Text(c.region) if i == 0 else "",
                Text(m),
                f"{len(nodes)}" + (f" ({cordoned} cordoned)" if cordoned else ""),
                f"{free} / {total}",
                str(run) if i == 0 else "",
                str(pend) if i == 0 else "",
            )
    return t


def render_why(workflow: str, cluster: str, gangs: list[GangWhy]) -> Group:
    """Volcano's word and Gangway's decision for each gang of ``workflow``."""
    parts: list[Table | Text | Group] = []
    if not gangs:
        parts.append(
            Text(
                f"{workflow}: no gang (Volcano Job) of this workflow in {cluster} yet — "
                "its gang step has not started, or the workflow is in another namespace"
            )
        )
    for g in gangs:
        parts.append(Text(f"{g.job} ({g.step or 'gang'}): PodGroup {g.phase}", style="bold"))
        for c in g.conditions:
            parts.append(Text(f"  Volcano: {c.type}={c.status} {c.reason}: {c.message}"))
        if g.phase == "Running":
            parts.append(Text("  running: nothing to wait for", style="green"))
        elif g.placement is not None:
            parts.append(render_placement(g.placement))
    return Group(*parts)
