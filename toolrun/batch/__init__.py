"""``toolrun batch``: one recipe over a whole dataset — concurrent, rate-limited, resumable.

``run_batch(BatchSpec(...))`` plans the runs (row × model × repeat), skips those a
resumed results file already holds, runs the rest through ``toolrun.arun`` (locally, or
on Ray with ``use_ray=True``), writes one JSON line per finished run and returns the
per-model summary.
"""

from toolrun.batch.jobs import Job, play_job
from toolrun.batch.plan import BatchPlan, BatchSpec, plan_batch
from toolrun.batch.rate_limit import RateLimiter
from toolrun.batch.results_file import read_results
from toolrun.batch.run import BatchObserver, run_batch
from toolrun.batch.summary import BatchSummary, ModelSummary, summarize
from toolrun.sessions.run_options import RunOptions

__all__ = ["BatchObserver", "BatchPlan", "BatchSpec", "BatchSummary", "Job", "ModelSummary", "RateLimiter",
           "RunOptions", "play_job", "plan_batch", "read_results", "run_batch", "summarize"]
