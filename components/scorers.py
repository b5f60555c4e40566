"""The scorers an eval suite can name (:data:`gangway.evals.suites.SCORER_METRICS`): each
scores one checkpoint on the suite's dataset and returns its metrics.

* ``perplexity`` — mean next-byte loss (nats) and perplexity over the first ``max_tokens``
  bytes of the validation split, as evaluation scores checkpoints;
* ``next-bytes`` — ``prompts`` windows spread evenly over the validation split: the model
  continues the first ``prompt_bytes`` greedily for ``answer_bytes``, scored against the bytes
  that follow (``exact_match``: all right; ``byte_accuracy``: the share right).

The dataset must have the digest the suite pins: scores on other data would not compare.
"""

from __future__ import annotations

from pathlib import Path

from gangway.errors import PermanentError
from gangway.evals.suites import EvalSuite

__all__ = ["run_scorer"]


def run_scorer(suite: EvalSuite, dataset: str, checkpoint: str, cache: Path) -> dict[str, float]:
    """The suite's metrics for ``checkpoint`` on ``dataset`` (the suite's, resolved)."""
    from components.corpus import open_corpus

    corpus = open_corpus(dataset, cache / "data")
    if corpus.digest != suite.dataset.digest:
        raise PermanentError(
            f"suite {suite.name!r}: the dataset at {dataset} has digest {corpus.digest}, the "
            f"suite pins {suite.dataset.digest}; update dataset.digest if the change is meant"
        )
    if suite.scorer == "perplexity":
        from components.evaluation import evaluate

        doc = evaluate(
            dataset,
            [checkpoint],
            max_tokens=suite.settings.get("max_tokens", 65_536),
            cache_dir=cache,
        )
        best = doc["best"]
        return {"val_loss": float(best["loss"]), "val_perplexity": float(best["perplexity"])}
    return _next_bytes(suite, corpus.val, checkpoint, cache)


def _next_bytes(suite: EvalSuite, val: object, checkpoint: str, cache: Path) -> dict[str, float]:
    import numpy as np
    import torch

    from components._loading import checkpoint_at, load_model
    from components.devices import step_device

    data = np.asarray(val)
    device = step_device()
    prompts = suite.settings.get("prompts", 64)
    prompt, answer = suite.settings.get("prompt_bytes", 64), suite.settings.get("answer_bytes", 8)
    model = load_model(checkpoint_at(checkpoint), cache, device)
    if prompt > model.cfg.block_size:
        raise PermanentError(
            f"suite {suite.name!r}: prompt_bytes {prompt} exceeds the model's block size "
            f"{model.cfg.block_size}"
        )
    if len(data) < prompt + answer:
        raise PermanentError(f"suite {suite.name!r}: the validation split is too short")
    starts = np.linspace(0, len(data) - prompt - answer, prompts).astype(np.int64)
    x = torch.from_numpy(np.stack([data[s : s + prompt] for s in starts]).astype(np.int64))
    truth = torch.from_numpy(
        np.stack([data[s + prompt : s + prompt + answer] for s in starts]).astype(np.int64)
    ).to(device)
    x = x.to(device)
    with torch.no_grad():
        got = model.generate(x, answer)[:, prompt:]
    right = got == truth
    return {
        "exact_match": float(right.all(dim=1).float().mean()),
        "byte_accuracy": float(right.float().mean()),
    }
