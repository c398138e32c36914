"""What a batch is to do: its recipe, catalog, runs, and — on a resume — what is already done."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.batch.inputs import load_rows
from toolrun.batch.jobs import Job, plan_jobs
from toolrun.batch.results_file import read_results
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.core.errors import Problem, UserError
from toolrun.providers import split_model
from toolrun.sessions.play import check_script
from toolrun.sessions.recipe import Recipe, load_recipe
from toolrun.sessions.run_options import RunOptions

# runs at a time when --concurrency is not given: what a provider's usual limits allow
DEFAULT_CONCURRENCY = {"scripted": 8, "ollama": 2}
DEFAULT_PROVIDER_CONCURRENCY = 4


@dataclass
class BatchSpec:
    """A batch as asked for: ``toolrun batch``'s options."""

    recipe: Path
    inputs: Path
    out: Path
    models: list[str] = field(default_factory=list)  # empty: the recipe's model
    repeat: int = 1
    concurrency: int | None = None  # None: sized for the provider (DEFAULT_CONCURRENCY)
    resume: bool = False
    retry_failed: bool = True
    tools_dir: Path | None = None
    options: RunOptions = field(default_factory=RunOptions)  # what every run shares; each row sets vars and model


@dataclass
class BatchPlan:
    """The batch to run: every run it holds (``jobs``), those still to make (``todo``) and the lines kept."""

    spec: BatchSpec
    batch_id: str
    recipe: Recipe
    catalog: Catalog
    jobs: list[Job]
    todo: list[Job]
    kept: list[dict[str, Any]]
    concurrency: int
    foreign: list[dict[str, Any]] = field(default_factory=list)  # lines of rows no longer in the inputs: left as they are

    @property
    def total(self) -> int:
        return len(self.jobs)


def plan_batch(spec: BatchSpec) -> BatchPlan:
    """Load and check everything before the first run: recipe, catalog, rows, models and the results file."""
    if spec.repeat < 1:
        raise UserError(Problem(None, None, f"--repeat {spec.repeat}: a batch runs each row at least once", "use --repeat 1 or more"))
    recipe = load_recipe(spec.recipe)
    rows = load_rows(spec.inputs, recipe)
    models = list(dict.fromkeys(spec.models)) or [recipe.model_spec()]
    for model in models:
        split_model(model)  # a malformed model is bad input now, not a failure of every row
        check_script(recipe, model if spec.models else None)  # so is a missing or broken scripted:FILE
    catalog = load_checked_catalog(recipe.locate_tools_dir(spec.tools_dir), wanted=recipe.tool_test)
    jobs = plan_jobs([fields for _, fields in rows], models, spec.repeat, recipe_model=not spec.models)
    kept, foreign, batch_id = _resume_point(spec, {job.key: job.row for job in jobs})
    done = {line["key"] for line in kept}
    todo = [job for job in jobs if job.key not in done]
    concurrency = spec.concurrency or min(
        DEFAULT_CONCURRENCY.get(split_model(model)[0], DEFAULT_PROVIDER_CONCURRENCY) for model in models)
    return BatchPlan(spec, batch_id, recipe, catalog, jobs, todo, kept, max(1, concurrency), foreign)


def _resume_point(spec: BatchSpec, keys: dict[str, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The result lines a resume keeps (this batch's, and others), and the batch id to go on with.

    ``keys``: the row index in today's inputs of each run's key; a kept line takes it (rows may have moved).
    """
    if not spec.resume:
        if spec.out.exists() and spec.out.stat().st_size > 0:
            raise UserError(Problem(spec.out, None, "the results file already holds results",
                                    "add --resume to finish that batch, or choose another --out"))
        return [], [], new_batch_id()
    kept: dict[str, dict[str, Any]] = {}
    foreign: list[dict[str, Any]] = []
    for line in read_results(spec.out):
        if line["key"] not in keys:
            foreign.append(line)  # a row no longer in the inputs, or another model: kept, not counted
            continue
        if line.get("status") == "failed" and spec.retry_failed:
            continue
        kept.setdefault(line["key"], {**line, "row": keys[line["key"]]})  # exactly once, whatever an earlier resume left
    lines = list(kept.values())
    return lines, foreign, (lines[0]["batch"] if lines else new_batch_id())


def new_batch_id() -> str:
    """``batch-YYYYMMDD-HHMMSS-xxxx``: sorts by time, unique enough for one person's log."""
    return f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
