"""The Phoenix server (PyPI ``arize-phoenix``) as a real OTLP receiver for the integration stage.

Phoenix pins its own web stack, so it gets its own virtual environment, made once in the test
packages' cache folder (``TOOLRUN_TEST_PACKAGES``, default ``~/.cache/toolrun-test-packages``)
and reused; ``python -m tests.integration.phoenix_server`` makes it ahead of time (``.ci/run``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.integration.npm_packages import _cache_folder

PHOENIX_VERSION = "20.26.1"
STARTUP_TIMEOUT_S = 600  # its database migrations take minutes on a loaded 2-core machine


@dataclass
class PhoenixServer:
    """A running Phoenix: OTLP over HTTP at ``url``/v1/traces, its REST API at ``url``/v1/..."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path  # its own output: what it said about spans it refused

    def said(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]


def phoenix_command() -> Path:
    """The ``phoenix`` command of the cached virtual environment, installed on first use."""
    venv = _cache_folder() / f"arize-phoenix-{PHOENIX_VERSION}" / "venv"
    command = venv / "bin" / "phoenix"
    if command.is_file():
        return command
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"arize-phoenix=={PHOENIX_VERSION}"],
                   check=True, timeout=1800)
    return command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def phoenix_server() -> Iterator[PhoenixServer]:
    """Start ``phoenix serve`` on free loopback ports with a fresh database; stop it at exit."""
    command = phoenix_command()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="phoenix-") as work:
        env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port()),
               "PHOENIX_WORKING_DIR": work, "PHOENIX_TELEMETRY_ENABLED": "false",
               "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
        log = open(Path(work) / "serve.log", "wb")  # noqa: SIM115  # closed below, after the process
        process = subprocess.Popen([str(command), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_until_up(url, process, Path(work) / "serve.log")
            yield PhoenixServer(url, process, Path(work) / "serve.log")
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"phoenix serve exited {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise RuntimeError(f"phoenix serve did not answer within {STARTUP_TIMEOUT_S}s:\n{log.read_text(errors='replace')[-3000:]}")


if __name__ == "__main__":
    print(phoenix_command())
