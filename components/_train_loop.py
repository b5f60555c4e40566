"""The stages of a training run, for :func:`components.training.train`: process group setup,
resume, the step, preemption, logging and checkpoints.

``train`` imports this module only when it runs, so ``--help`` and a config error do not load
the checkpoint machinery (torch.distributed.checkpoint and what it imports).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

from components import checkpoints
from components.config import TrainConfig
from components.corpus import open_corpus, train_batch
from components.model import GPT
from gangway.errors import Preempted, TransientError
from gangway.tracking import CheckpointRef, StepTracker

__all__ = ["Ranks", "StopFlag", "Trainer", "release_process_group", "setup_process_group"]


class StopFlag:
    """Set by SIGTERM; read at step boundaries."""

    def __init__(self) -> None:
        self.set = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.set = True


@dataclass(frozen=True)
class Ranks:
    """This process's place in the gang (torchrun's environment) and its device."""

    world: int
    rank: int
    local_rank: int
    device: torch.device
    cuda: bool

    @property
    def distributed(self) -> bool:
        return self.world > 1


def setup_process_group() -> Ranks:
    """Read torchrun's environment, set up the device and join the process group. Collective."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    ranks = Ranks(world, rank, local_rank, device, cuda)
    if cuda:
        torch.cuda.set_device(device)
    else:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(
            int(threads) if threads.isdigit() else max(1, (os.cpu_count() or 1) // local_world)
        )
    if ranks.distributed:
        try:
            # A bounded collective timeout: a rank stuck waiting for a dead peer gives up (and
            # the gang restarts) instead of hanging for the default 30 minutes.
            dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(minutes=5))
        except (RuntimeError, TimeoutError) as e:  # rendezvous or transport failure
            raise TransientError(f"process group init failed: {e}") from e
    return ranks


def release_process_group(ranks: Ranks) -> None:
    if ranks.distributed and dist.is_initialized():
        dist.destroy_process_group()


@dataclass
class LoopState:
    """What the training loop carries from step to step."""

    start: int = 0  # the first step this run trains: 0, or the step it resumed from
    resumed_from: int | None = None
    last_loss: float | None = None  # the mean across ranks of the last logged window
    losses: list[float] = field(default_factory=list)  # this rank's, since that window
    saved: list[dict[str, Any]] = field(default_factory=list)  # checkpoints this run saved
    t_start: float = 0.0
    t_window: float = 0.0


