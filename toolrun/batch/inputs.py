"""The rows of a batch: JSON Lines, CSV or a YAML list, each row's fields a recipe's vars.

A field the recipe does not use is an error naming the row (its line in the file) and the
field, with a did-you-mean: a typo would otherwise run a thousand rows on the default value.
Every problem of the file is found in one reading — a line that is not JSON does not hide
the typos of the rows after it — and reported in line order, the first ``PROBLEMS_LISTED``
listed and the rest counted.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from toolrun.core.errors import LoadError, Problem
from toolrun.core.json_limits import non_finite
from toolrun.core.text import did_you_mean
from toolrun.core.yamlsource import LineList, YamlSyntaxError, load_yaml_file, plain
from toolrun.sessions.recipe import Recipe

INPUT_FORMATS = ("JSON Lines (.jsonl)", "CSV (.csv)", "YAML list (.yaml)")

# (line, fields) of each row in file order; fields None for a row that could not be read (its problem is said)
ReadRows = list[tuple[int, dict[str, Any] | None]]


def load_rows(path: Path, recipe: Recipe) -> list[tuple[int, dict[str, Any]]]:
    """``(line, fields)`` per row of a ``.jsonl``/``.ndjson``, ``.csv`` or ``.yaml``/``.yml`` file, checked
    against ``recipe``; LoadError with every problem of the file: rows that cannot be read, fields no var
    of the recipe takes, vars a row leaves without a value."""
    rows, problems = _read_rows(path)
    problems += row_problems(rows, recipe, path)
    if problems:
        raise LoadError.bounded(sorted(problems, key=lambda problem: problem.line or 0))
    return [(line, fields) for line, fields in rows if fields is not None]


def _read_rows(path: Path) -> tuple[ReadRows, list[Problem]]:
    if not path.is_file():
        raise LoadError(Problem(path, None, "the inputs file does not exist", "name a JSON Lines, CSV or YAML file"))
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _json_lines(path)
    if suffix == ".csv":
        return _csv_rows(path)
    if suffix in (".yaml", ".yml"):
        return _yaml_rows(path)
    raise LoadError(Problem(path, None, f"cannot tell the format of {path.name} by its extension",
                            f"use one of {', '.join(INPUT_FORMATS)}"))


def row_problems(rows: ReadRows, recipe: Recipe, path: Path) -> list[Problem]:
    """Every field no var of the recipe takes (with a did-you-mean), every row that leaves a var the recipe
    uses without a value (it has no default under ``vars:``), every value JSON cannot carry. A row is
    numbered by its place in the file, rows that could not be read included."""
    used = recipe.placeholders()
    known = set(recipe.vars) | used
    problems: list[Problem] = []
    for number, (line, fields) in enumerate(rows, start=1):
        if fields is None:
            continue
        for name in sorted(used - set(recipe.vars) - set(fields)):
            problems.append(Problem(path, line, f"row {number}: no field {name!r}, and recipe {recipe.name!r} has no default for it",
                                    f"give the row a {name!r} field, or the recipe a default under vars:"))
        for key, value in fields.items():
            if next(non_finite(value), None):  # NaN, Infinity: the results file and the log could not carry them
                problems.append(Problem(path, line, f"row {number}: field {key!r} holds NaN or Infinity, which JSON "
                                        "cannot carry", 'write a number, or the text in quotes ("NaN")'))
            if key in known:
                continue
            guess = did_you_mean(key, known)
            hint = f"did you mean {guess!r}?" if guess else (
                f"the recipe's vars are: {', '.join(sorted(known))}" if known else "the recipe uses no vars")
            problems.append(Problem(path, line, f"row {number}: field {key!r} is not a var of recipe {recipe.name!r}", hint))
    return problems


def _read_text(path: Path) -> str:
    """The file's text; a byte-order mark (a spreadsheet's UTF-8 export) is not part of the first field."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LoadError(Problem(path, None, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8")) from None
    except OSError as exc:
        raise LoadError(Problem(path, None, f"cannot read the inputs file: {exc.strerror or exc}",
                                "check the file's permissions")) from None


def _json_lines(path: Path) -> tuple[ReadRows, list[Problem]]:
    rows: ReadRows = []
    problems: list[Problem] = []
    whole = _read_text(path)
    if whole.lstrip().startswith("["):  # one JSON array: not JSON Lines, but a YAML list as it stands
        line = whole[:len(whole) - len(whole.lstrip())].count("\n") + 1
        raise LoadError(Problem(path, line, "the inputs hold one JSON array; JSON Lines is one object a line",
                                f"rename the file to {path.stem}.yaml (a JSON array is a YAML list of rows), "
                                "or write one JSON object per line"))
    for line_number, text in enumerate(whole.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(Problem(path, line_number, f"not JSON: {exc.msg}", "write one JSON object per line"))
            value = None
        else:
            if not isinstance(value, dict):
                problems.append(Problem(path, line_number, "a row is a JSON object of vars", 'write e.g. {"city": "北京"}'))
                value = None
        rows.append((line_number, value))
    return rows, problems


def _csv_rows(path: Path) -> tuple[ReadRows, list[Problem]]:
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
    rows: ReadRows = []
    problems: list[Problem] = []
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # a cell past csv's field limit: no row to read on from
            # the row it was reading starts on the line after the last one read whole
            problems.append(Problem(path, reader.line_num + 1, f"this row cannot be read as CSV ({exc})",
                                    "check the quotes around the values of this row: a quote left open runs on to the end of the file"))
            break
        if None in fields:  # more cells than the header names
            problems.append(Problem(path, reader.line_num, "this row has more cells than the header has names",
                                    "quote a value that holds a comma"))
            rows.append((reader.line_num, None))
            continue
        rows.append((reader.line_num, {key: value for key, value in fields.items() if value is not None}))
    return rows, problems


def _yaml_rows(path: Path) -> tuple[ReadRows, list[Problem]]:
    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise LoadError(exc.problem) from None
    if not isinstance(document, LineList):
        raise LoadError(Problem(path, 1, "the inputs are a YAML list of rows", "write e.g.\n- {city: 北京}\n- {city: 上海}"))
    rows: ReadRows = []
    problems: list[Problem] = []
    for index, item in enumerate(document):
        line = document.item_lines[index]
        if not isinstance(item, dict):
            problems.append(Problem(path, line, "a row is a mapping of vars", "write e.g. - {city: 北京}"))
            rows.append((line, None))
            continue
        rows.append((line, plain(item)))
    return rows, problems
