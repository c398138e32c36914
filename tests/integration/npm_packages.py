"""Real packages from the npm registry for the integration stage: fetched once with `npm pack`
and kept in a cache folder, so a second run needs no network."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
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


NODE_22 = "22.23.3"  # the conformance suite's build needs fs.globSync; oidc-provider supports 22 LTS, not Debian's 20
INSTALLED_MARK = "installed-by-toolrun-tests"


def npm_install(name: str, version: str) -> Path:
    """The ``node_modules`` folder of NAME@VERSION installed with its dependencies (a package whose
    build imports others, e.g. ``@modelcontextprotocol/conformance``), kept in the cache folder.

    The install runs in a folder of its own, which takes the final name only once npm has finished:
    an install that was stopped half-way (a killed run, a full disk) is never taken for a whole one."""
    folder = _cache_folder() / f"{name.strip('@').replace('/', '-')}-{version}-installed"
    if (folder / INSTALLED_MARK).is_file():
        return folder / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the integration stage needs npm (Debian package `npm`); .ci/run installs it")
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        installed = subprocess.run([npm, "install", "--prefix", str(staging), f"{name}@{version}", "--no-audit",
                                    "--no-fund", "--silent"], capture_output=True, text=True, timeout=900)
        if installed.returncode != 0:
            raise RuntimeError(f"npm install {name}@{version} failed:\n{installed.stderr[-3000:]}")
        (staging / INSTALLED_MARK).write_text(f"{name}@{version}\n", encoding="utf-8")
        if folder.exists() and not (folder / INSTALLED_MARK).is_file():
            shutil.rmtree(folder)  # left by an install that stopped half-way (a finished one has the mark)
        try:
            staging.rename(folder)
        except OSError:  # another worker finished the same install first
            if not (folder / INSTALLED_MARK).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / "node_modules"


def node_22() -> Path:
    """A Node.js 22 LTS binary from the npm registry's ``node`` package (Debian ships 20)."""
    return npm_install("node", NODE_22) / "node" / "bin" / "node"
