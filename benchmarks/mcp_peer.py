"""``toolrun mcp`` over stdio beside FastMCP serving the same tool, driven by the same official SDK client.

Both servers serve ``get_flower_inventory(city)`` from the same Python function: toolrun
from a one-tool tools directory (a python backend), FastMCP (the standalone ``fastmcp``
package) from a script. FastMCP runs in its own virtual environment under the benchmark
cache folder (``~/.cache/toolrun-bench/fastmcp-venv``, made with ``pip install fastmcp`` on
first need), so its MCP SDK pin never touches ours. Rounds are interleaved; each times
``--calls`` sequential ``tools/call`` after 20 warm-up calls.

    python benchmarks/mcp_peer.py [--calls 500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolrun-bench"
VENV = CACHE / "fastmcp-venv"
CITIES = {"北京": "玫瑰: 100, 郁金香: 150", "上海": "百合: 80, 康乃馨: 120", "深圳": "向日葵: 200, 玉兰: 90"}

FLOWERS_PY = f"""
STOCK = {CITIES!r}


def get_flower_inventory(city: str) -> str:
    return STOCK.get(city, "unknown city")
"""

FLOWERS_YAML = """\
name: get_flower_inventory
description: Returns the flower stock of one city's shop. Use it when asked what a shop has; not for prices.
parameters:
  type: object
  properties:
    city: {type: string, description: The city of the shop}
  required: [city]
backend: {python: "flowers.py:get_flower_inventory"}
"""

FASTMCP_SERVER = """
import sys
sys.path.insert(0, sys.argv[1])
from fastmcp import FastMCP
from flowers import get_flower_inventory

server = FastMCP("flowers")
server.tool(get_flower_inventory)
server.run(show_banner=False)
"""


def fastmcp_python() -> Path | None:
    """The Python of the FastMCP virtual environment, made on first need; None when it cannot be."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=False)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "fastmcp"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    probe = subprocess.run([str(python), "-c", "import fastmcp"], check=False, capture_output=True)
    return python if probe.returncode == 0 else None


def fastmcp_version(python: Path) -> str:
    done = subprocess.run([str(python), "-c", "import fastmcp; print(fastmcp.__version__)"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def servers(folder: Path, toolrun_root: Path, peer_python: Path | None) -> dict[str, list[str]]:
    """The argv of each server, its tool's files written in ``folder``."""
    (folder / "flowers.py").write_text(FLOWERS_PY, encoding="utf-8")
    (folder / "flowers.yaml").write_text(FLOWERS_YAML, encoding="utf-8")
    found = {"toolrun mcp": [sys.executable, "-c", "import sys; sys.argv[0] = 'toolrun'; from toolrun.cli import main; main()",
                             "mcp", "--tools-dir", str(folder)]}
    if peer_python is not None:
        (folder / "fastmcp_server.py").write_text(FASTMCP_SERVER, encoding="utf-8")
        found["FastMCP"] = [str(peer_python), str(folder / "fastmcp_server.py"), str(folder)]
    return found


async def seconds_per_call(argv: list[str], env: dict[str, str], cwd: Path, calls: int) -> float:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
    async with Client(server, mode="legacy") as client:
        cities = list(CITIES)

        async def call(index: int) -> None:
            city = cities[index % 3]
            result = await client.call_tool("get_flower_inventory", {"city": city})
            if result.is_error or result.content[0].text != CITIES[city]:
                raise AssertionError(f"call {index}: wrong answer {result}")

        for index in range(20):
            await call(index)
        started = time.perf_counter()
        for index in range(calls):
            await call(index)
        return (time.perf_counter() - started) / calls


def samples(repeat: int, calls: int, toolrun_root: Path, work: Path, env: dict[str, str]) -> dict[str, list[float]]:
    """Seconds per call of each server, one sample per interleaved round."""
    folder = work / "mcp-peer"
    folder.mkdir(exist_ok=True)
    argv_of = servers(folder, toolrun_root, fastmcp_python())
    found: dict[str, list[float]] = {name: [] for name in argv_of}
    for _ in range(repeat):
        for name, argv in argv_of.items():
            found[name].append(anyio.run(seconds_per_call, argv, env, toolrun_root, calls))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as temporary:
        env["TOOLRUN_CACHE_DIR"] = str(Path(temporary) / "cache")
        env["TOOLRUN_LOGS"] = str(Path(temporary) / "logs.db")
        found = samples(options.repeat, options.calls, ROOT, Path(temporary), env)
    for name, values in found.items():
        median = statistics.median(values)
        print(f"{name:12} {1 / median:7,.0f} calls/s  ({median * 1e3:.2f} ms/call, median of {len(values)} rounds)")
    if len(found) == 2:
        print(f"toolrun / FastMCP: x{statistics.median(found['FastMCP']) / statistics.median(found['toolrun mcp']):.2f}")


if __name__ == "__main__":
    main()
