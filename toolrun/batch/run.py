"""Run a batch: every planned run, ``concurrency`` at a time, each line written as it finishes.

Locally the runs share one event loop, one transport (connection pool) per provider and
one ``RateLimiter`` per provider; ``--ray`` hands the same plan to ``toolrun.batch.on_ray``.
Nothing here prints: progress goes to a ``BatchObserver``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from toolrun.batch.jobs import Job, play_job
from toolrun.batch.logged_lines import log_result_line
from toolrun.batch.plan import BatchPlan, BatchSpec, plan_batch
from toolrun.batch.rate_limit import MAX_PAUSE_S, RateLimiter
from toolrun.batch.results_file import ResultsFile
from toolrun.batch.summary import BatchSummary, summarize
from toolrun.core.tls import shared_ssl_context
from toolrun.core.tracing import run_span
from toolrun.providers import split_model
from toolrun.providers.transport import HttpxTransport, Transport
from toolrun.runlog import RunLog, RunLogWriter
from toolrun.sessions.recipe import Recipe

BATCH_MIN_RETRIES = 6  # a batch rides out a provider's rate limits: more retries than one run's default


class BatchObserver:
    """Sees a batch as it goes (the command line draws its progress bar from this). Every hook is optional."""

    def on_batch_start(self, plan: BatchPlan) -> None:
        """The plan is made: ``plan.total`` runs, ``len(plan.kept)`` already done, ``plan.todo`` to run."""

    def on_result(self, line: dict[str, Any]) -> None:
        """One run finished; ``line`` is what the results file now holds for it."""


class ProviderTransports:
    """One transport (one connection pool) and one rate limiter per provider, shared by a batch's runs."""

    def __init__(self, recipe: Recipe, concurrency: int, make_gate: Callable[[str], Any] | None = None) -> None:
        self.recipe = recipe
        self.concurrency = concurrency
        self.make_gate = make_gate or (lambda provider: RateLimiter(recipe.rate_limit))
        self._transports: dict[str, Transport] = {}

    def for_model(self, model: str) -> Transport | None:
        """The shared transport of ``model``'s provider (None for a scripted model: it has no network)."""
        provider = split_model(model)[0]
        if provider == "scripted":
            return None
        if provider not in self._transports:
            import httpx  # only a batch that reaches a provider needs it

            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.recipe.request_timeout, connect=15.0), verify=shared_ssl_context(),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
            # a refused request waits as long as the rate limiter pauses the others: up to MAX_PAUSE_S
            self._transports[provider] = HttpxTransport(
                max_retries=max(self.recipe.max_retries, BATCH_MIN_RETRIES), timeout=self.recipe.request_timeout,
                max_retry_wait=MAX_PAUSE_S, client=client, gate=self.make_gate(provider))
        return self._transports[provider]

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()
        self._transports.clear()


async def run_batch(spec: BatchSpec, *, observer: BatchObserver | None = None, run_log: RunLog | None = None,
                    ray_address: str | None = None, use_ray: bool = False) -> BatchSummary:
    """Plan and run a batch; returns its summary (every run of the batch, resumed ones included).

    ``run_log``: each run is written there, grouped under the batch id (``session``); on Ray
    the driver writes each finished run from its result line.
    ``use_ray``: run on Ray (``ray_address`` None: a local cluster). Raises ``UserError``
    for bad input, before any run or as soon as a run meets it.
    """
    plan = plan_batch(spec)
    if use_ray:
        from toolrun.batch.on_ray import import_ray  # Ray is an optional extra

        import_ray()  # a missing Ray is bad input: said before the results file is opened
    observer = observer or BatchObserver()
    observer.on_batch_start(plan)
    lines = list(plan.kept)
    results = ResultsFile(spec.out, keep=plan.foreign + plan.kept if spec.resume else None)

    log_problem: list[str] = []

    def finished(line: dict[str, Any]) -> None:
        results.append(line)
        lines.append(line)
        if use_ray and run_log is not None and not log_problem:  # a local run logged itself as it went
            problem = log_result_line(run_log, line, recipe=plan.recipe.name)
            if problem:
                log_problem.append(problem)
        observer.on_result(line)

    try:
        if use_ray:
            from toolrun.batch.on_ray import run_on_ray  # Ray is an optional extra

            await run_on_ray(plan, finished, address=ray_address)
        else:
            with run_span(plan.recipe.name, operation="invoke_workflow", attributes={"toolrun.batch.id": plan.batch_id}):
                await run_locally(plan, finished, run_log=run_log)  # each run's invoke_agent span nests in the batch's
    finally:
        results.close()
    return summarize(lines, batch_id=plan.batch_id, total=plan.total)


async def run_locally(plan: BatchPlan, finished: Callable[[dict[str, Any]], None], *,
                      run_log: RunLog | None = None) -> None:
    """Every run of ``plan.todo`` in this process, ``plan.concurrency`` at a time."""
    queue: asyncio.Queue[Job] = asyncio.Queue()
    for job in plan.todo:
        queue.put_nowait(job)
    transports = ProviderTransports(plan.recipe, plan.concurrency)

    async def worker() -> None:
        while not queue.empty():
            job = queue.get_nowait()
            writer = None if run_log is None else RunLogWriter(run_log, command="batch", session=plan.batch_id,
                                                               run_key=job.key, vars={**plan.recipe.vars, **job.vars})
            try:
                line = await play_job(job, plan.recipe, plan.catalog, plan.spec.options, batch_id=plan.batch_id,
                                      transport=transports.for_model(job.model), observer=writer)
            except BaseException:
                if writer is not None:
                    writer.interrupted()
                raise
            finished(line)

    tasks = [asyncio.create_task(worker()) for _ in range(min(plan.concurrency, len(plan.todo)))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)
        await transports.aclose()