class Trainer:
    """One rank's run: corpus, model and optimizer, resumed from the newest complete checkpoint
    (a collective, like :meth:`run`), and the loop's state."""

    def __init__(
        self,
        cfg: TrainConfig,
        data_uri: str,
        checkpoints_uri: str,
        *,
        ranks: Ranks,
        track: StepTracker,
        cache: Path,
    ) -> None:
        self.cfg, self.ranks, self.track = cfg, ranks, track
        self.checkpoints_uri = checkpoints_uri
        self.corpus = open_corpus(data_uri, cache / "data")
        _seed_everything(cfg.seed)
        self.model = GPT(cfg.model).to(ranks.device)
        self.ddp: torch.nn.Module = self.model
        if ranks.distributed:
            self.ddp = DDP(self.model, device_ids=[ranks.local_rank] if ranks.cuda else None)
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
        self.state = LoopState()
        self._resume(cache / "ckpt")
        self._log_inputs(data_uri)
        self.ckpt_config: dict[str, Any] = {
            "model": cfg.model.model_dump(),
            "train": cfg.model_dump(exclude={"model"}),
            "dataset_digest": self.corpus.digest,
        }
        self.tokens_per_step = cfg.batch_size * cfg.model.block_size * ranks.world
        self.state.t_start = self.state.t_window = time.perf_counter()
        self.flag = torch.zeros(1, device=ranks.device)

    def _state_dict(self) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.opt)
        return {"model": msd, "optim": osd}

    def _resume(self, cache: Path) -> None:
        found = checkpoints.latest(self.checkpoints_uri)
        if found is None:
            return
        state = self._state_dict()
        checkpoints.load(found, state, cache)
        set_state_dict(
            self.model, self.opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        self.state.start = self.state.resumed_from = found.step
        self.track.use_checkpoint(
            CheckpointRef(uri=found.uri, step=found.step, digest=found.digest)
        )
        _log(self.ranks.rank, {"event": "resumed", "step": found.step, "checkpoint": found.uri})

    def _log_inputs(self, data_uri: str) -> None:
        self.track.log_params(
            {
                "data": data_uri,
                "checkpoints": self.checkpoints_uri,
                "world_size": self.ranks.world,
                **_flat(self.cfg.model_dump()),
            }
        )
        self.track.log_dataset(name="corpus", digest=self.corpus.digest, source=data_uri)

    def run(self, stop: StopFlag) -> dict[str, Any]:
        """Train to ``cfg.steps``. Collective: a collective failing in a gang is transient."""
        try:
            for step in range(self.state.start, self.cfg.steps):
                if self._should_stop(stop):
                    self._preempt(step)
                self._step(step)
                done = step + 1
                if done % self.cfg.log_every == 0 or done == self.cfg.steps:
                    self._log_window(step)
                if done % self.cfg.checkpoint_every == 0 or done == self.cfg.steps:
                    self._save_checkpoint(done)
        except RuntimeError as e:
            if not self.ranks.distributed:
                raise
            # gloo/NCCL report a dead peer as a plain RuntimeError from the collective. In a
            # gang that means another rank was lost: transient, the gang restarts and resumes.
            raise TransientError(
                f"a collective failed at step {step} (a peer rank was "
                f"probably lost): {str(e).splitlines()[0][:300]}"
            ) from e
        return self._result()

    def _should_stop(self, stop: StopFlag) -> bool:
        if not self.ranks.distributed:
            return stop.set
        self.flag.fill_(1.0 if stop.set else 0.0)
        dist.all_reduce(self.flag, op=dist.ReduceOp.MAX)
        # Act on what every rank agreed on, never on the local flag: a SIGTERM that lands after
        # the all-reduce would otherwise stop this rank alone (its peers train on, and the gang
        # deadlocks). The flag stays set for the next step.
        return bool(self.flag.item())

    def _preempt(self, step: int) -> NoReturn:
        """Save at ``step`` (unless this run saved or resumed there) and stop: exit 143."""
        st = self.state
        if step > (st.saved[-1]["step"] if st.saved else st.start):
            self._save_checkpoint(step)
        _log(self.ranks.rank, {"event": "preempted", "step": step})
        raise Preempted(f"SIGTERM at step {step}: checkpoint saved, exiting 143")

    def _step(self, step: int) -> None:
        """One optimizer step on the batch of (``step``, rank), at ``step``'s learning rate."""
        cfg, device = self.cfg, self.ranks.device
        for group in self.opt.param_groups:
            group["lr"] = _lr(cfg, step)
        xb, yb = train_batch(
            self.corpus.train,
            seed=cfg.seed,
            step=step,
            rank=self.ranks.rank,
            batch_size=cfg.batch_size,
            block=cfg.model.block_size,
        )
        x = torch.from_numpy(xb).to(device, non_blocking=True)
        y = torch.from_numpy(yb).to(device, non_blocking=True)
        with torch.autocast(
            device_type=device.type, dtype=torch.bfloat16, enabled=self.ranks.cuda and cfg.bf16
        ):
            logits = self.ddp(x)
            loss = torch.nn.functional.cross_entropy(
                logits.float().view(-1, logits.size(-1)), y.view(-1)
            )
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.state.losses.append(float(loss.detach()))

    def _log_window(self, step: int) -> None:
        """Loss (averaged across ranks: a collective) and tokens/s since the last window."""
        st, done = self.state, step + 1
        loss = st.last_loss = _mean_across_ranks(
            st.losses, self.ranks.device, self.ranks.distributed
        )
        now = time.perf_counter()
        tokens_per_s = self.tokens_per_step * len(st.losses) / (now - st.t_window)
        self.track.log_metric("loss", loss, done)
        self.track.log_metric("tokens_per_s", tokens_per_s, done)
        _log(
            self.ranks.rank,
            {
                "step": done,
                "loss": round(loss, 4),
                "lr": _lr(self.cfg, step),
                "tokens_per_s": round(tokens_per_s),
            },
        )
        st.losses, st.t_window = [], now

    def _save_checkpoint(self, step: int) -> None:
        """Commit a checkpoint at ``step`` (a collective), record it for lineage, prune."""
        loss, digest = self.state.last_loss, self.corpus.digest
        ck = checkpoints.save(
            self.checkpoints_uri,
            step,
            self._state_dict(),
            config=self.ckpt_config,
            metadata={"loss": loss, "dataset_digest": digest},
        )
        self.state.saved.append({"step": step, "uri": ck.uri, "digest": ck.digest, "loss": loss})
        self.track.log_checkpoint(
            CheckpointRef(
                uri=ck.uri,
                step=step,
                digest=ck.digest,
                dataset_digest=digest,
                metrics={} if loss is None else {"loss": loss},
            )
        )
        _log(self.ranks.rank, {"event": "checkpoint", "step": step, "uri": ck.uri})
        if self.cfg.keep_last and self.ranks.rank == 0:
            checkpoints.prune(self.checkpoints_uri, self.cfg.keep_last)

    def _result(self) -> dict[str, Any]:
        cfg, st = self.cfg, self.state
        elapsed = time.perf_counter() - st.t_start
        steps_run = cfg.steps - st.start
        return {
            "steps": cfg.steps,
            "resumed_from": st.resumed_from,
            "final_loss": st.last_loss,
            "checkpoints": st.saved,
            "world_size": self.ranks.world,
            "device": self.ranks.device.type,
            "seconds": round(elapsed, 2),
            "tokens_per_s": round(self.tokens_per_step * steps_run / elapsed) if steps_run else 0,
            "dataset_digest": self.corpus.digest,
        }


def _lr(cfg: TrainConfig, step: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps)
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / span)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def _log(rank: int, record: dict[str, Any]) -> None:
    if rank == 0:
        print(json.dumps(record), flush=True)


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
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _mean_across_ranks(values: list[float], device: torch.device, distributed: bool) -> float:
    t = torch.tensor([sum(values), float(len(values))], device=device, dtype=torch.float64)
    if distributed:
        dist.all_reduce(t)
    return float(t[0] / t[1])
