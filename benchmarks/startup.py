"""Start-up of short commands, this checkout beside another: what a change to start-up code pays.

Each command runs as a fresh ``python`` process (the console script's two lines), for this
checkout and for ``--baseline DIR`` (another checkout, e.g. ``git archive COMMIT | tar -x -C DIR``),
interleaved round by round so a busy machine slows both alike. Each checkout has its own
cache folder, warmed by one untimed round. Two figures per command: wall time, and the CPU
time (user + system) of the process — on a loaded machine the CPU time is the steadier one.
"ratio" is this checkout's median over the baseline's: below 1 is faster.

    python benchmarks/startup.py [--repeat 25] [--baseline DIR] [--toolrun-root DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import ROOT, TOOLRUN, Row, command_env  # noqa: E402  # run.py's command line and environment, shared

COMMANDS: list[tuple[str, list[str]]] = [
    ("toolrun --version", ["--version"]),
    ("toolrun recipe recipes/inventory.yaml --no-log", ["recipe", "recipes/inventory.yaml", "--no-log"]),
    ("toolrun recipe recipes/inventory.yaml (with the log)", ["recipe", "recipes/inventory.yaml"]),
    ("toolrun call get_flower_inventory", ["call", "get_flower_inventory", "--arg", "city=北京", "--tools-dir", "tools.d"]),
    ("toolrun recipe --help", ["recipe", "--help"]),
]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` (which must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv[3:])} exited {done.returncode} in {cwd}:\n{done.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


Rows = dict[str, dict[str, tuple[Row, Row]]]  # checkout label -> command -> (wall, cpu)


def measure(roots: dict[str, Path], repeat: int, work: Path) -> Rows:
    """Rows by checkout label, then by command name; every command of every checkout once a round."""
    envs = {}
    for label, root in roots.items():
        cache = work / f"cache-{label}"
        cache.mkdir()
        envs[label] = command_env(root, cache)
    rows = {label: {name: (Row(name, "ms"), Row(f"{name} (cpu)", "ms")) for name, _ in COMMANDS} for label in roots}
    for round_number in range(repeat + 1):  # round 0 warms the caches and is not kept
        for name, args in COMMANDS:
            for label, root in roots.items():
                elapsed, cpu = timed([*TOOLRUN, *args], envs[label], root)
                if round_number:
                    rows[label][name][0].samples.append(elapsed)
                    rows[label][name][1].samples.append(cpu)
    return rows


def table(rows: Rows) -> str:
    labels = list(rows)
    lines = [f"{'command':<50} {'figure':<5}" + "".join(f"{label + ' median (min) ms':>28}" for label in labels)
             + ("  ratio" if len(labels) == 2 else "")]
    for name, _ in COMMANDS:
        for index, figure in enumerate(("wall", "cpu")):
            cells = [rows[label][name][index] for label in labels]
            text = "".join(f"{row.shown(row.median)} ({row.shown(min(row.samples))})".rjust(28) for row in cells)
            ratio = f"  {cells[0].median / cells[1].median:.2f}" if len(cells) == 2 else ""
            lines.append(f"{name if not index else '':<50} {figure:<5}{text}{ratio}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=25, help="timed rounds (median and min over them)")
    parser.add_argument("--toolrun-root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured beside it")
    parser.add_argument("--json", type=Path, help="also write every sample to this file")
    options = parser.parse_args()
    roots = {"this": options.toolrun_root.resolve()}
    if options.baseline is not None:
        roots["baseline"] = options.baseline.resolve()
    with tempfile.TemporaryDirectory(prefix="toolrun-startup-") as folder:
        rows = measure(roots, options.repeat, Path(folder))
    print(f"{options.repeat} rounds; this: {roots['this']}" + (f"; baseline: {roots['baseline']}" if len(roots) == 2 else ""))
    print(table(rows))
    if options.json is not None:
        document = {label: [row.to_json() for pair in by_name.values() for row in pair] for label, by_name in rows.items()}
        medians = {label: {row.name: statistics.median(row.samples) * 1000 for pair in by_name.values() for row in pair}
                   for label, by_name in rows.items()}
        options.json.write_text(json.dumps({"roots": {label: str(root) for label, root in roots.items()},
                                            "rows": document, "medians_ms": medians}, indent=2))


if __name__ == "__main__":
    main()
