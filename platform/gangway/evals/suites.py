"""Eval suites are data: one YAML file per suite (``pipelines/suites/*.yaml``).

A suite names its dataset (a URI, relative to the storage root or absolute, and the digest it
must have), the scorer that runs it with its settings, the metrics it reports (each with the
direction that is better and a relative tolerance), and the baseline to compare with: the
model version that holds an alias (``production``) or a pinned version. Its **digest** is the
hash of all of that: an evaluation counts for a suite only at the digest it was scored at, so
changing a suite's data or settings makes every candidate due again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gangway.errors import PermanentError, field_errors
from gangway.user_yaml import load_yaml

__all__ = ["Baseline", "EvalSuite", "Metric", "SuiteDataset", "load_suites", "suites_json"]

Scorer = Literal["perplexity", "next-bytes"]
"""``perplexity``: mean next-byte loss and perplexity over the dataset's validation split;
``next-bytes``: prompts cut from the validation split, greedy continuation scored against the
bytes that follow (``exact_match``, ``byte_accuracy``)."""

SCORER_METRICS: dict[str, tuple[str, ...]] = {
    "perplexity": ("val_loss", "val_perplexity"),
    "next-bytes": ("exact_match", "byte_accuracy"),
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteDataset(_Model):
    uri: str = Field(
        min_length=1, description="a published corpus: a URI, or a path under the storage root"
    )
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="the digest it must have")


class Metric(_Model):
    name: str = Field(min_length=1)
    better: Literal["lower", "higher"]
    tolerance: float = Field(ge=0, le=10, description="relative change allowed before a regression")


class Baseline(_Model):
    alias: str | None = Field(None, description="the model version holding this alias")
    version: int | None = Field(None, ge=1, description="a pinned model version")

    @model_validator(mode="after")
    def _one(self) -> Baseline:
        if (self.alias is None) == (self.version is None):
            raise ValueError("give exactly one of alias or version")
        return self


class EvalSuite(_Model):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    description: str = ""
    dataset: SuiteDataset
    scorer: Scorer
    settings: dict[str, int] = Field(default_factory=dict, description="the scorer's knobs")
    metrics: list[Metric] = Field(min_length=1)
    baseline: Baseline

    @model_validator(mode="after")
    def _known_metrics(self) -> EvalSuite:
        known = SCORER_METRICS[self.scorer]
        for m in self.metrics:
            if m.name not in known:
                raise ValueError(
                    f"metric {m.name!r}: the {self.scorer} scorer reports {', '.join(known)}"
                )
        return self

    @property
    def digest(self) -> str:
        """The hash of the whole definition (dataset digest, scorer, settings, metrics)."""
        doc = self.model_dump(mode="json", exclude={"description", "baseline"})
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def load_suites(paths: Sequence[Path]) -> list[EvalSuite]:
    """Every suite in ``paths`` (files, or directories of ``*.yaml``), validated; an error names
    the file and each bad field at once."""
    files = [f for p in paths for f in (sorted(p.glob("*.yaml")) if p.is_dir() else [p])]
    if not files:
        raise PermanentError(f"no eval suites in {', '.join(map(str, paths))} (*.yaml)")
    suites: list[EvalSuite] = []
    for f in files:
        try:
            raw: Any = load_yaml(f.read_text())
            suites.append(EvalSuite.model_validate(raw))
        except OSError as e:
            raise PermanentError(f"{f}: cannot read it ({e.strerror})") from None
        except yaml.YAMLError as e:
            raise PermanentError(f"{f}: not YAML ({e})") from None
        except ValidationError as e:
            raise PermanentError(f"{f}: {field_errors(e, root='suite')}") from None
    names = [s.name for s in suites]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PermanentError(f"eval suites: {', '.join(twice)} defined more than once")
    return suites


def suites_json(suites: Sequence[EvalSuite]) -> str:
    """The suites as the steps receive them (one JSON argument)."""
    return json.dumps([s.model_dump(mode="json") for s in suites], separators=(",", ":"))


def parse_suites(text: str) -> list[EvalSuite]:
    """The suites a step was given (:func:`suites_json`)."""
    try:
        return [EvalSuite.model_validate(s) for s in json.loads(text)]
    except (ValueError, TypeError, ValidationError) as e:
        raise PermanentError(f"--suites: not a list of eval suites ({e})") from None
