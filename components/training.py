"""DDP training of the byte-level GPT, launched by torchrun, resumable and preemption-safe.

    torchrun --nnodes 1 --nproc-per-node 2 -m components.training \\
        --data file:///tmp/gangway/corpus --checkpoints file:///tmp/gangway/ckpt --config tiny

* Rendezvous is torchrun's (c10d); the process group is gloo on CPU and NCCL on GPU, with bf16
  autocast on GPU. Without torchrun it runs as a single process.
* Deterministic for a seed: the batch of each (step, rank) is a pure function of them, there is
  no dropout, and model, optimizer and RNG state are checkpointed.
* Every ``checkpoint_every`` steps (and at the end) a checkpoint is committed under
  ``CHECKPOINTS/step-NNNNNNNN``. On start the newest complete checkpoint is loaded.
* On SIGTERM every rank agrees (an all-reduce at each step) to save a checkpoint and exit 143.
* Logs one JSON line per ``log_every`` steps with loss and tokens/s (rank 0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from components._cli import emit, main_wrapper, parse_overrides
from components.config import TrainConfig, load_config
from gangway.errors import Preempted, TransientError
from gangway.tracking import CheckpointRef, StepTracker

__all__ = ["train"]


class _StopFlag:
    """Set by SIGTERM; read at step boundaries."""

    def __init__(self) -> None:
        self.set = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.set = True


def _lr(cfg: TrainConfig, step: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps)
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / span)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def _log(rank: int, record: dict[str, Any]) -> None:
    if rank == 0:
        print(json.dumps(record), flush=True)


def train(
    cfg: TrainConfig,
    data_uri: str,
    checkpoints_uri: str,
    *,
    cache_dir: Path | None = None,
    tracker: StepTracker | None = None,
) -> dict[str, Any]:
    """Train to ``cfg.steps``, resuming from the newest complete checkpoint. Collective.

    ``tracker`` (rank 0's) receives params, metrics and every checkpoint for lineage.
    """
    track = tracker or StepTracker(env={})
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

    from components import checkpoints
    from components.corpus import open_corpus, train_batch
    from components.model import GPT

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(
            int(threads) if threads.isdigit() else max(1, (os.cpu_count() or 1) // local_world)
        )
    distributed = world > 1
    if distributed:
        try:
            # A bounded collective timeout: a rank stuck waiting for a dead peer gives up (and
            # the gang restarts) instead of hanging for the default 30 minutes.
            dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(minutes=5))
        except (RuntimeError, TimeoutError) as e:  # rendezvous or transport failure
            raise TransientError(f"process group init failed: {e}") from e
    stop = _StopFlag()
    signal.signal(signal.SIGTERM, stop.handler)
    cache = cache_dir or Path(tempfile.gettempdir()) / "gangway-cache"
    try:
        corpus = open_corpus(data_uri, cache / "data")
        _seed_everything(cfg.seed)
        model = GPT(cfg.model).to(device)
        ddp = DDP(model, device_ids=[local_rank] if cuda else None) if distributed else model
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
        start = 0
        resumed_from = None
        found = checkpoints.latest(checkpoints_uri)
        if found is not None:
            msd, osd = get_state_dict(model, opt)
            state: dict[str, Any] = {"model": msd, "optim": osd}
            checkpoints.load(found, state, cache / "ckpt")
            set_state_dict(
                model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
            )
            start = resumed_from = found.step
            track.use_checkpoint(CheckpointRef(uri=found.uri, step=found.step, digest=found.digest))
            _log(rank, {"event": "resumed", "step": start, "checkpoint": found.uri})
        track.log_params(
            {
                "data": data_uri,
                "checkpoints": checkpoints_uri,
                "world_size": world,
                **_flat(cfg.model_dump()),
            }
        )
        track.log_dataset(name="corpus", digest=corpus.digest, source=data_uri)
        config = {
            "model": cfg.model.model_dump(),
            "train": cfg.model_dump(exclude={"model"}),
            "dataset_digest": corpus.digest,
        }
        tokens_per_step = cfg.batch_size * cfg.model.block_size * world
        t_start = t_window = time.perf_counter()
        losses: list[float] = []
        last_loss: float | None = None
        saved: list[dict[str, Any]] = []
        flag = torch.zeros(1, device=device)

        def save(step: int) -> None:
            msd, osd = get_state_dict(model, opt)
            ck = checkpoints.save(
                checkpoints_uri,
                step,
                {"model": msd, "optim": osd},
                config=config,
                metadata={"loss": last_loss, "dataset_digest": corpus.digest},
            )
            saved.append({"step": step, "uri": ck.uri, "digest": ck.digest, "loss": last_loss})
            track.log_checkpoint(
                CheckpointRef(
                    uri=ck.uri,
                    step=step,
                    digest=ck.digest,
                    dataset_digest=corpus.digest,
                    metrics={} if last_loss is None else {"loss": last_loss},
                )
            )
            _log(rank, {"event": "checkpoint", "step": step, "uri": ck.uri})
            if cfg.keep_last and rank == 0:
                checkpoints.prune(checkpoints_uri, cfg.keep_last)

        try:
            for step in range(start, cfg.steps):
                stopping = stop.set
                if distributed:
                    flag.fill_(1.0 if stop.set else 0.0)
                    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                    # Act on what every rank agreed on, never on the local flag: a SIGTERM that
                    # lands after the all-reduce would otherwise stop this rank alone (its peers
                    # train on, and the gang deadlocks). The flag stays set for the next step.
                    stopping = bool(flag.item())
                if stopping:
                    if step > (saved[-1]["step"] if saved else start):
                        save(step)
                    _log(rank, {"event": "preempted", "step": step})
                    raise Preempted(f"SIGTERM at step {step}: checkpoint saved, exiting 143")
                for group in opt.param_groups:
                    group["lr"] = _lr(cfg, step)
                xb, yb = train_batch(
                    corpus.train,
                    seed=cfg.seed,
                    step=step,
                    rank=rank,
                    batch_size=cfg.batch_size,
                    block=cfg.model.block_size,
                )
                x = torch.from_numpy(xb).to(device, non_blocking=True)
                y = torch.from_numpy(yb).to(device, non_blocking=True)
                with torch.autocast(
                    device_type=device.type, dtype=torch.bfloat16, enabled=cuda and cfg.bf16
                ):
                    logits = ddp(x)
                    loss = torch.nn.functional.cross_entropy(
                        logits.float().view(-1, logits.size(-1)), y.view(-1)
                    )
                loss.backward()  # type: ignore[no-untyped-call]
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
                done = step + 1
                if done % cfg.log_every == 0 or done == cfg.steps:
                    last_loss = _mean_across_ranks(losses, device, distributed)
                    now = time.perf_counter()
                    track.log_metric("loss", last_loss, done)
                    track.log_metric(
                        "tokens_per_s", tokens_per_step * len(losses) / (now - t_window), done
                    )
                    _log(
                        rank,
                        {
                            "step": done,
                            "loss": round(last_loss, 4),
                            "lr": _lr(cfg, step),
                            "tokens_per_s": round(tokens_per_step * len(losses) / (now - t_window)),
                        },
                    )
                    losses, t_window = [], now
                if done % cfg.checkpoint_every == 0 or done == cfg.steps:
                    save(done)
        except RuntimeError as e:
            if not distributed:
                raise
            # gloo/NCCL report a dead peer as a plain RuntimeError from the collective. In a
            # gang that means another rank was lost: transient, the gang restarts and resumes.
            raise TransientError(
                f"a collective failed at step {step} (a peer rank was "
                f"probably lost): {str(e).splitlines()[0][:300]}"
            ) from e
        elapsed = time.perf_counter() - t_start
        steps_run = cfg.steps - start
        return {
            "steps": cfg.steps,
            "resumed_from": resumed_from,
            "final_loss": last_loss,
            "checkpoints": saved,
            "world_size": world,
            "device": device.type,
            "seconds": round(elapsed, 2),
            "tokens_per_s": round(tokens_per_step * steps_run / elapsed) if steps_run else 0,
            "dataset_digest": corpus.digest,
        }
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _seed_everything(seed: int) -> None:
    """Seed every generator a step could touch, so two runs with one seed agree bit for bit."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _mean_across_ranks(values: list[float], device: Any, distributed: bool) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([sum(values), float(len(values))], device=device, dtype=torch.float64)
    if distributed:
        dist.all_reduce(t)
    return float(t[0] / t[1])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components.training",
        description="Train the byte-level GPT with DDP (run it under torchrun for several ranks).",
    )
    p.add_argument("--data", required=True, help="published corpus URI (from staging --publish)")
    p.add_argument(
        "--checkpoints",
        required=True,
        help="checkpoint root URI, keyed by workflow and step (not by pod or attempt)",
    )
    p.add_argument("--config", help="model preset (tiny, small, gpu) or a JSON/YAML config file")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set steps=200 --set model.n_layer=4",
    )
    p.add_argument("--cache-dir", type=Path, help="local cache for fetched data and checkpoints")
    p.add_argument("--result-out", type=Path, help="write the result JSON here (rank 0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cfg = load_config(args.config, parse_overrides(args.overrides))
    rank0 = int(os.environ.get("RANK", "0")) == 0
    with StepTracker(env=None if rank0 else {}) as tracker:
        result = train(cfg, args.data, args.checkpoints, cache_dir=args.cache_dir, tracker=tracker)
        tracker.log_params({"resumed_from": result["resumed_from"]})
    if rank0:
        emit(result, args.result_out)
    return 0


if __name__ == "__main__":
    main_wrapper(main)()
