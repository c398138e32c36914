"""Real packages from the npm registry for the integration stage: fetched once with `npm pack`
and kept in a cache folder, so a second run needs no network."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path


def _cache_folder() -> Path:
    chosen = os.environ.get("TOOLRUN_TEST_PACKAGES")
    base = Path(chosen) if chosen else Path.home() / ".cache" / "toolrun-test-packages"
    base.mkdir(parents=True, exist_ok=True)
    return base


def npm_package(name: str, version: str) -> Path:
    """The unpacked `package/` folder of NAME@VERSION (e.g. ``@octokit/openapi``, ``23.0.2``)."""
    folder = _cache_folder() / f"{name.strip('@').replace('/', '-')}-{version}"
    unpacked = folder / "package"
    if unpacked.is_dir():
        return unpacked
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the integration stage needs npm (Debian package `npm`); .ci/run installs it")
    folder.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run([npm, "pack", f"{name}@{version}", "--silent"], cwd=folder, capture_output=True, text=True,
                            timeout=600, check=True)
    tarball = folder / packed.stdout.strip().splitlines()[-1]
    with tarfile.open(tarball) as archive:
        archive.extractall(folder, filter="data")
    tarball.unlink()
    return unpacked


def npm_install(name: str, version: str) -> Path:
    """The ``node_modules`` folder of NAME@VERSION installed with its dependencies (a package whose
    build imports others, e.g. ``@modelcontextprotocol/conformance``), kept in the cache folder."""
    folder = _cache_folder() / f"{name.strip('@').replace('/', '-')}-{version}-installed"
    modules = folder / "node_modules"
    if (modules / name / "package.json").is_file():
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the integration stage needs npm (Debian package `npm`); .ci/run installs it")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(folder), f"{name}@{version}", "--no-audit", "--no-fund",
                    "--silent"], capture_output=True, text=True, timeout=900, check=True)
    return modules
