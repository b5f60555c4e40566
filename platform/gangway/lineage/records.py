"""What a step records for lineage, as plain data that can wait on disk until MLflow is back.

A step attempt builds one :class:`StepRecord` while it works. The record is written to the
spool (see :mod:`gangway.lineage.spool`) before anything is sent to MLflow, and every later
version of it carries a higher ``rev``; replaying a record (see :mod:`gangway.lineage.replay`)
is idempotent, keyed by ``key``, so a record can be sent any number of times.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gangway.contract import ENV_PIPELINE, ENV_WORKFLOW_PARAMS, TAG_PREFIX, WORKFLOW_IDENTITY_ENV

__all__ = [
    "CheckpointRef",
    "DatasetRef",
    "MetricPoint",
    "Registration",
    "Status",
    "StepRecord",
    "T",
    "WorkflowInfo",
    "mlflow_digest",
    "now_ms",
    "workflow_from_env",
]

Status = Literal["RUNNING", "FINISHED", "FAILED", "KILLED"]

T = TAG_PREFIX
"""Prefix of every MLflow tag Gangway writes (:data:`gangway.contract.TAG_PREFIX`)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def mlflow_digest(digest: str) -> str:
    """A content digest as MLflow stores a dataset's (at most 36 characters): the first 32 hex
    digits, 128 bits, of the sha256."""
    return digest.removeprefix("sha256:")[:32]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class WorkflowInfo(_Model):
    """The workflow run a step belongs to: becomes the MLflow parent run."""

    pipeline: str = "adhoc"
    name: str = ""
    uid: str = ""
    namespace: str = ""
    cluster: str = ""
    git_sha: str = ""
    image: str = ""
    parameters: dict[str, str] = Field(default_factory=dict)


class DatasetRef(_Model):
    name: str
    digest: str
    source: str


class CheckpointRef(_Model):
    """A checkpoint as a lineage node: where it is, its step and its content digest."""

    uri: str
    step: int
    digest: str = ""
    dataset_digest: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)


class MetricPoint(_Model):
    key: str
    value: float
    step: int = 0
    timestamp: int = Field(default_factory=now_ms)
    checkpoint: str | None = None
    """URI of the checkpoint this value describes (an evaluation score), if any."""


class Registration(_Model):
    """Evaluation's request: register ``checkpoint`` as a version of ``model_name``."""

    model_name: str
    checkpoint: CheckpointRef


class StepRecord(_Model):
    """One step attempt's lineage: a child run of the workflow's parent run.

    ``kind="workflow"`` records the workflow's own state instead (started again by
    ``gangway retry``: RUNNING; ended: FINISHED, FAILED or KILLED, ``phase`` in ``tags``), so
    that closing the parent run waits in the spool through an outage like everything else.
    """

    version: Literal[1] = 1
    kind: Literal["step", "workflow"] = "step"
    key: str = Field(default_factory=lambda: uuid.uuid4().hex)
    rev: int = 0
    workflow: WorkflowInfo = Field(default_factory=WorkflowInfo)
    step: str = "step"
    node: str = ""
    """What identifies the step's work across attempts (e.g. the shard it writes)."""
    status: Status = "RUNNING"
    start_ms: int = Field(default_factory=now_ms)
    end_ms: int | None = None
    params: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    metrics: list[MetricPoint] = Field(default_factory=list)
    datasets: list[DatasetRef] = Field(default_factory=list)
    checkpoints_out: list[CheckpointRef] = Field(default_factory=list)
    checkpoints_in: list[CheckpointRef] = Field(default_factory=list)
    registration: Registration | None = None
    outputs: list[str] = Field(default_factory=list)

    @property
    def file_name(self) -> str:
        """Sortable by start time, unique by key."""
        return f"{self.start_ms:013d}-{self.step}-{self.key[:12]}.json"

    def to_bytes(self) -> bytes:
        return (self.model_dump_json(indent=1) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> StepRecord:
        """A record as spooled: every field a writer always writes must be there (a truncated
        or hand-made file is refused, not read with defaults)."""
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        missing = sorted(SPOOLED_FIELDS - raw.keys())
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        return cls.model_validate(raw)


SPOOLED_FIELDS = frozenset({"version", "key", "rev", "workflow", "step", "status", "start_ms"})
"""Fields every spooled record has (the writer always writes them all)."""


def _params(raw: str) -> dict[str, str]:
    """Argo's ``{{workflow.parameters.json}}`` (a list of name/value objects) or a mapping."""
    if not raw:
        return {}
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return {}
    if isinstance(data, dict):
        return {str(k): str(v) for k, v in data.items()}
    if isinstance(data, list):
        return {
            str(p["name"]): str(p.get("value", ""))
            for p in data
            if isinstance(p, dict) and "name" in p
        }
    return {}


def workflow_from_env(env: Mapping[str, str]) -> WorkflowInfo:
    """The workflow identity the pipeline passes to every step (:mod:`gangway.contract`)."""
    return WorkflowInfo(
        pipeline=env.get(ENV_PIPELINE) or "adhoc",
        parameters=_params(env.get(ENV_WORKFLOW_PARAMS, "")),
        **{field: env.get(var, "") for field, var in WORKFLOW_IDENTITY_ENV.items()},
    )
