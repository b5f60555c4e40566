"""The config's ``alerts:`` block: optional, defaults filled in, per-queue overrides, and every
mistake named with its field path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, load_config
from gangway.config.alerts import BUILT_IN, seconds
from gangway.errors import PermanentError


def _with(tmp_path: Path, alerts: dict[str, Any] | None) -> Path:
    raw = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    raw.pop("alerts", None)
    if alerts is not None:
        raw["alerts"] = alerts
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_without_the_block_every_threshold_has_its_default(tmp_path: Path) -> None:
    alerts = load_config(_with(tmp_path, None)).alerts
    assert alerts.threshold("research", "pending") == BUILT_IN.pending == "30m"
    assert alerts.threshold(None, "stall_factor") == 10
    assert alerts.nightly_eval.clusters == [] and alerts.runbook_base_url is None


def test_a_queue_overrides_the_defaults_which_override_the_built_in(tmp_path: Path) -> None:
    block = {"defaults": {"pending": "1h"}, "queues": {"evals": {"stall_floor": "20m"}}}
    alerts = load_config(_with(tmp_path, block)).alerts
    assert alerts.threshold("evals", "stall_floor") == "20m"
    assert alerts.threshold("evals", "pending") == "1h"  # from defaults
    assert alerts.threshold("research", "stall_floor") == "10m"  # built in
    assert alerts.overrides("stall_floor") == {"evals": "20m"}
    assert seconds("20m") == 1200 and seconds("26h") == 93600


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        pytest.param(
            {"defaults": {"pending": "30 minutes"}},
            "alerts.defaults.pending: Value error, '30 minutes' is not a duration",
            id="bad-duration",
        ),
        pytest.param(
            {"queues": {"research": {"stall_factor": 0.5}}},
            "alerts.queues.research.stall_factor: Input should be greater than or equal to 1",
            id="factor-below-one",
        ),
        pytest.param(
            {"queues": {"nope": {"pending": "1h"}}},
            "alerts.queues.nope: no queue 'nope'; queues: evals, platform, research",
            id="unknown-queue",
        ),
        pytest.param(
            {"nightly_eval": {"clusters": ["us-west"]}},
            "alerts.nightly_eval.clusters[0]: no cluster 'us-west'",
            id="unknown-cluster",
        ),
        pytest.param(
            {"spool_backlog_records": 0},
            "alerts.spool_backlog_records: Input should be greater than or equal to 1",
            id="spool-threshold",
        ),
        pytest.param(
            {"confirm_fr": "1m"},
            "alerts.confirm_fr: Extra inputs are not permitted (did you mean 'confirm_for'?)",
            id="misspelt-key",
        ),
    ],
)
def test_each_mistake_is_named_with_its_field_path(
    tmp_path: Path, block: dict[str, Any], expected: str
) -> None:
    with pytest.raises(PermanentError) as e:
        load_config(_with(tmp_path, block))
    assert expected in str(e.value)


@pytest.mark.parametrize("base", ["docs/runbooks", "/srv/runbooks", "github.com/o/r", "ftp://x/y"])
def test_a_runbook_base_that_is_not_an_absolute_http_url_is_refused(
    tmp_path: Path, base: str
) -> None:
    with pytest.raises(PermanentError) as e:
        load_config(_with(tmp_path, {"runbook_base_url": base}))
    text = str(e.value)
    assert "alerts.runbook_base_url" in text
    assert "give an absolute http(s) URL where the runbooks are published" in text


def test_the_example_publishes_its_runbooks_at_an_absolute_url() -> None:
    base = load_config(EXAMPLE).alerts.runbook_base_url
    assert base is not None and base.startswith("https://") and base.endswith("/docs/runbooks")
