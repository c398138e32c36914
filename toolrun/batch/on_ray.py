"""``toolrun batch --ray [ADDRESS]``: the same batch, its runs made by Ray actors.

Each worker is an async actor that loads the recipe and catalog once and plays jobs with
``play_job`` — the code path of a local batch — through one transport per provider. The
rate limiter of each provider is one actor all workers ask for slots. The driver keeps
``concurrency`` runs in flight and writes each line to the results file as it comes back,
so the results file and ``--resume`` work exactly as for a local batch.

The recipe, its tools directory and a ``scripted:FILE`` are read by the workers from the
same paths as the driver's (absolute, from the driver's working directory): on a cluster
they must be on a shared filesystem, and toolrun installed on every node. The variables a
run reads — the providers' ``*_API_KEY``/``*_BASE_URL``, every ``${env:NAME}`` of the recipe
and its tool files, ``TOOLRUN_*`` — go from the driver's environment to the workers with
the actors' arguments; the rest of a worker's environment is the node's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolrun.batch.jobs import Job, play_job
from toolrun.batch.plan import BatchPlan
from toolrun.batch.rate_limit import RateLimiter, provider_pause
from toolrun.batch.run import ProviderTransports
from toolrun.catalog.gate import load_checked_catalog
from toolrun.core.errors import Problem, ToolrunError, UserError
from toolrun.providers import SCRIPTED_PROVIDER, get_provider_class, split_model
from toolrun.sessions.recipe import load_recipe
from toolrun.sessions.run_options import RunOptions

_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")

INSTALL_HINT = "pip install 'toolrun[ray]'"


def import_ray() -> Any:
    """The ``ray`` module; a ``UserError`` saying how to install it when it is missing."""
    try:
        import ray
    except ImportError:
        raise UserError(Problem(None, None, "--ray needs Ray, which is not installed", INSTALL_HINT)) from None
    return ray


class RemoteGate:
    """A ``RequestGate`` backed by a rate limiter actor shared by every worker."""

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter

    async def wait(self) -> None:
        delay = await self.limiter.reserve.remote()
        if delay > 0:
            await asyncio.sleep(delay)

    def observe(self, status: int, headers: Any) -> None:
        pause = provider_pause(status, headers)
        if pause > 0:  # only a pause is worth a message to the actor
            self.limiter.pause.remote(pause)


class BatchWorker:
    """One Ray actor: the recipe and catalog loaded once, jobs played concurrently on its event loop."""

    def __init__(self, recipe: str, tools_dir: str | None, options: RunOptions, batch_id: str, cwd: str,
                 concurrency: int, limiters: dict[str, Any]) -> None:
        os.chdir(cwd)  # relative paths (a scripted:FILE) mean what they mean to the driver
        self.recipe = load_recipe(Path(recipe))
        self.catalog = load_checked_catalog(self.recipe.locate_tools_dir(Path(tools_dir) if tools_dir else None),
                                            wanted=self.recipe.tool_test)
        options = dataclasses.replace(options, environ={**os.environ, **(options.environ or {})})
        self.options, self.batch_id, self.concurrency, self.limiters = options, batch_id, concurrency, limiters
        self.transports: Any = None  # made on the actor's event loop, at the first job

    async def run(self, job: Job) -> dict[str, Any]:
        if self.transports is None:
            self.transports = ProviderTransports(self.recipe, self.concurrency,
                                                 make_gate=lambda provider: RemoteGate(self.limiters[provider]))
        return await play_job(job, self.recipe, self.catalog, self.options, batch_id=self.batch_id,
                              transport=self.transports.for_model(job.model))

    async def close(self) -> None:
        if self.transports is not None:
            await self.transports.aclose()


async def run_on_ray(plan: BatchPlan, finished: Callable[[dict[str, Any]], None], *, address: str | None = None) -> None:
    """Every run of ``plan.todo`` on Ray (``address`` None: the running or a new local cluster)."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    actors: list[Any] = []
    try:
        if not plan.todo:
            return
        limiter_actor = ray.remote(num_cpus=0)(RateLimiter)
        providers = {split_model(job.model)[0] for job in plan.todo}
        limiters = {provider: limiter_actor.remote(plan.recipe.rate_limit) for provider in providers}
        actors.extend(limiters.values())
        count = max(1, min(plan.concurrency, len(plan.todo), int(ray.available_resources().get("CPU", 1)) or 1))
        per_worker = math.ceil(plan.concurrency / count)
        worker_actor = ray.remote(num_cpus=1, max_concurrency=per_worker)(BatchWorker)
        spec = plan.spec
        options = dataclasses.replace(spec.options, environ=forwarded_environ(plan))
        workers = [worker_actor.remote(str(spec.recipe.resolve()), str(spec.tools_dir.resolve()) if spec.tools_dir else None,
                                       options, plan.batch_id, os.getcwd(), per_worker,
                                       limiters) for _ in range(count)]
        actors.extend(workers)
        await _drive(plan, workers, finished)
        await asyncio.gather(*(asyncio.wrap_future(worker.close.remote().future()) for worker in workers))
    finally:
        for actor in actors:
            ray.kill(actor)
        if started_here:
            ray.shutdown()


def forwarded_environ(plan: BatchPlan, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's variables a run of this batch reads: provider credentials and endpoints,
    the recipe's and tool files' ``${env:NAME}``, and ``TOOLRUN_*``."""
    environ = dict(os.environ) if environ is None else environ
    names = {name for name in environ if name.startswith("TOOLRUN_")}
    for provider in {split_model(job.model)[0] for job in plan.jobs} - {SCRIPTED_PROVIDER}:
        provider_class = get_provider_class(provider)
        names.update(provider_class.api_key_env, provider_class.base_url_env)
    if plan.recipe.provider.api_key_env:
        names.add(plan.recipe.provider.api_key_env)
    tools_dir = plan.recipe.locate_tools_dir(plan.spec.tools_dir)
    for path in [plan.recipe.path, *sorted(tools_dir.rglob("*.y*ml"))]:
        try:
            names.update(_ENV_REFERENCE.findall(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue  # the catalog loaded: an unreadable file here is not one of its
    return {name: environ[name] for name in sorted(names) if name in environ}


async def _drive(plan: BatchPlan, workers: list[Any], finished: Callable[[dict[str, Any]], None]) -> None:
    """Keep ``plan.concurrency`` jobs in flight, spread over the workers; hand each line on as it returns."""
    pending = list(reversed(plan.todo))
    in_flight: dict[asyncio.Future[Any], Job] = {}
    turn = 0

    def submit() -> None:
        nonlocal turn
        while pending and len(in_flight) < plan.concurrency:
            job = pending.pop()
            in_flight[asyncio.wrap_future(workers[turn % len(workers)].run.remote(job).future())] = job
            turn += 1

    submit()
    while in_flight:
        done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            in_flight.pop(future)
            try:
                line = future.result()
            except Exception as exc:
                for other in in_flight:
                    other.cancel()
                raise _cause(exc) from None
            finished(line)
        submit()


def _cause(exc: Exception) -> Exception:
    """A worker's ``UserError`` as the driver's own (Ray wraps it), else the error as it is."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ToolrunError) or isinstance(cause, ToolrunError):
        return cause if isinstance(cause, ToolrunError) else exc
    return exc
