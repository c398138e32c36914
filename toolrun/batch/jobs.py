"""One run of a batch: which row, model and repeat (``Job``), and playing it into a result line.

``play_job`` is the one code path of a batch run, locally and on a Ray worker alike: it
calls ``toolrun.sessions.play.run_recipe`` (``toolrun.arun``'s way in) and turns the ``RunResult`` into the line the results file holds.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from toolrun.catalog.model import Catalog
from toolrun.core.errors import UserError
from toolrun.loop.results import RunResult, usage_totals
from toolrun.loop.runner import RunObserver
from toolrun.providers.transport import Transport
from toolrun.sessions.play import run_recipe
from toolrun.sessions.recipe import Recipe
from toolrun.sessions.run_options import RunOptions


@dataclass(frozen=True)
class Job:
    """One run to make: row ``row`` (0-based, its fields ``vars``) with ``model``, repeat number ``repeat``."""

    row: int
    vars: dict[str, Any]
    model: str
    repeat: int
    twin: int = 0  # how many earlier rows of the inputs hold the same fields: identical rows stay distinct runs
    # the recipe's own model (no --model): played as a run without --model plays it (a scripted:FILE in the
    # recipe is relative to the recipe, not to where the batch runs)
    recipe_model: bool = False

    @property
    def key(self) -> str:
        """What identifies the run across a resume: the row's content (and which of identical rows), model, repeat."""
        twin = f"\0{self.twin}" if self.twin else ""  # the first of identical rows keeps the key it always had
        digest = hashlib.sha256(f"{row_content(self.vars)}\0{self.model}\0{self.repeat}{twin}".encode("utf-8", "surrogatepass")).hexdigest()
        return digest[:24]


def row_content(fields: dict[str, Any]) -> str:
    """A row's fields as one canonical string: the same fields in any order give the same string."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)


def plan_jobs(rows: list[dict[str, Any]], models: list[str], repeat: int, *, recipe_model: bool = False) -> list[Job]:
    """Every run of the batch: row × model × repeat, rows first so early results cover every model.
    ``recipe_model``: ``models`` is the recipe's own model, no ``--model`` was given."""
    seen: dict[str, int] = {}
    jobs: list[Job] = []
    for index, fields in enumerate(rows):
        content = row_content(fields)
        twin = seen.get(content, 0)
        seen[content] = twin + 1
        jobs.extend(Job(index, dict(fields), model, number, twin, recipe_model) for model in models for number in range(repeat))
    return jobs


async def play_job(job: Job, recipe: Recipe, catalog: Catalog, options: RunOptions, *, batch_id: str,
                   transport: Transport | None = None, observer: RunObserver | None = None,
                   clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """Run ``job`` with the batch's ``options`` and return its result line. Raises ``UserError`` only for
    input that fails every run alike."""
    started = clock()
    try:
        result = await run_recipe(recipe, replace(options, vars=job.vars, model=None if job.recipe_model else job.model,
                                                  catalog=catalog, observer=observer, transport=transport))
    except UserError:
        raise
    except Exception as exc:  # a run that crashed is a failed row, not a stopped batch
        return _line(job, batch_id, None, int((clock() - started) * 1000), error=f"{type(exc).__name__}: {exc}")
    return _line(job, batch_id, result, int((clock() - started) * 1000))


def _line(job: Job, batch_id: str, result: RunResult | None, duration_ms: int, *, error: str | None = None) -> dict[str, Any]:
    """The results file's line of one run (redacted with the run's own secrets)."""
    if result is None:
        return {"key": job.key, "batch": batch_id, "row": job.row, "vars": job.vars, "model": job.model,
                "repeat": job.repeat, "status": "failed", "final": None, "stop_reason": "error",
                "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}, "tool_calls": [],
                "expect": {"passed": False, "failures": []}, "error": error, "duration_ms": duration_ms,
                "mode": None, "divergences": [], "output": None}
    document = result.to_json()
    failures = list(document.get("expect_failures", []))
    status = "failed" if result.failed else ("expect_failed" if failures else "ok")
    return {
        "key": job.key, "batch": batch_id, "row": job.row, "vars": result.redact(job.vars), "model": job.model,
        "repeat": job.repeat, "status": status, "final": document["final"], "stop_reason": document["stop_reason"],
        "usage": usage_totals(result.usage),
        "tool_calls": [call for turn in document["turns"] for call in turn["tool_calls"]],
        "expect": {"passed": status == "ok", "failures": failures},
        "error": document.get("error"), "duration_ms": duration_ms,
        # A replayed run answers with the recording's words: say so, and where the row departed from it.
        "mode": document["mode"], "divergences": [d["message"] for d in document.get("divergences") or []],
        "output": document.get("output"),  # the fields a recipe with output: extracted from this row
    }
