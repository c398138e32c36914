"""The repository speaks for itself: its Python examples run, and no text in it sends a reader
to a document it does not contain or to a tracker's issue number."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env
from tests.package_sources import SOURCES_GROUP, parsed_tree

# Written in pieces so that this file does not match itself.
OUTSIDE_REFERENCES = re.compile("|".join([  # the documents' names as the tracker spells them (docs/providers.md is ours)
    r"\b" + "DESIGN" + r"(\.md|\s*§)",
    r"\b" + "PROVIDERS" + r"\.md",
    r"\b" + "(?i:issues?)" + r"\s+#?\d+\b",
]))
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh", ""}
LEFT_OUT = ("tests/fixtures/",)  # others' files, copied unchanged


def _repository_texts() -> list[Path]:
    """Every text file of the checkout; hidden folders (.git, a .venv), caches and copied fixtures left out."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = sorted(name for name in subfolders if name == ".ci" or not name.startswith(".")
                               and name != "__pycache__" and not name.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder, name)
            if path.suffix in TEXT_SUFFIXES and not path.relative_to(ROOT).as_posix().startswith(LEFT_OUT):
                found.append(path)
    return found


def test_no_text_cites_a_document_the_repository_lacks_or_an_issue_number() -> None:
    texts = _repository_texts()
    assert any(p.name == "README.md" for p in texts) and any(p.parent.name == "docs" for p in texts)
    found = []
    for path in texts:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            match = OUTSIDE_REFERENCES.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]!r}")
    assert found == [], "say it in the repository's own words:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for() -> None:
    cited = ["see " + "DESIGN" + ".md", "DESIGN" + " §9", "PROVIDERS" + ".md lists them", "(" + "issue" + " 9)",
             "the table of " + "issue" + " 10", "fixes " + "issue" + " #12"]
    assert all(OUTSIDE_REFERENCES.search(text) for text in cited)
    assert not any(OUTSIDE_REFERENCES.search(text) for text in ["update the issue list", "providers.md", "design"])


def test_the_readmes_python_examples_run_as_written(tmp_path: Path, seed_tools_d_listings: Callable[[Path], Path]) -> None:
    """Every ```python block of README.md, in order, run from the repository root without an API key."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 2
    done = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=clean_env(TOOLRUN_CACHE_DIR=str(seed_tools_d_listings(tmp_path / "cache"))))
    assert done.returncode == 0, done.stderr[-3000:]


def _docstring_examples() -> list[tuple[str, str]]:
    """Each ``::`` block of a docstring in the package that is a program using ``toolrun`` (where, code)."""
    found = []
    for path in sorted((ROOT / "toolrun").rglob("*.py")):
        tree = parsed_tree(path)
        for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]:
            docstring = ast.get_docstring(node)
            for block in re.findall(r"::\n\n((?:(?:    .*)?\n)+)", (docstring or "") + "\n"):
                code = textwrap.dedent(block)
                if code.startswith("import toolrun"):
                    found.append((f"{path.relative_to(ROOT)} ({getattr(node, 'name', 'module')})", code))
    return found


@pytest.mark.xdist_group(SOURCES_GROUP)
def test_the_docstring_examples_of_the_public_api_run_as_written(tmp_path: Path,
                                                                 seed_tools_d_listings: Callable[[Path], Path]) -> None:
    examples = _docstring_examples()
    assert {where.split(" ")[0] for where, _ in examples} >= {"toolrun/__init__.py", "toolrun/providers/scripted.py"}
    # One interpreter runs them all, each as a script of its own (fresh globals, named by where it is).
    done = subprocess.run([sys.executable, "-c", EXAMPLES_RUNNER, json.dumps(examples)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env=clean_env(TOOLRUN_CACHE_DIR=str(seed_tools_d_listings(tmp_path / "cache"))))
    ran = [line.removeprefix(RAN) for line in done.stdout.splitlines() if line.startswith(RAN)]
    failed = examples[len(ran)] if done.returncode != 0 and len(ran) < len(examples) else ("", "")
    assert done.returncode == 0, f"{failed[0]}:\n{failed[1]}\n{done.stderr[-3000:]}"
    assert ran == [where for where, _ in examples]


RAN = "example ran: "
EXAMPLES_RUNNER = f"""
import json, sys
for where, code in json.loads(sys.argv[1]):
    exec(compile(code, where, "exec"), {{"__name__": "__main__"}})
    print({RAN!r} + where, flush=True)
"""
