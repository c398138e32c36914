"""The run log's tables, and the migrations that bring an older database up to date.

The schema version lives in SQLite's ``PRAGMA user_version``. Each migration is a list of
statements run in one transaction; a database made by an older toolrun is migrated when it
is opened, a database from a newer toolrun is refused (its tables may mean other things).
"""

from __future__ import annotations

import sqlite3

from toolrun.core.errors import Problem, UserError

# Migration N brings a database from version N-1 to N. Append; never edit a released one.
MIGRATIONS: list[list[str]] = [
    [  # 1: runs, their turns, tool calls, messages, notices, and the full-text index
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            command TEXT NOT NULL,           -- recipe | ask | chat | library
            session TEXT,                    -- a chat's turns share one session
            recipe TEXT, model TEXT, mode TEXT,
            vars TEXT,                       -- JSON
            prompt TEXT,
            started_at REAL NOT NULL,        -- seconds since the epoch
            ended_at REAL,
            status TEXT NOT NULL,            -- running | ok | failed | expect_failed | interrupted
            stop_reason TEXT, final TEXT, error TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            requests INTEGER NOT NULL DEFAULT 0,
            document TEXT,                   -- the run's JSON document (recipe --json), when it ended
            pid INTEGER
        )""",
        """CREATE TABLE turns (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,           -- 1, 2, ...
            requested_at REAL, answered_at REAL, ended_at REAL,
            stop_reason TEXT, text TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, turn)
        )""",
        """CREATE TABLE tool_calls (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,
            seq INTEGER NOT NULL,            -- order of the calls in the model's answer
            call_id TEXT NOT NULL, name TEXT NOT NULL,
            arguments TEXT,                  -- JSON (or the raw text that did not parse)
            result TEXT, is_error INTEGER,
            started_at REAL, ended_at REAL, duration_ms INTEGER,
            PRIMARY KEY (run_id, call_id)
        )""",
        """CREATE TABLE messages (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL, role TEXT NOT NULL,
            content TEXT NOT NULL,           -- JSON list of parts
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE notices (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            at REAL NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL
        )""",
        "CREATE INDEX runs_started ON runs(started_at)",
        "CREATE INDEX tool_calls_name ON tool_calls(name)",
        # CJK text is indexed one character a token (see search_text): unicode61 alone would
        # make a whole Chinese sentence one token and 玫瑰 would never match inside it.
        "CREATE VIRTUAL TABLE search USING fts5(run_id UNINDEXED, field UNINDEXED, original UNINDEXED, text, "
        "tokenize='unicode61')",
    ],
    [  # 2: the tools a request offered under settings.tool_selection (JSON: the names, or "all"; NULL without one)
        "ALTER TABLE turns ADD COLUMN tools_offered TEXT",
    ],
    [  # 3: runs are indexed for search when a search first reads them, not while they write
        "ALTER TABLE runs ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0",  # 1: its search rows are whole
        "UPDATE runs SET indexed = 1",  # a run written before this indexed itself as it went
        "CREATE INDEX runs_not_indexed ON runs(id) WHERE indexed = 0",
    ],
    [  # 4: which run of a batch a logged run is an attempt of (its key: row, model, repeat); NULL outside a batch.
        # An interrupted run and its rerun on --resume, a failed run and its retry, share it; the earlier
        # attempt is marked superseded when the later one starts, so a batch's runs count in one pass.
        "ALTER TABLE runs ADD COLUMN run_key TEXT",
        "ALTER TABLE runs ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX runs_attempts ON runs(session, run_key) WHERE run_key IS NOT NULL",
    ],
    [  # 5: the index holds text as a terminal shows it, ANSI escape sequences left out: runs indexed with them
        # (a coloured \x1b[31mRED was the token 31mred) are indexed again at the next search
        "UPDATE runs SET indexed = 0 WHERE indexed = 1 AND id IN (SELECT run_id FROM search "
        "WHERE instr(original, char(27)) > 0 OR instr(original, char(155)) > 0)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(connection: sqlite3.Connection, path: object) -> None:
    """Bring the database to ``SCHEMA_VERSION``, one migration per transaction."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise UserError(Problem(str(path), None, f"the run log has schema version {version}; this toolrun knows "
                                f"up to {SCHEMA_VERSION}", "upgrade toolrun, or choose another file with --logs"))
    for number in range(version + 1, SCHEMA_VERSION + 1):
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while this one waited for the lock.
            if connection.execute("PRAGMA user_version").fetchone()[0] >= number:
                connection.execute("COMMIT")
                continue
            for statement in MIGRATIONS[number - 1]:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {number}")
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:  # SQLite ends it itself on some errors (a full disk)
                connection.execute("ROLLBACK")
            raise
