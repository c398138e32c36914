"""What MCP servers in the tools directory cost a command that does not use them.

Two copies of the repository's tools.d: as they are, and with three more ``mcp_server``
toolsets that list no ``tools:`` (copies of the ticket server, so their names are known only
to the server) and one whose command does not exist. ``toolrun call get_flower_inventory``
runs in each, interleaved round by round so a busy machine slows both alike; the goal is a
median within 0.3 s of the plain one. The catalog caches are warmed by one untimed
``tools list`` first (that one starts the three servers and keeps their tool lists). Then
``toolrun recipe recipes/inventory.yaml`` must run on the crowded copy (exit 0), and
``tools list`` of the repository's own tools.d, cold then warm, shows what the cached tool
list saves the ticket server.

    python benchmarks/mcp_isolation.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import ROOT, TOOLRUN, command_env  # noqa: E402  # the command line and environment run.py measures with

GOAL_SECONDS = 0.3
CALL = ["call", "get_flower_inventory", "--arg", "city=北京"]


def crowded_copy(work: Path) -> tuple[Path, Path]:
    """The plain copy of tools.d, and one with three unlisted MCP servers and a broken one."""
    plain, crowded = work / "plain" / "tools.d", work / "crowded" / "tools.d"
    for folder in (plain, crowded):
        shutil.copytree(ROOT / "tools.d", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for letter in "abc":
        shutil.copy(ROOT / "tools.d" / "ticket_server.py", crowded / f"server_{letter}.py")
        (crowded / f"server_{letter}.yaml").write_text(
            f"mcp_server:\n  command: [python, server_{letter}.py]\n  prefix: {letter}_\n  timeout: 60s\n", encoding="utf-8")
    (crowded / "broken.yaml").write_text("mcp_server:\n  command: [no-such-mcp-server]\n", encoding="utf-8")
    return plain, crowded


def seconds(args: list[str], env: dict[str, str], *, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([*TOOLRUN, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"toolrun {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-") as folder:
        work = Path(folder)
        plain, crowded = crowded_copy(work)
        cache = work / "cache"
        cache.mkdir()
        env = command_env(ROOT, cache)
        warm, _ = seconds(["tools", "list", "--tools-dir", str(crowded)], env, ok=(2,))  # exit 2: the broken file
        seconds(["tools", "list", "--tools-dir", str(plain)], env, ok=(0, 2))  # a server slow to start: still warm
        print(f"warming: tools list of the crowded copy (starts 3 servers, keeps their lists) {warm * 1000:.0f} ms")
        samples: dict[str, list[float]] = {"plain": [], "crowded": []}
        for _ in range(repeat):
            for label, directory in (("plain", plain), ("crowded", crowded)):
                samples[label].append(seconds([*CALL, "--tools-dir", str(directory)], env)[0])
        medians = {label: statistics.median(values) for label, values in samples.items()}
        for label, values in samples.items():
            print(f"toolrun call, {label:<8} median {medians[label] * 1000:7.1f} ms  "
                  f"(min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f}, n={len(values)})")
        difference = medians["crowded"] - medians["plain"]
        verdict = "within" if difference <= GOAL_SECONDS else "NOT within"
        print(f"difference {difference * 1000:+.1f} ms, ratio {medians['crowded'] / medians['plain']:.2f}: "
              f"{verdict} the {GOAL_SECONDS * 1000:.0f} ms goal")

        recipe, stderr = seconds(["recipe", "recipes/inventory.yaml", "--tools-dir", str(crowded), "--no-log"], env)
        # Its failure is remembered for 60 s: later, a recipe that needs none of its tools does not try it again.
        shown = "shown as a warning" if "broken.yaml" in stderr else "not tried (its failed start is older than 60 s)"
        print(f"toolrun recipe recipes/inventory.yaml on the crowded copy: exit 0 in {recipe * 1000:.0f} ms, "
              f"the broken server {shown}")

        own = work / "own-cache"
        own.mkdir()
        own_env = command_env(ROOT, own)
        cold, _ = seconds(["tools", "list", "--tools-dir", "tools.d"], own_env)
        warm_list = statistics.median(seconds(["tools", "list", "--tools-dir", "tools.d"], own_env)[0] for _ in range(5))
        print(f"tools list of the repository's tools.d: cold {cold * 1000:.0f} ms (starts the ticket server), "
              f"warm median {warm_list * 1000:.0f} ms (from the cached list; ratio {warm_list / cold:.2f})")


if __name__ == "__main__":
    main()
