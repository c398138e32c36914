"""Files holding run data are created 0600, in folders toolrun creates 0700 — with the
usual umask of 022 in effect, which alone would leave them readable by every local user.

A folder the user chose and already has, and a file the user made, keep their modes.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import INVENTORY, ROOT, TOOLRUN, clean_env, toolrun_in_process
from toolrun.batch.results_file import ResultsFile
from toolrun.core.private_files import replace_file
from toolrun.mcp.audit import AuditLog
from toolrun.replay.recording import Cassette, CassetteFile, save_cassette
from toolrun.runlog import RunLog
from toolrun.runlog.transcript_log import TranscriptLog


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # a child process started in a test inherits it too
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_writes_its_log_and_transcript_for_its_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data"  # XDG_DATA_HOME that does not exist yet: toolrun makes data/toolrun/
    chosen = tmp_path / "chosen"
    chosen.mkdir(mode=0o755)
    transcript = chosen / "run.jsonl"
    completed = toolrun_in_process("recipe", str(INVENTORY), "--transcript", str(transcript),
                        env=clean_env(XDG_DATA_HOME=str(data), TOOLRUN_LOGS=""))
    assert completed.returncode == 0, completed.stderr
    logs = data / "toolrun" / "logs.db"
    written = [logs, Path(f"{logs}-wal"), Path(f"{logs}-shm"), transcript]
    present = [path for path in written if path.exists()]  # SQLite removes -wal and -shm on a clean close
    assert logs in present and transcript in present
    assert {path.name: oct(mode(path)) for path in present} == {path.name: "0o600" for path in present}
    assert (oct(mode(data)), oct(mode(data / "toolrun"))) == ("0o700", "0o700")
    assert oct(mode(chosen)) == "0o755"  # the folder the user chose is left as it was


def test_the_run_log_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "new" / "deeper" / "logs.db")
    with log.transaction() as connection:  # a write: SQLite makes the -wal and -shm files
        connection.execute("PRAGMA user_version")
    for name in ("logs.db", "logs.db-wal", "logs.db-shm"):
        assert oct(mode(tmp_path / "new" / "deeper" / name)) == "0o600", name
    log.close()
    assert (oct(mode(tmp_path / "new")), oct(mode(tmp_path / "new" / "deeper"))) == ("0o700", "0o700")


def test_the_audit_log_transcript_cassette_and_batch_results_are_private(tmp_path: Path) -> None:
    audit = AuditLog.open(tmp_path / "audit.jsonl")
    audit.record(client="c", tool="t", arguments={"a": 1}, is_error=False, duration_ms=1)
    audit.close()
    transcript = TranscriptLog(tmp_path / "t.jsonl")
    transcript.open()
    save_cassette(Cassette(recipe="r"), tmp_path / "cassettes" / "one.json")
    CassetteFile(tmp_path / "two.json").save(Cassette(recipe="r"))
    ResultsFile(tmp_path / "results.jsonl").append({"key": "a"})
    ResultsFile(tmp_path / "resumed.jsonl", keep=[{"key": "a"}]).append({"key": "b"})
    for name in ("audit.jsonl", "t.jsonl", "cassettes/one.json", "two.json", "results.jsonl", "resumed.jsonl"):
        assert oct(mode(tmp_path / name)) == "0o600", name
    assert oct(mode(tmp_path / "cassettes")) == "0o700"


def test_a_file_the_user_made_keeps_its_mode(tmp_path: Path) -> None:
    names = ["audit.jsonl", "t.jsonl", "cassette.json", "results.jsonl", "resumed.jsonl", "logs.db"]
    for name in names:
        (tmp_path / name).touch()
        (tmp_path / name).chmod(0o640)
    AuditLog.open(tmp_path / "audit.jsonl").close()
    TranscriptLog(tmp_path / "t.jsonl").open()
    save_cassette(Cassette(recipe="r"), tmp_path / "cassette.json")  # replaced whole, mode kept
    ResultsFile(tmp_path / "results.jsonl").append({"key": "a"})
    ResultsFile(tmp_path / "resumed.jsonl", keep=[{"key": "a"}])  # rewritten for a resume, mode kept
    RunLog.open(tmp_path / "logs.db").close()
    assert {name: oct(mode(tmp_path / name)) for name in names} == {name: "0o640" for name in names}


def test_a_saved_chat_and_a_timeline_page_are_private(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 深圳}}]\n- text: 深圳有向日葵。\n",
                      encoding="utf-8")
    chat = [str(TOOLRUN), "chat", "--model", f"scripted:{script}", "--tools-dir", str(ROOT / "tools.d"),
            "--tools", "get_flower_*", "--no-log"]  # the flower tools only: no MCP server to start
    chatted = subprocess.run(chat, input="深圳呢?\n/save out\n", cwd=tmp_path, env=clean_env(), capture_output=True,
                             text=True, timeout=60)
    assert chatted.returncode == 0, chatted.stderr
    transcript = tmp_path / "run.jsonl"
    played = toolrun_in_process("recipe", "out.yaml", "--no-log", "--transcript", str(transcript), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    viewed = toolrun_in_process("view", str(transcript), "-o", str(tmp_path / "page.html"), cwd=tmp_path)
    assert viewed.returncode == 0, viewed.stderr
    for name in ("out.yaml", "out.script.yaml", "page.html"):
        assert oct(mode(tmp_path / name)) == "0o600", name


def test_replace_file_writes_whole_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    new, kept = tmp_path / "new.bin", tmp_path / "kept.bin"
    kept.write_bytes(b"before")
    kept.chmod(0o640)
    replace_file(new, b"one")
    replace_file(kept, b"two")
    assert (new.read_bytes(), oct(mode(new))) == (b"one", "0o600")
    assert (kept.read_bytes(), oct(mode(kept))) == (b"two", "0o640")
    (tmp_path / "a folder").mkdir()
    with pytest.raises(OSError):
        replace_file(tmp_path / "a folder", b"three")  # the rename fails: nothing is left beside it
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a folder", "kept.bin", "new.bin"]
