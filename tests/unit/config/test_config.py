"""The platform config: the shipped example loads; every mistake is reported at once, each
with its field path and what to do."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, config_path, load_config
from gangway.errors import PermanentError

Mutation = Callable[[dict[str, Any]], None]


def _example() -> dict[str, Any]:
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(raw, dict)
    return raw


def _refused(tmp_path: Path, mutate: Mutation) -> str:
    raw = copy.deepcopy(_example())
    mutate(raw)
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(PermanentError) as e:
        load_config(path)
    return str(e.value)


def test_the_example_describes_two_regions_and_three_teams() -> None:
    cfg = load_config(EXAMPLE)
    assert {c.region for c in cfg.clusters.values()} == {"us-east-1", "eu-west-1"}
    teams = cfg.team_views()
    assert [(t.name, t.org, t.parent_queue) for t in teams.values()] == [
        ("research", "frontier", "frontier"),
        ("evals", "frontier", "frontier"),
        ("platform", None, "root"),
    ]
    assert teams["research"].namespace == "team-research"
    assert config_path({}) == EXAMPLE
    assert config_path({"GANGWAY_CONFIG": "/x.yaml"}) == Path("/x.yaml")


def _team(raw: dict[str, Any], name: str = "research") -> dict[str, Any]:
    team = raw["orgs"]["frontier"]["teams"][name]
    assert isinstance(team, dict)
    return team


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(
            lambda raw: _team(raw)["guarantee"].update(cpu=4000),
            "orgs.frontier.teams.research.guarantee.cpu: 4000 is more than its capability (1536)",
            id="guarantee-over-capability",
        ),
        pytest.param(
            lambda raw: _team(raw)["capability"]["gpu"].update(H100=80),
            "orgs.frontier.teams.research.capability.gpu.H100: 80 is more than the org's "
            "capability (64)",
            id="child-over-parent",
        ),
        pytest.param(
            lambda raw: _team(raw, "evals")["deserved"]["gpu"].update(H100=40),
            "orgs.frontier.teams: their deserveds add up to 88, more than the org's "
            "deserved.gpu.H100 (56)",
            id="children-sum-over-parent",
        ),
        pytest.param(
            lambda raw: _team(raw)["priority_classes"].append("gangway-urgent"),
            "orgs.frontier.teams.research.priority_classes[2]: unknown priority class "
            "'gangway-urgent'",
            id="unknown-priority-class",
        ),
        pytest.param(
            lambda raw: raw["teams"]["platform"].update(queue="research"),
            "teams.platform.queue: 'research' is already the queue of orgs.frontier.teams.research",
            id="duplicate-queue",
        ),
        pytest.param(
            lambda raw: raw["teams"]["platform"]["capability"]["gpu"].update(B200=8),
            "teams.platform.capability.gpu.B200: no cluster has or provisions B200 GPUs",
            id="gpu-type-no-cluster-has",
        ),
        pytest.param(
            lambda raw: raw["clusters"]["eu-west"].update(region="ap-south-1"),
            "clusters.eu-west.region: no storage.buckets entry for 'ap-south-1'",
            id="region-without-bucket",
        ),
        pytest.param(
            lambda raw: raw.update(image="docker.io/someone/image:1"),
            "image: 'docker.io/someone/image:1' is not from an allowed registry",
            id="image-registry",
        ),
        pytest.param(
            lambda raw: _team(raw).update(max_workflows=0),
            "orgs.frontier.teams.research.max_workflows: Input should be greater than or equal",
            id="field-error",
        ),
        pytest.param(
            lambda raw: _team(raw).update(quueue="x"),
            "orgs.frontier.teams.research.quueue: Extra inputs are not permitted (did you mean "
            "'queue'?)",
            id="unknown-key",
        ),
        pytest.param(
            lambda raw: _team(raw)["guarantee"].update(memory="lots"),
            "orgs.frontier.teams.research.guarantee.memory: Value error, 'lots' is not a "
            "Kubernetes quantity",
            id="bad-quantity",
        ),
        pytest.param(
            lambda raw: raw["orgs"].update(other={"teams": {"research": {}}}),
            "orgs.other.teams.research: team 'research' is already defined at "
            "orgs.frontier.teams.research",
            id="team-defined-twice",
        ),
        pytest.param(
            lambda raw: raw["teams"].update(ML_Ops={}),
            "teams.ML_Ops: 'ML_Ops' is not a Kubernetes name",
            id="bad-team-name",
        ),
        pytest.param(
            lambda raw: raw["teams"]["platform"].update(namespace="kube-system"),
            "team platform: namespace 'kube-system' belongs to the system, Argo or MLflow",
            id="reserved-namespace",
        ),
        pytest.param(
            lambda raw: raw["teams"]["platform"].update(queue="default"),
            "teams.platform.queue: 'default' is Volcano's own queue",
            id="volcano-default-queue",
        ),
        pytest.param(
            lambda raw: raw.update(registries=["ghcr.io/gang"]),
            "registries[0]: 'ghcr.io/gang' must be a prefix ending in '/'",
            id="registry-prefix",
        ),
        pytest.param(
            lambda raw: raw["mlflow"].update(tracking_uri="http://mlflow:99999"),
            "mlflow.tracking_uri: Value error, 'http://mlflow:99999'",
            id="tracking-uri",
        ),
        pytest.param(
            lambda raw: raw["clusters"]["eu-west"]["topology"]["hypernodes"]["eu-spine"].update(
                members=["eu-rack-a", "eu-rack-z"]
            ),
            "clusters.eu-west.topology.hypernodes.eu-spine.members[1]: no HyperNode 'eu-rack-z'",
            id="unknown-hypernode",
        ),
        pytest.param(
            lambda raw: raw["clusters"]["us-east"]["topology"].update(
                hypernodes={"r": {"tier": 1, "members": ["n1"]}}
            ),
            "clusters.us-east.topology: give labels or hypernodes, not both",
            id="labels-and-hypernodes",
        ),
        pytest.param(
            lambda raw: _team(raw)["capability"]["gpu"].update(L4=40),
            "orgs.frontier.teams.research.capability.gpu: 136 GPUs in all, more than the org's 128",
            id="child-gpus-over-parent-in-all",
        ),
    ],
)
def test_each_mistake_is_named_with_its_field_path(
    tmp_path: Path, mutate: Mutation, expected: str
) -> None:
    assert expected in _refused(tmp_path, mutate)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    def several(raw: dict[str, Any]) -> None:
        raw["default_priority_class"] = "nope"
        raw["teams"]["platform"]["capability"]["gpu"]["B200"] = 1
        _team(raw)["guarantee"]["cpu"] = 4000

    message = _refused(tmp_path, several)
    # and two that follow: the guarantee is over the deserved share and the org's guarantee
    assert message.count("\n  ") == 5 and "5 problem(s)" in message
    assert "default_priority_class: 'nope' is not in priority_classes" in message


def test_unreadable_files_are_user_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n")
    with pytest.raises(PermanentError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(PermanentError, match="cannot read it"):
        load_config(tmp_path / "missing.yaml")
    bad.write_text("- a list\n")
    with pytest.raises(PermanentError, match="expected a mapping"):
        load_config(bad)


def test_a_pipeline_of_an_unknown_team_does_not_compile(tmp_path: Path) -> None:
    from gangway.workflows.compiler import compile_pipeline

    path = tmp_path / "stray_pipeline.py"
    path.write_text(
        "from gangway.pipeline import pipeline\n"
        "with pipeline('x', team='reserch', title='x', description='x', parameters={}) as w:\n"
        "    pass\n"
    )
    with pytest.raises(PermanentError, match=r"team 'reserch' is not in the platform config"):
        compile_pipeline(path)


def test_a_key_given_twice_or_a_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(EXAMPLE.read_text() + "default_priority_class: gangway-batch\n")
    with pytest.raises(PermanentError, match="default_priority_class given twice"):
        load_config(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(PermanentError, match="not UTF-8 text"):
        load_config(path)
