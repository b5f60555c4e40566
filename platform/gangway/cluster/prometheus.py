"""Prometheus's HTTP API, read: an instant PromQL query and its vector of samples.

The thin I/O layer under ``gangway status`` (a training step's progress) and ``gangway usage
--prometheus``; what the samples mean is decided elsewhere (:mod:`gangway.step.progress`,
:mod:`gangway.lineage.usage`). Standard library only.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from gangway.errors import GangwayError, TransientError
from gangway.step.progress import Progress, from_samples

__all__ = ["PromSample", "query", "workflow_progress"]


@dataclass(frozen=True)
class PromSample:
    """One series of an instant vector: its name, labels and value."""

    name: str
    labels: dict[str, str]
    value: float

    def triple(self) -> tuple[str, dict[str, str], float]:
        return self.name, self.labels, self.value


def query(
    url: str, promql: str, *, at: float | None = None, timeout: float = 10.0
) -> list[PromSample]:
    """The instant vector ``promql`` evaluates to at Unix time ``at`` (now when None).

    An unreachable server is a :class:`TransientError` naming the URL; a query Prometheus
    refuses is a :class:`GangwayError` with its message.
    """
    if not url.startswith(("http://", "https://")):
        raise GangwayError(
            f"--prometheus {url}: not an http(s) URL; give the Prometheus server's address, "
            "e.g. http://prometheus.monitoring:9090"
        )
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    endpoint = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(endpoint, timeout=timeout) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        detail = _error_text(e.read())
        if detail is None:
            raise GangwayError(
                f"--prometheus {url}: HTTP {e.code} from its /api/v1/query, not Prometheus's "
                "API; is this a Prometheus server (its base URL, without a path)?"
            ) from None
        raise GangwayError(f"Prometheus at {url} refused {promql!r}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise TransientError(
            f"Prometheus at {url} cannot be reached ({e}); check the URL (a cluster's "
            "prometheus_url in the platform config, or --prometheus)"
        ) from None
    if body.get("status") != "success":
        raise GangwayError(f"Prometheus at {url}: {body.get('error', body)}")
    data = body.get("data") or {}
    if data.get("resultType") == "scalar":
        return [PromSample("", {}, float(data["result"][1]))]
    out = []
    for item in data.get("result") or []:
        labels = dict(item.get("metric") or {})
        name = labels.pop("__name__", "")
        out.append(PromSample(name, labels, float(item["value"][1])))
    return out


def _error_text(raw: bytes) -> str | None:
    """Prometheus's own error message, or None when the answer is not its API's JSON."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or "error" not in body:
        return None
    return str(body["error"])


def workflow_progress(url: str, workflow: str, *, at: float | None = None) -> dict[str, Progress]:
    """Each step of ``workflow`` that reports progress, by step name, as Prometheus last
    scraped it (at Unix time ``at``, now when None)."""
    names = "gangway_(train|checkpoint|items)_.+"
    selector = f'{{__name__=~"{names}",workflow="{_quoted(workflow)}"}}'
    samples = [s.triple() for s in query(url, selector, at=at)]
    return {step: p for (_, step), p in from_samples(samples).items()}


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
