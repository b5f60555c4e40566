"""Where a pipeline's gangs go, as ``explain`` and ``submit --cluster auto`` decide it: the
data's region, and the one cluster that can run every gang — scenario-named table tests over
built snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gangway.errors import PermanentError
from gangway.scheduling.pipeline_placement import choose_cluster, common_cluster, data_region
from gangway.scheduling.placement import place
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Snapshot
from tests.helpers.builders import gang

BUCKETS = {"us-east-1": "s3://lab-us", "eu-west-1": "s3://lab-eu"}


@pytest.mark.parametrize(
    ("given", "values", "region"),
    [
        pytest.param("eu-west-1", ["s3://lab-us/data"], "eu-west-1", id="given-wins"),
        pytest.param(None, ["12", "s3://lab-eu/corpus/x"], "eu-west-1", id="from-a-bucket"),
        pytest.param(None, ["s3://lab-us", "s3://lab-eu/x"], "us-east-1", id="first-bucket-wins"),
        pytest.param(None, ["s3://lab-usx/data", "file:///d"], None, id="in-no-bucket"),
    ],
)
def test_the_data_region(given: str | None, values: list[str], region: str | None) -> None:
    assert data_region(given, values, set(BUCKETS), BUCKETS) == region


def test_an_unknown_data_region_is_named_with_the_near_one() -> None:
    with pytest.raises(PermanentError) as e:
        data_region("us-east", [], set(BUCKETS), BUCKETS)
    assert str(e.value) == (
        "--data-region us-east: not a region (eu-west-1, us-east-1); did you mean 'us-east-1'?"
    )


@dataclass
class Fleet:
    """Clusters by name → the GPU models of their nodes (two racks of four per model, 8 GPUs
    each)."""

    models: dict[str, tuple[str, ...]]
    busy: dict[str, int] = field(default_factory=dict)
    """Cluster → nodes a running gang holds (the rest are free)."""

    def build(self) -> Snapshot:
        b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
        for name, models in self.models.items():
            c = b.cluster(name)
            for model in models:
                c.racks(2, per_rack=4, gpu_type=model)
            c.queue("research")
            if self.busy.get(name):
                c.running("busy", queue="research", pods=self.busy[name], gpu_type=models[0])
        return b.build()


@dataclass
class Case:
    fleet: Fleet
    gangs: list[tuple[int, str]]
    """Each gang's pods and GPU model."""
    known: set[str] | None = None
    """The clusters submit can send to (default: every one in the snapshot)."""
    cluster: str | None = None
    replaced: bool = False
    error: str | None = None


CASES = {
    "every-gang-best-on-one-cluster": Case(
        Fleet({"a": ("H100",), "b": ("H100",)}, busy={"b": 4}),
        [(2, "H100"), (1, "H100")],
        cluster="a",
    ),
    "a-gang-that-can-never-run-on-the-first-choice-moves-them-all": Case(
        Fleet({"a": ("H100",), "b": ("H100", "A100")}, busy={"b": 6}),
        [(1, "H100"), (1, "A100")],
        cluster="b",
        replaced=True,
    ),
    "gangs-that-share-no-cluster": Case(
        Fleet({"a": ("H100",), "b": ("A100",)}),
        [(1, "H100"), (1, "A100")],
        error="no cluster can ever run every gang of this pipeline; nothing was sent",
    ),
    "the-first-gangs-ranking-orders-what-every-gang-can-run-on": Case(
        Fleet({"a": ("H100",), "b": ("H100",)}, busy={"a": 6}),
        [(1, "H100"), (4, "H100")],
        cluster="b",
    ),
    "a-cluster-submit-cannot-reach-is-never-chosen": Case(
        Fleet({"a": ("H100",), "b": ("H100",)}, busy={"b": 4}),
        [(1, "H100")],
        known={"b"},
        cluster="b",
        replaced=True,
    ),
    "one-gang-no-cluster-can-ever-run": Case(
        Fleet({"a": ("H100",)}),
        [(9, "H100")],
        error="--cluster auto: no cluster can ever run this; nothing was sent",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_cluster_auto_chooses_one_cluster_for_every_gang(case: Case) -> None:
    snap = case.fleet.build()
    placements = [
        place(gang(pods, name=f"g{i}", gpu_type=model), snap)
        for i, (pods, model) in enumerate(case.gangs)
    ]
    known = case.known if case.known is not None else set(snap.clusters)
    if case.error:
        with pytest.raises(PermanentError, match=case.error):
            common_cluster(placements, known)
        return
    choice = choose_cluster(placements, snap, known)
    assert (choice.cluster, choice.replaced) == (case.cluster, case.replaced)
    for p in choice.placements:  # every gang placed on that cluster, and able to run there
        assert p.chosen is not None and p.chosen.cluster == case.cluster
