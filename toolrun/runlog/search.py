"""``toolrun logs search``: the runs whose indexed text mentions every word, each with an excerpt.

Apart from ``toolrun.runlog.store`` so a run that only writes the log does not import it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from toolrun.runlog.store import match_query


@dataclass
class SearchHit:
    """A run that matched a search, the field that matched and an excerpt of it."""

    run_id: int
    field: str
    excerpt: str


def search_runs(connection: sqlite3.Connection, text: str, *, limit: int = 20) -> list[SearchHit]:
    """Runs that mention every word of ``text`` (in their prompt, answers, tool arguments or
    results — not necessarily in one place), newest first, each with an excerpt of its first match."""
    words = [word for word in text.split() if match_query(word)]
    if not words:
        return []
    matching: set[int] | None = None
    first: dict[int, int] = {}  # run id -> the index row of its first match of the first word
    for number, word in enumerate(words):  # ids only: the text is read for the runs shown, not every match
        rows = connection.execute("SELECT run_id, MIN(rowid) FROM search WHERE search MATCH ? GROUP BY run_id",
                                  (match_query(word),)).fetchall()
        if number == 0:
            first = {int(run_id): rowid for run_id, rowid in rows}
        runs = {int(row[0]) for row in rows}
        matching = runs if matching is None else matching & runs
    hits = []
    for run_id in sorted(matching or (), reverse=True)[:limit]:
        row = connection.execute("SELECT field, original FROM search WHERE rowid = ?", (first[run_id],)).fetchone()
        hits.append(SearchHit(run_id, row["field"], _excerpt(row["original"], words[0])))
    return hits


def _excerpt(text: str, word: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    at = flat.lower().find(word.lower())
    start = max(0, at - width // 2) if at >= 0 else 0
    piece = flat[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
