"""``toolrun batch RECIPE --inputs FILE``: one recipe over every row of a dataset.

The batch itself is ``toolrun.batch.run_batch``; this module parses the options, draws the
progress (a bar on a terminal, a line every few seconds otherwise), prints the summary
and turns it into the exit code.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

import click

from toolrun.batch import BatchObserver, BatchPlan, BatchSpec, BatchSummary, run_batch, summarize
from toolrun.cli.recipe_options import (
    assume_yes_option,
    json_option,
    live_option,
    max_turns_option,
    replay_option,
    run_log_options,
    tools_dir_option,
)
from toolrun.cli.run_log_options import open_run_log
from toolrun.core.errors import EXIT_EXPECT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED
from toolrun.core.event_loop import run_until_done
from toolrun.core.text import counted
from toolrun.loop.approval import approve_all
from toolrun.loop.results import dumps
from toolrun.sessions.run_options import RunOptions

PLAIN_PROGRESS_EVERY_S = 5.0  # without a terminal: one progress line this often


@click.command("batch")
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--inputs", "inputs", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="the rows: JSON Lines, CSV or a YAML list; each row's fields are the recipe's vars")
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False),
              help="results as JSON Lines, one line per run (default: the recipe's file name, as FILE.results.jsonl here)")
@click.option("--concurrency", type=click.IntRange(min=1), help="runs at a time (default: sized for the provider)")
@click.option("--model", "models", multiple=True, metavar="P:M",
              help="provider:model (repeatable: every row runs with each); scripted:FILE plays a script offline")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="runs of each row with each model")
@click.option("--resume", is_flag=True, help="skip the runs --out already holds (failed ones are run again)")
@click.option("--no-retry-failed", "no_retry_failed", is_flag=True, help="with --resume: keep failed runs as they are")
@click.option("--min-pass-rate", type=click.FloatRange(0, 1), help="exit 3 when fewer runs pass their expect checks (0..1)")
@click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="run on Ray: a cluster's address, or none for a local cluster (pip install 'toolrun[ray]')")
@tools_dir_option("the recipe's tools_dir")
@replay_option
@live_option
@max_turns_option("most model requests in each run")
@assume_yes_option("approve every call of a tool that asks for confirmation (without it, such calls are refused)")
@json_option("print the summary as one JSON document on stdout")
@run_log_options
def batch_command(recipe_path: Path, inputs: Path, out: Path | None, concurrency: int | None, models: tuple[str, ...],
                  repeat: int, resume: bool, no_retry_failed: bool, min_pass_rate: float | None,
                  ray_address: str | None, tools_dir: Path | None, replay: Path | None, live: bool,
                  max_turns: int | None, assume_yes: bool, as_json: bool, logs: Path | None, no_log: bool) -> None:
    """Run RECIPE once per row of --inputs (× each --model × --repeat), and summarise the pass rate.

    \b
    Exit codes: 0 every run ran (whatever the pass rate); 1 runs failed;
    2 bad input; 3 the pass rate is below --min-pass-rate.
    """
    spec = BatchSpec(
        recipe=recipe_path, inputs=inputs, out=out or Path(f"{recipe_path.stem}.results.jsonl"), models=list(models),
        repeat=repeat, concurrency=concurrency, resume=resume, retry_failed=not no_retry_failed, tools_dir=tools_dir,
        options=RunOptions(mode="replay" if replay is not None else ("live" if live else "auto"),
                           replay=str(replay) if replay is not None else None, max_turns=max_turns,
                           approver=approve_all if assume_yes else None))
    progress = Progress(sys.stderr)
    run_log = open_run_log(logs, no_log)
    try:
        summary = run_until_done(run_batch(spec, observer=progress, run_log=run_log,
                                        use_ray=ray_address is not None, ray_address=ray_address or None))
    except KeyboardInterrupt:
        progress.finish()
        click.echo(f"interrupted: the finished runs are in {spec.out}; --resume goes on from there", err=True)
        so_far = progress.summary_so_far()
        if as_json and so_far is not None:  # a script reading stdout learns what finished, and that it stopped
            click.echo(dumps({**so_far.to_json(), "out": str(spec.out), "interrupted": True}))
        sys.exit(EXIT_INTERRUPTED)
    finally:
        if run_log is not None:
            run_log.close()
    progress.finish()
    for line in summary_lines(summary, spec.out):
        click.echo(line, err=True)
    if as_json:
        click.echo(dumps({**summary.to_json(), "out": str(spec.out)}))
    sys.exit(exit_code(summary, min_pass_rate))


def exit_code(summary: BatchSummary, min_pass_rate: float | None) -> int:
    """1 when runs failed, else 3 when the pass rate is below ``min_pass_rate``, else 0."""
    if summary.failed:
        return EXIT_RUN_FAILED
    if min_pass_rate is not None and summary.pass_rate < min_pass_rate:
        return EXIT_EXPECT_FAILED
    return EXIT_OK


def summary_lines(summary: BatchSummary, out: Path) -> list[str]:
    """The summary a person reads: one block per model."""
    lines = [f"batch {summary.batch_id}: {counted(summary.runs, 'run')} of {summary.total}, "
             f"{summary.failed} failed — results in {out}"]
    for model in summary.models:
        low, high = model.pass_rate_ci
        lines.append(f"  {model.model}: {model.passed}/{model.runs} passed ({model.pass_rate:.0%}, 95% CI {low:.0%}–{high:.0%}), "
                     f"{model.failed} failed; tool errors {model.tool_errors}/{model.tool_calls}; "
                     f"tokens {model.input_tokens} in / {model.output_tokens} out; "
                     f"latency p50 {model.latency_p50_ms} ms, p95 {model.latency_p95_ms} ms")
        if model.replayed:  # their answers are the recording's, whatever the row asked
            lines.append(f"  {model.model}: {model.replayed} of {counted(model.runs, 'run')} replayed a recording "
                         f"(no live model), {model.diverged} departed from it (the divergences are in {out})")
    return lines


class Progress(BatchObserver):
    """done/total, failures, tokens and ETA: a bar redrawn in place on a terminal, a line every few seconds otherwise."""

    def __init__(self, stream: TextIO, *, clock: Any = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.tty = stream.isatty()
        self.total = self.failures = self.tokens = self.ran = 0
        self.started = self.last_line = 0.0
        self.to_run = 0
        self.plan: BatchPlan | None = None
        self.finished: list[dict[str, Any]] = []  # the results file's lines of the batch so far

    def on_batch_start(self, plan: BatchPlan) -> None:
        self.plan, self.finished = plan, list(plan.kept)
        self.total, self.to_run = plan.total, len(plan.todo)
        self.started = self.last_line = self.clock()
        where = f", {len(plan.kept)} already done" if plan.kept else ""
        self._write(f"batch {plan.batch_id}: {counted(plan.total, 'run')}{where}, {plan.concurrency} at a time\n")

    def on_result(self, line: dict[str, Any]) -> None:
        self.finished.append(line)
        self.ran += 1
        self.failures += line["status"] == "failed"
        usage = line.get("usage") or {}
        self.tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        now = self.clock()
        if self.tty:
            self._write("\r" + self.status(now) + "\x1b[K")
        elif now - self.last_line >= PLAIN_PROGRESS_EVERY_S:
            self.last_line = now
            self._write(self.status(now) + "\n")

    @property
    def done(self) -> int:
        """Runs of the batch finished: earlier invocations' and this one's."""
        return len(self.finished)

    def summary_so_far(self) -> BatchSummary | None:
        """The summary of the runs finished so far (those of earlier invocations too); None before the plan."""
        if self.plan is None:
            return None
        return summarize(self.finished, batch_id=self.plan.batch_id, total=self.plan.total)

    def status(self, now: float) -> str:
        elapsed = now - self.started
        left = self.to_run - self.ran
        eta = f"{elapsed / self.ran * left:.0f}s" if self.ran else "?"
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        return f"[{bar}] {self.done}/{self.total}  failures {self.failures}  tokens {self.tokens}  ETA {eta}"

    def finish(self) -> None:
        if self.tty and self.ran:
            self._write("\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
