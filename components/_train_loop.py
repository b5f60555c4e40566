"""The stages of a training run, for :func:`components.training.train`: resume, the step,
preemption, logging and checkpoints (process group setup is in :mod:`components._ranks`, which
checkpoint to resume from in :mod:`components._resume`).

The step keeps the host off the GPU's back: the loss stays on the device until a log window
reads it, the preemption vote is an asynchronous all-reduce on a CPU group
(:class:`~components._ranks.StopVote`), gradients are accumulated over ``grad_accum``
micro-batches with DDP's ``no_sync()`` on all but the last, AdamW is fused on CUDA and the
model is compiled (``model.compile()``, which keeps the checkpoint's parameter names).

``train`` imports this module only when it runs, so ``--help`` and a config error do not load
the checkpoint machinery (torch.distributed.checkpoint and what it imports).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

from components import checkpoints
from components._ranks import Ranks, StopFlag, StopVote
from components._resume import Skipped, resume
from components._throughput import Throughput
from components.config import TrainConfig
from components.corpus import open_corpus, train_batch
from components.model import GPT
from gangway.contract import tag
from gangway.errors import Preempted
from gangway.step.metrics import StepMetrics
from gangway.step.progress import eta_seconds
from gangway.step.tracking import CheckpointRef, StepTracker

__all__ = ["Trainer"]


@dataclass
class LoopState:
    """What the training loop carries from step to step."""

    start: int = 0  # the first step this run trains: 0, or the step it resumed from
    resumed_from: int | None = None
    last_loss: float | None = None  # the mean across ranks of the last logged window
    loss_sum: torch.Tensor | None = None  # this rank's, on the device, since that window
    saved: list[dict[str, Any]] = field(default_factory=list)  # checkpoints this run saved
    skipped: list[dict[str, Any]] = field(default_factory=list)  # unusable ones, set aside
    last: dict[str, Any] = field(default_factory=dict)  # the last window's throughput
    checkpoint_s: float = 0.0  # time spent writing checkpoints this run
    last_save_s: float = 0.0  # the last checkpoint's, for the ETA
    t_start: float = 0.0


class Trainer:
    """One rank's run: corpus, model and optimizer, resumed from the newest checkpoint the gang
    can use (a collective, like :meth:`run`), and the loop's state."""

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
        track.running()  # the rendezvous is done: every rank of the gang runs
        self.metrics = StepMetrics(rank=ranks.rank)
        """Per-rank progress on every rank; the gang's own numbers from rank 0 (``lead``)."""
        self.lead = ranks.rank == 0
        self.at = f"start-up (model, DDP, resume), {ranks.device}"
        self.checkpoints_uri = checkpoints_uri
        self.corpus = open_corpus(data_uri, cache / "data")
        _seed_everything(cfg.seed)
        self.model = GPT(cfg.model).to(ranks.device)
        self.ddp: torch.nn.Module = self.model
        if ranks.distributed:
            self.ddp = DDP(self.model, device_ids=[ranks.local_rank] if ranks.cuda else None)
        self.opt = torch.optim.AdamW(
            self.model.parameters(),
            lr=cfg.lr,
            betas=(0.9, 0.95),
            weight_decay=cfg.weight_decay,
            fused=True if ranks.cuda else None,
        )
        self.state = LoopState()
        self._resume(cache / "ckpt")
        self._log_inputs(data_uri)
        if cfg.compile if cfg.compile is not None else ranks.cuda:
            # In place: the module's state_dict keys stay those of the checkpoints.
            self.ddp.compile()
        self.ckpt_config: dict[str, Any] = {
            "model": cfg.model.model_dump(),
            "train": cfg.model_dump(exclude={"model"}),
            "dataset_digest": self.corpus.digest,
        }
        self.speed = Throughput(
            ranks.device,
            tokens_per_step=cfg.batch_size * cfg.grad_accum * cfg.model.block_size * ranks.world,
            flops_per_token=cfg.model.flops_per_token(),
            world=ranks.world,
        )
        self.vote = StopVote(ranks)
        self.state.t_start = time.perf_counter()
        self.metrics.set("gangway_train_step", self.state.start)
        if self.lead:
            self.metrics.set("gangway_train_target_steps", cfg.steps)

    def _state_dict(self) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.opt)
        return {"model": msd, "optim": osd}

    def _resume(self, cache: Path) -> None:
        """Load the newest checkpoint every rank can use, past unusable ones (set aside and
        reported: :mod:`components._resume`)."""
        state = self._state_dict()
        plan = resume(
            self.checkpoints_uri,
            state,
            ranks=self.ranks,
            model=self.cfg.model.model_dump(),
            cache=cache,
        )
        found = plan.chosen
        if found is None:
            return
        self._report_skipped(plan.skipped, found)
        set_state_dict(
            self.model, self.opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        self.state.start = self.state.resumed_from = found.step
        if self.lead:
            self.metrics.inc("gangway_train_resumes_total")
        self.track.use_checkpoint(
            CheckpointRef(uri=found.uri, step=found.step, digest=found.digest)
        )
        record: dict[str, Any] = {"event": "resumed", "step": found.step, "checkpoint": found.uri}
        if plan.skipped:
            record["skipped"] = [s.step for s in plan.skipped]
        _log(self.ranks.rank, record)

    def _report_skipped(self, skipped: Sequence[Skipped], chosen: checkpoints.Checkpoint) -> None:
        """Each checkpoint skipped for ``chosen``: a log event, a warning on stderr, the result,
        and the lineage tag ``gangway.skipped_checkpoints`` (where they were set aside)."""
        if not skipped:
            return
        for s in skipped:
            self.state.skipped.append({"step": s.step, "why": s.why, "set_aside": s.set_aside})
            event = {"event": "checkpoint_skipped", "step": s.step, "checkpoint": s.uri}
            _log(self.ranks.rank, {**event, "why": s.why, "set_aside": s.set_aside})
            if self.ranks.rank == 0:
                print(
                    f"warning: resuming from step {chosen.step}, not {s.step}: checkpoint step "
                    f"{s.step} is unusable and was set aside at {s.set_aside} (kept for "
                    f"inspection, never loaded again): {s.why}",
                    file=sys.stderr,
                    flush=True,
                )
        self.track.set_tags(
            {tag("skipped_checkpoints"): json.dumps([s.set_aside for s in skipped])}
        )

    def _log_inputs(self, data_uri: str) -> None:
        self.track.log_params(
            {
                "data": data_uri,
                "checkpoints": self.checkpoints_uri,
                "world_size": self.ranks.world,
                "device": str(self.ranks.device),
                **_flat(self.cfg.model_dump()),
            }
        )
        self.track.log_dataset(name="corpus", digest=self.corpus.digest, source=data_uri)

    def run(self, stop: StopFlag) -> dict[str, Any]:
        """Train to ``cfg.steps``. Collective. :attr:`at` says where it is, for a failure's
        message (:func:`components._ranks.settle` classes it)."""
        for step in range(self.state.start, self.cfg.steps):
            self.at = f"step {step}, {self.ranks.device}"
            if self.vote.agreed(stop.set):
                self._preempt(step)
            self._step(step)
            done = step + 1
            self.metrics.set("gangway_train_step", done)
            if self.lead:
                self.metrics.set("gangway_train_last_step_time_seconds", time.time())
            if done % self.cfg.log_every == 0 or done == self.cfg.steps:
                self._log_window(step)
            if done % self.cfg.checkpoint_every == 0 or done == self.cfg.steps:
                self.at = f"checkpoint at step {done}, {self.ranks.device}"
                self._save_checkpoint(done)
        self.vote.drain()
        return self._result()

    def _preempt(self, step: int) -> NoReturn:
        """Save at ``step`` (unless this run saved or resumed there) and stop: exit 143."""
        st = self.state
        if step > (st.saved[-1]["step"] if st.saved else st.start):
            self._save_checkpoint(step)
        _log(self.ranks.rank, {"event": "preempted", "step": step})
        raise Preempted(f"SIGTERM at step {step}: checkpoint saved, exiting 143")

    def _step(self, step: int) -> None:
        """One optimizer step at ``step``'s learning rate over ``grad_accum`` micro-batches,
        each the batch of (step, micro-batch, rank); the loss stays on the device."""
        cfg, device, accum = self.cfg, self.ranks.device, self.cfg.grad_accum
        for group in self.opt.param_groups:
            group["lr"] = _lr(cfg, step)
        total = torch.zeros((), device=device)
        for micro in range(accum):
            x, y = self._batch(step * accum + micro)
            # Gradients are all-reduced on the last micro-batch only.
            skip_sync = self.ranks.distributed and micro < accum - 1
            with self.ddp.no_sync() if skip_sync else contextlib.nullcontext():  # type: ignore[operator]
                with torch.autocast(
                    device_type=device.type,
                    dtype=torch.bfloat16,
                    enabled=self.ranks.cuda and cfg.bf16,
                ):
                    logits = self.ddp(x)
                    loss = torch.nn.functional.cross_entropy(
                        logits.float().view(-1, logits.size(-1)), y.view(-1)
                    )
                (loss / accum).backward()  # type: ignore[no-untyped-call]
            total += loss.detach() / accum
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        st = self.state
        st.loss_sum = total if st.loss_sum is None else st.loss_sum + total
        self.speed.steps += 1

    def _batch(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        xb, yb = train_batch(
            self.corpus.train,
            seed=self.cfg.seed,
            step=index,
            rank=self.ranks.rank,
            batch_size=self.cfg.batch_size,
            block=self.cfg.model.block_size,
        )
        x, y = torch.from_numpy(xb), torch.from_numpy(yb)
        if self.ranks.cuda:
            x, y = x.pin_memory(), y.pin_memory()
        device = self.ranks.device
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    def _log_window(self, step: int) -> None:
        """Loss (averaged across ranks: a collective, and the window's one host sync), step
        time, tokens/s and MFU since the last window, and the peak memory so far."""
        st, done = self.state, step + 1
        steps = self.speed.steps
        loss = st.last_loss = _mean_across_ranks(
            st.loss_sum, steps, self.ranks.device, self.ranks.distributed
        )
        st.loss_sum = None
        speed = st.last = self.speed.window()
        self.track.log_metric("loss", loss, done)
        for name, value in speed.items():
            if value is not None:
                self.track.log_metric(name, value, done)
        record: dict[str, Any] = {"step": done, "loss": round(loss, 4), "lr": _lr(self.cfg, step)}
        record.update({k: _round(v) for k, v in speed.items() if v is not None})
        _log(self.ranks.rank, record)
        if self.lead:
            self._export_window(done, loss, speed)

    def _export_window(self, done: int, loss: float, speed: dict[str, float | None]) -> None:
        """The window's numbers as metrics, and the ETA at its step time."""
        m, cfg = self.metrics, self.cfg
        m.set("gangway_train_loss", loss)
        m.set("gangway_train_tokens_per_second", speed["tokens_per_s"] or 0.0)
        if speed["mfu"] is not None:
            m.set("gangway_train_mfu_ratio", speed["mfu"])
        step_s = speed["step_time_s"] or 0.0
        m.observe("gangway_train_step_duration_seconds", step_s)
        m.set("gangway_train_step_seconds", step_s)
        eta = eta_seconds(
            done,
            cfg.steps,
            step_s,
            checkpoint_every=cfg.checkpoint_every,
            checkpoint_seconds=self.state.last_save_s,
        )
        m.set("gangway_train_eta_seconds", eta)

    def _save_checkpoint(self, step: int) -> None:
        """Commit a checkpoint at ``step`` (a collective), record it for lineage, prune. Its
        time is logged apart and kept out of the step time."""
        t0 = time.perf_counter()
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
        if self.cfg.keep_last and self.ranks.rank == 0:
            checkpoints.prune(self.checkpoints_uri, self.cfg.keep_last)
        took = time.perf_counter() - t0
        self.speed.paused += took
        self.state.checkpoint_s += took
        self.state.last_save_s = took
        if self.lead:
            self.metrics.set("gangway_checkpoint_last_complete_time_seconds", time.time())
            self.metrics.observe("gangway_checkpoint_save_duration_seconds", took)
        self.track.log_metric("checkpoint_s", took, step)
        _log(
            self.ranks.rank,
            {"event": "checkpoint", "step": step, "uri": ck.uri, "seconds": round(took, 3)},
        )

    def _result(self) -> dict[str, Any]:
        cfg, st = self.cfg, self.state
        elapsed = time.perf_counter() - st.t_start
        steps_run = cfg.steps - st.start
        tokens = self.speed.tokens_per_step * steps_run
        return {
            "steps": cfg.steps,
            "resumed_from": st.resumed_from,
            "final_loss": st.last_loss,
            "checkpoints": st.saved,
            "skipped_checkpoints": st.skipped,
            "world_size": self.ranks.world,
            "device": self.ranks.device.type,
            "seconds": round(elapsed, 2),
            "checkpoint_seconds": round(st.checkpoint_s, 2),
            "tokens_per_s": round(tokens / elapsed) if steps_run else 0,
            **{f"last_{k}": _round(v) for k, v in st.last.items() if v is not None},
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


def _round(v: float) -> float:
    return round(v, 4) if abs(v) < 100 else round(v)


def _mean_across_ranks(
    loss_sum: torch.Tensor | None, steps: int, device: torch.device, distributed: bool
) -> float:
    t = torch.zeros(2, device=device, dtype=torch.float64)
    if loss_sum is not None:
        t[0] = loss_sum.to(torch.float64)
    t[1] = float(steps)
    if distributed:
        dist.all_reduce(t)
    return float(t[0] / t[1]) if t[1] else float("nan")
