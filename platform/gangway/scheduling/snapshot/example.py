"""The example snapshot shipped with Gangway (``example.yaml`` beside this module): the example
platform config's two clusters on a busy afternoon, made by :func:`example_snapshot`.

* ``us-east`` (us-east-1): 8 H100 nodes (8 GPUs each) in 4 racks of 2, 2 racks a block, and 4
  A100 nodes in 2 racks. Research pre-trains on one block, runs a batch sweep and a fine-tune;
  evals holds one H100 node; a research ablation (3 nodes) waits.
* ``eu-west`` (eu-west-1): the config's HyperNodes — 4 A100 nodes (4 GPUs each) in
  ``eu-rack-a`` and 4 L4 nodes (8 each) in ``eu-rack-b``, under ``eu-spine``; the platform team
  refreshes embeddings on L4s.
"""

from __future__ import annotations

from gangway.config import EXAMPLE, load_config
from gangway.scheduling.snapshot.build import T0, from_config
from gangway.scheduling.snapshot.cluster_state import Snapshot

__all__ = ["example_snapshot"]


def example_snapshot() -> Snapshot:
    b = from_config(load_config(EXAMPLE), T0)
    b.source = "example"
    us = b.clusters["us-east"]
    us.racks(4, per_rack=2, gpu_type="H100", prefix="use-h100")
    us.racks(2, per_rack=2, gpu_type="A100", prefix="use-a100")
    us.running(
        "pretrain-7b",
        queue="research",
        pods=4,
        priority_class="gangway-normal",
        hours=30,
        checkpoint_hours_ago=0.5,
    )
    us.running(
        "sweep-lr-3",
        queue="research",
        pods=1,
        priority_class="gangway-batch",
        hours=5,
        checkpoint_hours_ago=1.5,
    )
    us.running("release-evals", queue="evals", pods=1, priority_class="gangway-critical", hours=1)
    us.running(
        "finetune-13b",
        queue="research",
        pods=2,
        gpu_type="A100",
        priority_class="gangway-batch",
        hours=12,
        checkpoint_hours_ago=3,
    )
    # 3 nodes of H100 in one go: only 2 are free, and nothing of research is lower than it
    # but the batch sweep — which alone would not free enough in one rack or block.
    us.pending("ablation-2", queue="research", pods=3, priority_class="gangway-normal", hours=0.75)
    eu = b.clusters["eu-west"]
    for i in range(1, 9):
        rack = "eu-rack-a" if i <= 4 else "eu-rack-b"
        model, gpus = ("A100", 4) if i <= 4 else ("L4", 8)
        domains = {"tier1": rack, "tier2": "eu-spine"}
        eu.node(f"eu-gpu-{i:02d}", gpu_type=model, gpus=gpus, domains=domains)
    eu.running(
        "embed-refresh",
        queue="platform",
        pods=2,
        gpus=4,
        gpu_type="L4",
        priority_class="gangway-batch",
        hours=2,
    )
    return b.build()
