"""Real packages from the npm registry for the integration stage: fetched once with `npm pack`
and kept in a cache folder, so a second run needs no network."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path


def _cache_folder() -> Path:
    chosen = os.environ.get("TOOLRUN_TEST_PACKAGES")
    base = Path(chosen) if chosen else Path.home() / ".cache" / "toolrun-test-packages"
    base.mkdir(parents=True, exist_ok=True)
    return base


NODE_22 = "22.23.3"  # the conformance suite's build needs fs.globSync; oidc-provider supports 22 LTS, not Debian's 20
INSTALLED_MARK = "installed-by-toolrun-tests"


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the integration stage needs npm (Debian package `npm`); .ci/run installs it")
    return npm


def _cached(folder: Path, fill: Callable[[Path], object]) -> Path:
    """FOLDER of the cache, made once by FILL in a folder of its own, which takes the final name only
    once FILL has finished and the mark is written: a fill stopped half-way (a killed run, a full disk)
    is never taken for a whole one. Workers wanting the same folder take turns by a lock file: the
    second waits, then finds the mark."""
    if (folder / INSTALLED_MARK).is_file():
        return folder
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (folder / INSTALLED_MARK).is_file():
            return folder
        for leftover in folder.parent.glob(f".{folder.name}-????????"):  # the staging folders of a killed run
            shutil.rmtree(leftover, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)  # no mark: stopped half-way, or made before there was a mark
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            fill(staging)
            (staging / INSTALLED_MARK).write_text(f"{folder.name}\n", encoding="utf-8")
            staging.chmod(0o755)  # mkdtemp makes it 0700
            staging.rename(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def npm_package(name: str, version: str) -> Path:
    """The unpacked `package/` folder of NAME@VERSION (e.g. ``@octokit/openapi``, ``23.0.2``)."""
    def unpack(staging: Path) -> None:
        packed = subprocess.run([_npm(), "pack", f"{name}@{version}", "--silent"], cwd=staging, capture_output=True,
                                text=True, timeout=600, check=True)
        tarball = staging / packed.stdout.strip().splitlines()[-1]
        with tarfile.open(tarball) as archive:
            archive.extractall(staging, filter="data")
        tarball.unlink()

    return _cached(_cache_folder() / f"{name.strip('@').replace('/', '-')}-{version}", unpack) / "package"


def npm_install(name: str, version: str) -> Path:
    """The ``node_modules`` folder of NAME@VERSION installed with its dependencies (a package whose
    build imports others, e.g. ``@modelcontextprotocol/conformance``), kept in the cache folder."""
    def install(staging: Path) -> None:
        installed = subprocess.run([_npm(), "install", "--prefix", str(staging), f"{name}@{version}", "--no-audit",
                                    "--no-fund", "--silent"], capture_output=True, text=True, timeout=900)
        if installed.returncode != 0:
            raise RuntimeError(f"npm install {name}@{version} failed:\n{installed.stderr[-3000:]}")

    return _cached(_cache_folder() / f"{name.strip('@').replace('/', '-')}-{version}-installed", install) / "node_modules"


def node_22() -> Path:
    """A Node.js 22 LTS binary from the npm registry's ``node`` package (Debian ships 20)."""
    return npm_install("node", NODE_22) / "node" / "bin" / "node"
