"""``toolrun logs prune``: remove old runs with their search rows, and give the space back.

Nothing here holds the write lock for long, so runs writing the log meanwhile wait a
moment at most: the search rows to remove are found by a read (WAL readers block no one),
runs are deleted a few hundred a transaction, and the freed pages are returned to the file
system ``PAGES_AT_ONCE`` at a time (``PRAGMA incremental_vacuum``). A log made before
toolrun used incremental vacuum keeps its size (new runs reuse the freed pages) unless
``vacuum_once`` converts it: one full ``VACUUM`` that holds the log while it runs.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from toolrun.runlog.store import RunLog, process_alive

RUNS_AT_ONCE = 200  # runs deleted in one transaction
PAGES_AT_ONCE = 256  # pages given back in one transaction
_INCREMENTAL = 2  # PRAGMA auto_vacuum: 0 none, 1 full, 2 incremental


@dataclass
class Pruned:
    """What a prune did: runs removed, bytes the file shrank by, and whether it could shrink at all."""

    runs: int
    bytes_freed: int
    incremental: bool  # False: a log from before incremental vacuum; its free pages stay in the file


def prune_runs(log: RunLog, before: float, *, vacuum_once: bool = False) -> Pruned:
    """Remove every run that ended (or, never ending, started) before ``before`` (seconds since the epoch).

    A run still being written (status ``running`` and its process alive) is kept.
    """
    connection = log.connection
    connection.execute("PRAGMA foreign_keys=ON")  # a run's turns, calls, messages and notices go with it
    size_before = _file_size(log)
    candidates = [(row["id"], row["status"], row["pid"]) for row in connection.execute(
        "SELECT id, status, pid FROM runs WHERE COALESCE(ended_at, started_at) < ? ORDER BY id", (before,))]
    ids = [run_id for run_id, status, pid in candidates if status != "running" or not pid or not process_alive(pid)]
    if ids:
        doomed = set(ids)
        search_rows = [rowid for rowid, run_id in connection.execute("SELECT rowid, run_id FROM search")
                       if int(run_id) in doomed]
        for start in range(0, len(ids), RUNS_AT_ONCE):
            chunk = ids[start:start + RUNS_AT_ONCE]
            with log.transaction() as writing:  # turns, calls, messages and notices go with their run
                writing.execute(f"DELETE FROM runs WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        for start in range(0, len(search_rows), RUNS_AT_ONCE * 10):
            with log.transaction() as writing:
                writing.executemany("DELETE FROM search WHERE rowid = ?",
                                    [(rowid,) for rowid in search_rows[start:start + RUNS_AT_ONCE * 10]])
    incremental = connection.execute("PRAGMA auto_vacuum").fetchone()[0] == _INCREMENTAL
    if not incremental and vacuum_once:
        connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
        connection.execute("VACUUM")  # takes effect only through a VACUUM; from now on pruning shrinks the file
        incremental = True
    elif incremental:
        while connection.execute("PRAGMA freelist_count").fetchone()[0]:
            _give_back(connection, PAGES_AT_ONCE)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the freed pages leave the WAL file too
    return Pruned(len(ids), max(0, size_before - _file_size(log)), incremental)


def _give_back(connection: sqlite3.Connection, pages: int) -> None:
    # executescript steps the pragma to its end; a plain execute frees one page a step
    try:
        connection.executescript(f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({int(pages)}); COMMIT;")
    except sqlite3.Error:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _file_size(log: RunLog) -> int:
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.path.getsize(f"{log.path}{suffix}")
        except OSError:
            continue
    return total
