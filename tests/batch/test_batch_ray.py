"""``toolrun batch --ray`` on a local Ray cluster: the same result lines as a local batch, and the
same resume. Ray is an optional extra (``pip install 'toolrun[ray]'``), not in the test extra."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch.test_batch import FAKE_KEY, batch, clean_env, openai_answer
from tests.batch_world import make_world, read_lines, write_rows
from tests.loopback import Recorded, Reply
from toolrun.runlog import RunLog

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolrun[ray]'); --ray is not tested")

TIMING_FIELDS = ("duration_ms", "batch")


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[None]:
    """One local Ray cluster for the module (starting one takes seconds); batches reuse it."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def comparable(lines: list[dict]) -> list[dict]:
    """Result lines without their timings and batch id, in key order."""
    def strip(line: dict) -> dict:
        line = {key: value for key, value in line.items() if key not in TIMING_FIELDS}
        line["tool_calls"] = [{k: v for k, v in call.items() if k != "duration_ms"} for call in line["tool_calls"]]
        return line
    return sorted((strip(line) for line in lines), key=lambda line: line["key"])


def test_ray_gives_the_lines_of_a_local_batch_and_resumes_the_same_way(tmp_path: Path, local_cluster: None):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 10)
    script = f"scripted:{tmp_path / 'script.yaml'}"
    local = batch(tmp_path, "--model", script, "--repeat", "2", "--no-log")
    assert local.exit_code == 0, local.stderr
    local_lines = read_lines(tmp_path / "out.jsonl")
    (tmp_path / "out.jsonl").rename(tmp_path / "local.jsonl")

    log = tmp_path / "logs.db"
    on_ray = batch(tmp_path, "--model", script, "--repeat", "2", "--logs", str(log), "--ray", "--json")
    assert on_ray.exit_code == 0, on_ray.stderr
    batch_id = json.loads(on_ray.stdout)["batch"]
    (logged,) = RunLog.open(log).list_batches()
    assert logged["batch"] == batch_id and logged["runs"] == 20 and logged["ok"] == 20
    ray_lines = read_lines(tmp_path / "out.jsonl")
    assert len(ray_lines) == 20 and comparable(ray_lines) == comparable(local_lines)
    assert json.loads(on_ray.stdout)["models"][0]["passed"] == 20

    # a crash after 7 lines, the 8th half written: --resume --ray runs the other 13 only
    out = tmp_path / "out.jsonl"
    data = out.read_bytes().split(b"\n")
    out.write_bytes(b"\n".join(data[:7]) + b"\n" + data[7][:20])
    resumed = batch(tmp_path, "--model", script, "--repeat", "2", "--no-log", "--ray", "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "7 already done" in resumed.stderr
    lines = read_lines(out)
    assert comparable(lines) == comparable(local_lines)  # every run exactly once
    assert [line["key"] for line in lines[:7]] == [line["key"] for line in ray_lines[:7]]


def test_ray_workers_share_one_rate_limit_through_429s(tmp_path: Path, local_cluster: None, loopback):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 6)
    served = {"requests": 0}
    lock = threading.Lock()

    def provider(request: Recorded) -> Reply:
        with lock:
            served["requests"] += 1
            refuse = served["requests"] % 5 == 0
        if refuse:
            return Reply(status=429, headers={"retry-after": "0.2"}, body={"error": {"message": "Rate limit reached"}})
        return Reply(body=openai_answer(request.json()))

    server = loopback(provider)
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    result = batch(tmp_path, "--live", "--no-log", "--ray", "--concurrency", "4", env=env)
    assert result.exit_code == 0, result.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert len(lines) == 6 and {line["status"] for line in lines} == {"ok"}
    assert served["requests"] > 12  # some were refused and retried
