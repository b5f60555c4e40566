"""``gangway demo``: the whole spine on this machine, with live progress and a summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gangway.cli._output import console
from gangway.demo import DemoSettings, StepResult, demo_steps, inference_steps, run_steps

__all__ = ["demo"]


def _key_outputs(step: StepResult) -> str:
    o = step.outputs
    if step.name == "dataset":
        return f"{o.get('files')} files, {o.get('bytes')} bytes"
    if step.name == "stage":
        return f"digest {str(o.get('digest', ''))[:19]}…, {o.get('train_tokens')} train tokens"
    if step.name == "train":
        ck = o.get("checkpoints") or []
        loss = o.get("final_loss")
        return (
            f"{len(ck)} checkpoints, loss {loss:.3f}, {o.get('tokens_per_s')} tok/s"
            if loss
            else "already trained (resumed at the end)"
        )
    if step.name == "evaluate":
        best = o.get("best", {})
        return f"best step {best.get('step')} (ppl {best.get('perplexity')})"
    if step.name.startswith("infer"):
        return (
            "skipped (already written)"
            if o.get("skipped")
            else (f"{o.get('documents')} docs, ppl {o.get('mean_perplexity')}")
        )
    return ""


def demo(
    state_dir: Annotated[Path, typer.Option(help="where data, checkpoints and logs go")] = Path(
        ".gangway/demo"
    ),
    steps: Annotated[int, typer.Option(min=1, help="training steps")] = 300,
    nproc: Annotated[int, typer.Option(min=1, help="torchrun ranks (processes)")] = 2,
    shards: Annotated[int, typer.Option(min=1, help="batch-inference shards")] = 4,
    checkpoint_every: Annotated[int, typer.Option(min=1, help="steps between checkpoints")] = 100,
) -> None:
    """Run the demo pipeline end to end: stage → train (torchrun) → evaluate → infer.

    Safe to re-run: finished work is skipped or resumed.
    """
    settings = DemoSettings(
        state_dir=state_dir,
        nproc=nproc,
        steps=steps,
        shards=shards,
        checkpoint_every=checkpoint_every,
    )
    done: list[StepResult] = []

    def show(step: StepResult) -> None:
        if step.status == "running":
            status.update(f"[bold]{step.name}[/] running… (log: {step.log})")
        else:
            mark = "[green]✓[/]" if step.status == "succeeded" else "[red]✗[/]"
            console.print(f"{mark} {step.name:<9} {step.seconds:6.1f}s  {_key_outputs(step)}")
            done.append(step)

    with console.status("starting") as status:
        ok = run_steps(demo_steps(settings), show)
        if ok:
            ok = run_steps(inference_steps(settings), show)
    table = Table(title="gangway demo", header_style="bold")
    for col in ("step", "status", "seconds", "outputs"):
        table.add_column(col)
    for s in done:
        colour = "green" if s.status == "succeeded" else "red"
        table.add_row(s.name, f"[{colour}]{s.status}[/]", f"{s.seconds:.1f}", _key_outputs(s))
    console.print(table)
    root = state_dir.resolve()
    if not ok:
        failed = done[-1]
        console.print(
            f"[red]step {failed.name} failed (exit {failed.returncode}); see {failed.log}[/]"
        )
        raise typer.Exit(failed.returncode or 1)
    console.print(
        f"checkpoints: file://{root}/checkpoints\nmetrics:     "
        f"file://{root}/eval/metrics.json\npredictions: file://{root}/predictions\n"
        f"logs:        {root}/logs"
    )
