"""An exception no part of toolrun meant to raise (a bug) is one line that says so, not a
traceback; ``--debug`` shows the traceback. A user's mistake keeps its own message and exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import toolrun.cli.tools_list
from toolrun.cli import main
from toolrun.core.secrets import Redactor, redacting


def planted_bug(*args: object, **kwargs: object) -> None:
    raise TypeError("'NoneType' object is not subscriptable")


def test_a_bug_is_one_line_that_asks_for_a_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(toolrun.cli.tools_list, "load_catalog_for_cli", planted_bug)
    outcome = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path)])
    assert outcome.exit_code == 1
    assert outcome.stderr == ("error: internal error (TypeError: 'NoneType' object is not subscriptable) — this is a bug "
                              "in toolrun; run the command again with --debug for the traceback and report it\n")
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit)


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(toolrun.cli.tools_list, "load_catalog_for_cli", planted_bug)
    outcome = CliRunner().invoke(main, ["--debug", "tools", "list", "--tools-dir", str(tmp_path)])
    assert isinstance(outcome.exception, TypeError)


def test_a_secret_in_the_bug_s_message_is_redacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def leaking(*args: object, **kwargs: object) -> None:
        raise KeyError("sk-live-0123456789abcdef")

    monkeypatch.setattr(toolrun.cli.tools_list, "load_catalog_for_cli", leaking)
    redactor = Redactor()
    redactor.add("sk-live-0123456789abcdef")
    with redacting(redactor):
        outcome = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path)])
    assert outcome.exit_code == 1 and "internal error (KeyError" in outcome.stderr
    assert "0123456789abcdef" not in outcome.stderr


def test_a_user_mistake_keeps_its_exit_code(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path / "missing")])
    assert outcome.exit_code == 2 and "internal error" not in outcome.stderr


def test_a_reader_that_closes_the_pipe_is_no_bug(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def closed_pipe(*args: object, **kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(toolrun.cli.tools_list, "load_catalog_for_cli", closed_pipe)
    outcome = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path)])
    assert "internal error" not in outcome.stderr
