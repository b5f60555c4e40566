"""DDP training of the byte-level GPT, launched by torchrun, resumable and preemption-safe.

    torchrun --nnodes 1 --nproc-per-node 2 -m components.training \\
        --data file:///tmp/gangway/corpus --checkpoints file:///tmp/gangway/ckpt --config tiny

* Rendezvous is torchrun's (c10d); the process group is gloo on CPU and NCCL on GPU, with bf16
  autocast on GPU. Without torchrun it runs as a single process.
* Deterministic for a seed: the batch of each (step, rank) is a pure function of them, there is
  no dropout, and model, optimizer and RNG state are checkpointed.
* Every ``checkpoint_every`` steps (and at the end) a checkpoint is committed under
  ``CHECKPOINTS/step-NNNNNNNN``. On start the newest complete checkpoint that every rank can
  load is loaded; a newer, unusable one (corrupt, missing a file, unreadable) is skipped, named
  on stderr and in the log, and set aside under ``CHECKPOINTS/corrupt/``, never deleted. When
  none is usable the run fails for good, naming each, rather than start again from step 0.
* On SIGTERM every rank agrees (an all-reduce at each step) to save a checkpoint and exit 143.
* Logs one JSON line per ``log_every`` steps with loss and tokens/s (rank 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.config import TrainConfig, load_config
from components.interfaces import TRAIN
from gangway.errors import Preempted
from gangway.step import emit, main_wrapper, parse_overrides
from gangway.step.tracking import StepTracker

__all__ = ["train"]


_HELD: list[object] = []
"""A distributed run's trainer, never freed by the interpreter: its DDP reducer holds the gloo
process group, whose destructor joins a worker thread that may still be freeing a collective's
tensors — which needs the GIL the destructor holds (a deadlock, seen when a resume's
collectives were the last ones, e.g. a gang resumed at its final step). The rank leaves with
``os._exit`` instead (:func:`gangway.step.main_wrapper`)."""


def train(
    cfg: TrainConfig,
    data_uri: str,
    checkpoints_uri: str,
    *,
    cache_dir: Path | None = None,
    tracker: StepTracker | None = None,
) -> dict[str, Any]:
    """Train to ``cfg.steps``, resuming from the newest checkpoint every rank can use (past
    unusable ones: :mod:`components._resume`). Collective.

    ``tracker`` (rank 0's) receives params, metrics and every checkpoint for lineage. The
    stages (process group, resume, step, preemption, checkpoints) are in
    :mod:`components._train_loop`, imported only when training runs.
    """
    track = tracker or StepTracker(env={})
    from components._ranks import StopFlag, release_process_group, settle, setup_process_group
    from components._train_loop import Trainer

    ranks = setup_process_group()
    stop = StopFlag()
    signal.signal(signal.SIGTERM, stop.handler)
    cache = cache_dir or Path(tempfile.gettempdir()) / "gangway-cache"
    trainer: Trainer | None = None
    try:
        trainer = Trainer(cfg, data_uri, checkpoints_uri, ranks=ranks, track=track, cache=cache)
        if ranks.distributed:
            _HELD.append(trainer)
        return trainer.run(stop)
    except (KeyboardInterrupt, SystemExit, Preempted):
        raise
    except BaseException as e:  # a CheckpointException is a BaseException
        where = trainer.at if trainer else f"start-up, {ranks.device}"
        err = settle(e, ranks, where=where, batch_size=cfg.batch_size)
        if err is e:
            raise
        raise err from e
    finally:
        release_process_group(ranks)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components.training",
        description="Train the byte-level GPT with DDP (run it under torchrun for several ranks).",
    )
    TRAIN.add_arguments(p)
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set steps=200 --set model.n_layer=4",
    )
    p.add_argument("--result-out", type=Path, help="write the result JSON here (rank 0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    TRAIN.read_inputs(args)
    named = [(k, getattr(args, k)) for k in ("steps", "checkpoint_every", "log_every")]
    # 0 (as a pipeline parameter's default says) is "the model preset's".
    overrides = [f"{k}={v}" for k, v in named if v] + args.overrides
    cfg = load_config(args.config, parse_overrides(overrides))
    rank0 = int(os.environ.get("RANK", "0")) == 0
    with StepTracker(env=None if rank0 else {}) as tracker:
        result = train(
            cfg, args.corpus, args.checkpoints, cache_dir=args.cache_dir, tracker=tracker
        )
        tracker.log_params({"resumed_from": result["resumed_from"]})
    if rank0:
        emit(result, args.result_out)
    return 0


if __name__ == "__main__":
    main_wrapper(main)()
