"""``toolrun batch`` throughput: rows/s for N scripted rows locally (and on a local Ray cluster
when Ray is installed), and the per-row overhead against one ``toolrun.arun`` call.

Every row is a real run: the recipe, a scripted model (one tool call, then the answer) and
the real python flower tool; the results file is written line by line, no run log.

    PYTHONPATH=. python benchmarks/batch.py [--rows 1000] [--concurrency 8] [--no-ray]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.batch_world import make_world, write_rows  # noqa: E402
from toolrun.batch import BatchSpec, run_batch  # noqa: E402
from toolrun.catalog.gate import load_checked_catalog  # noqa: E402
from toolrun.sessions.play import arun  # noqa: E402
from toolrun.sessions.recipe import load_recipe  # noqa: E402


def single_arun_ms(folder: Path, script: str, *, preloaded: bool, count: int = 100) -> float:
    """Median milliseconds of one ``toolrun.arun`` of the recipe, in a running event loop.

    ``preloaded``: the recipe and catalog are loaded once, as a batch does; else each call loads them.
    """
    recipe = load_recipe(folder / "shop.yaml")
    catalog = load_checked_catalog(recipe.locate_tools_dir())

    async def measure() -> list[float]:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            if preloaded:
                await arun(recipe, vars={"city": "上海", "tag": "x"}, model=script, catalog=catalog)
            else:
                await arun(folder / "shop.yaml", vars={"city": "上海", "tag": "x"}, model=script)
            times.append((time.perf_counter() - started) * 1000)
        return times

    return statistics.median(asyncio.run(measure()))


def batch_seconds(folder: Path, script: str, rows: int, concurrency: int, *, use_ray: bool = False) -> float:
    out = folder / f"out-{concurrency}-{'ray' if use_ray else 'local'}.jsonl"
    out.unlink(missing_ok=True)
    spec = BatchSpec(recipe=folder / "shop.yaml", inputs=folder / "rows.jsonl", out=out, models=[script],
                     concurrency=concurrency)
    started = time.perf_counter()
    summary = asyncio.run(run_batch(spec, use_ray=use_ray))
    elapsed = time.perf_counter() - started
    assert summary.runs == rows and summary.failed == 0, summary.to_json()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        make_world(folder)
        write_rows(folder / "rows.jsonl", options.rows)
        script = f"scripted:{folder / 'script.yaml'}"
        cold = single_arun_ms(folder, script, preloaded=False)
        one = single_arun_ms(folder, script, preloaded=True)
        print(f"one toolrun.arun, 1 tool call: {cold:.2f} ms median loading recipe + catalog, "
              f"{one:.2f} ms with them loaded (as a batch row)")
        for concurrency in (1, options.concurrency):
            seconds = batch_seconds(folder, script, options.rows, concurrency)
            per_row = seconds * 1000 / options.rows
            print(f"local, {options.rows} rows, concurrency {concurrency:>2}: {seconds:6.2f} s  "
                  f"{options.rows / seconds:7.1f} rows/s  {per_row:6.2f} ms/row  overhead vs one loaded arun: {per_row - one:+.2f} ms")
        if options.no_ray:
            return
        try:
            import ray
        except ImportError:
            print("ray: not installed (pip install 'toolrun[ray]'): skipped")
            return
        ray.init(include_dashboard=False, log_to_driver=False)
        try:
            cpus = int(ray.available_resources().get("CPU", 1))
            seconds = batch_seconds(folder, script, options.rows, options.concurrency, use_ray=True)
            print(f"ray (local cluster, {cpus} CPUs), {options.rows} rows, concurrency {options.concurrency}: "
                  f"{seconds:6.2f} s  {options.rows / seconds:7.1f} rows/s  (cluster start not counted)")
        finally:
            ray.shutdown()


if __name__ == "__main__":
    main()
