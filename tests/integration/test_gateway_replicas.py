"""Three ``toolrun mcp --http`` replicas behind haproxy (``deploy/haproxy.cfg``), one killed mid-run.

200 clients (the official MCP SDK's, each its own session) make calls through the balancer
at once; a third of the way in, one replica is killed (SIGKILL: no drain, as a crashed
machine). What must hold: every call of a session on the two other replicas completes; a
session stays on the replica that opened it (haproxy's stick table on ``Mcp-Session-Id``);
the clients of the dead replica lose at most their call in flight, open a new session and
land on a live replica; no client waits forever. ``TOOLRUN_GATEWAY_CLIENTS`` sets the
number of clients (default 200).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.integration.gateway_cluster import gateway_cluster

CLIENTS = int(os.environ.get("TOOLRUN_GATEWAY_CLIENTS", "200"))
CALLS_PER_CLIENT = 6
CALL_MS = 100
CALL_LIMIT_SECONDS = 60  # far beyond any call here: a client past it waits for something that will not come
OPEN_ATTEMPTS = 5
RUN_LIMIT_SECONDS = 1800  # 200 clients and three replicas on 2 cores shared with other work: minutes


@dataclass
class CallRecord:
    client: int
    session: int  # the client's n-th session
    pid: int | None  # the replica that answered; None: the call failed
    error: str | None
    started: float
    ended: float


def mcp_client(url: str) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=CALL_LIMIT_SECONDS)), mode="legacy")


async def run_client(index: int, url: str, records: list[CallRecord], opened: list[tuple[int, int, float]]) -> None:
    """Make CALLS_PER_CLIENT calls; a session lost with its replica is replaced by a new one."""
    done, session = 0, 0
    while done < CALLS_PER_CLIENT and session < CALLS_PER_CLIENT + OPEN_ATTEMPTS:
        session += 1
        try:
            async with mcp_client(url) as client:
                opened.append((index, session, time.monotonic()))
                while done < CALLS_PER_CLIENT:
                    started = time.monotonic()
                    try:
                        with anyio.fail_after(CALL_LIMIT_SECONDS):
                            result = await client.call_tool("work", {"ms": CALL_MS})
                    except Exception as exc:  # noqa: BLE001 - recorded: the test judges which failures may happen
                        records.append(CallRecord(index, session, None, repr(exc)[:200], started, time.monotonic()))
                        break
                    pid = (result.structured_content or {}).get("pid")
                    error = None if not result.is_error and pid else f"error result: {result.content}"[:200]
                    records.append(CallRecord(index, session, pid, error, started, time.monotonic()))
                    done += 1
        except Exception:  # noqa: BLE001 - opening through a balancer that still routes to the dead replica
            await anyio.sleep(0.2)


@pytest.mark.integration  # three real replicas and haproxy: tens of seconds on a busy 2-core machine
def test_three_replicas_behind_haproxy_survive_one_killed_mid_run(tmp_path: Path) -> None:
    records: list[CallRecord] = []
    opened: list[tuple[int, int, float]] = []
    with gateway_cluster(tmp_path, 3) as cluster:
        victim = cluster.replicas[1].process
        killed_at: list[float] = []

        async def main() -> None:
            async def kill_a_third_of_the_way_in() -> None:
                while len(records) < CLIENTS * CALLS_PER_CLIENT // 3:
                    await anyio.sleep(0.05)
                victim.kill()
                killed_at.append(time.monotonic())

            async def report_progress() -> None:  # seen with -s: where a slow run on a busy machine is
                started = time.monotonic()
                while True:
                    await anyio.sleep(10)
                    failed = [r.error for r in records if r.error]
                    print(f"{time.monotonic() - started:5.0f} s: {len(records)} calls, {len(failed)} failed, "
                          f"{len(opened)} sessions" + (f"; last failure: {failed[-1]}" if failed else ""), flush=True)

            with anyio.fail_after(RUN_LIMIT_SECONDS):  # the whole run: no client may wait forever
                async with anyio.create_task_group() as clients:
                    clients.start_soon(kill_a_third_of_the_way_in)
                    clients.start_soon(report_progress)
                    async with anyio.create_task_group() as callers:
                        for index in range(CLIENTS):
                            callers.start_soon(run_client, index, cluster.url, records, opened)
                    clients.cancel_scope.cancel()

        anyio.run(main)
        victim.wait(10)
        pids = cluster.pids()

    dead, live = pids[1], {pids[0], pids[2]}
    kill_time = killed_at[0]
    by_session: dict[tuple[int, int], list[CallRecord]] = {}
    for record in records:
        by_session.setdefault((record.client, record.session), []).append(record)
    session_pid = {key: next((r.pid for r in calls if r.pid), None) for key, calls in by_session.items()}

    # The balancer spread the sessions over every replica before the kill.
    assert {session_pid[key] for key in session_pid if session_pid[key]} >= {*live, dead}
    # A session's calls all went to the replica that opened it.
    for key, calls in by_session.items():
        assert len({r.pid for r in calls if r.pid}) <= 1, (key, calls)
    # Every call of a session on a live replica completed.
    failures_on_live = [r for r in records if r.error and session_pid[(r.client, r.session)] in live]
    assert not failures_on_live, failures_on_live[:5]
    # The dead replica's clients lost at most the call in flight of each session, and only at the kill.
    lost = [r for r in records if r.error]
    assert all(session_pid[(r.client, r.session)] in (dead, None) for r in lost)
    assert len(lost) <= sum(1 for pid in session_pid.values() if pid == dead) + CLIENTS // 10, lost[:5]
    assert not any("TimeoutError" in (r.error or "") for r in lost), "a client waited for an answer that never came"
    # Sessions opened after the kill landed on live replicas; every client made all its calls.
    late = [(client, session) for client, session, at in opened if at > kill_time]
    assert all(session_pid.get(key) in live for key in late if session_pid.get(key))
    completed = {}
    for record in records:
        if record.pid and not record.error:
            completed[record.client] = completed.get(record.client, 0) + 1
    assert sorted(completed.values()) == [CALLS_PER_CLIENT] * CLIENTS
    print(f"\n{CLIENTS} clients, {len(records)} calls, {len(lost)} lost with the killed replica, "
          f"{len(late)} sessions opened after the kill, all on the live replicas")
