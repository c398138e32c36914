"""``toolrun logs [list|show ID|search TEXT|batches|prune]``: the runs in the run log, newest first."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from toolrun.cli.group import ToolrunGroup
from toolrun.cli.text_param import TYPED_TEXT
from toolrun.cli.tools_list import format_table
from toolrun.core.durations import parse_duration
from toolrun.core.errors import Problem, UserError
from toolrun.core.text import counted, json_printable, terminal_safe
from toolrun.runlog import RunLog, default_log_path
from toolrun.view.call_outcome import expect_failures_of, never_ran

_GROUP_LOGS = "toolrun.logs.path"  # click's meta is shared by a command and its subcommands
_PREVIEW = 100  # characters of an argument or result shown on one line


def _logs_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
                        help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")(function)


def _list_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True, help="how many runs"),
        click.option("--recipe", type=TYPED_TEXT, help="only runs of this recipe (ask and chat runs are named ask and chat)"),
        click.option("--tool", type=TYPED_TEXT, help="only runs that called this tool"),
        click.option("--errors", is_flag=True, help="only runs that failed, were stopped or never finished, or had a failing call"),
        click.option("--batch", "batch", metavar="BATCH_ID", type=TYPED_TEXT,
                     help="only the runs of one batch (see: toolrun logs batches)"),
        click.option("--json", "as_json", is_flag=True, help="print a JSON list"),
        _logs_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


def read_log(logs: Path | None) -> RunLog:
    """The run log to read (``--logs``, else the group's ``--logs``, else the default); UserError when there is none yet."""
    context = click.get_current_context(silent=True)
    given = logs if logs is not None else (context.meta.get(_GROUP_LOGS) if context is not None else None)
    path = Path(given) if given is not None else default_log_path()
    if not path.is_file():
        raise UserError(Problem(path, None, "no run log here yet",
                                "run a recipe, ask or chat first, or name the log with --logs / TOOLRUN_LOGS"))
    return RunLog.open(path)


@click.group("logs", cls=ToolrunGroup, invoke_without_command=True)
@_list_options
@click.pass_context
def logs_group(ctx: click.Context, **options: Any) -> None:
    """The log of every run: list (the default), show ID, search TEXT, batches, prune."""
    ctx.meta[_GROUP_LOGS] = options["logs"]  # toolrun logs --logs F show 3: the group's --logs counts too
    given = [name for name in options if name != "logs"
             and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if ctx.invoked_subcommand is not None and given:  # toolrun logs --json show 3 printed text, -n 5 list ignored -n
        sub = ctx.invoked_subcommand
        command = logs_group.get_command(ctx, sub)
        foreign = [name for name in given if name not in {param.name for param in command.params}] if command else given
        where = (f"{sub!r} has no {', '.join(_option_name(ctx, name) for name in foreign)}" if foreign
                 else f"write it after, e.g. toolrun logs {sub} {_option_name(ctx, given[0])} ...")
        raise click.UsageError(f"{', '.join(_option_name(ctx, name) for name in given)} before {sub!r} would be ignored: "
                               f"only --logs applies to every subcommand; {where}", ctx)
    if ctx.invoked_subcommand is None:
        _list(**options)


def _option_name(ctx: click.Context, name: str) -> str:
    """How the option of parameter ``name`` is written (``--json``, ``-n``)."""
    return next((param.opts[0] for param in ctx.command.params if param.name == name), name)


@logs_group.command("list")
@_list_options
def list_command(**options: Any) -> None:
    """Runs newest first: id, time, recipe, model, mode, turns, calls, outcome, tokens."""
    _list(**options)


def _list(*, limit: int, recipe: str | None, tool: str | None, errors: bool, as_json: bool, logs: Path | None,
          batch: str | None = None) -> None:
    log = read_log(logs)
    runs = log.list_runs(limit=limit, recipe=recipe, tool=tool, errors=errors, session=batch)
    if as_json:
        click.echo(json_printable(runs))
        return
    if not runs:
        click.echo("no runs match", err=True)
        return
    rows = [(str(run["id"]), _time(run["started_at"]), run["command"], run["recipe"] or "", run["model"] or "",
             run["mode"] or "", str(run["turns"]), _calls(run), run["status"],
             f"{run['usage']['input_tokens']}/{run['usage']['output_tokens']}") for run in runs]
    click.echo(terminal_safe(format_table(("ID", "STARTED", "COMMAND", "RECIPE", "MODEL", "MODE", "TURNS", "CALLS",
                                           "STATUS", "TOKENS IN/OUT"), rows)))


@logs_group.command("batches")
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True, help="how many batches")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
@_logs_option
def batches_command(limit: int, as_json: bool, logs: Path | None) -> None:
    """Batches newest first: id, recipe, runs by the outcome of their latest attempt, attempts, tokens
    (their runs: logs list --batch ID)."""
    batches = read_log(logs).list_batches(limit=limit)
    if as_json:
        click.echo(json_printable(batches))
        return
    if not batches:
        click.echo("no batches in the log", err=True)
        return
    rows = [(b["batch"], _time(b["started_at"]), b["recipe"] or "", str(b["runs"]), str(b["ok"]), str(b["expect_failed"]),
             str(b["failed_or_unfinished"]), str(b["running"]), str(b["attempts"]),
             f"{b['usage']['input_tokens']}/{b['usage']['output_tokens']}") for b in batches]
    click.echo(terminal_safe(format_table(("BATCH", "STARTED", "RECIPE", "RUNS", "OK", "EXPECT FAILED",
                                           "FAILED/UNFINISHED", "RUNNING", "ATTEMPTS", "TOKENS IN/OUT"), rows)))


@logs_group.command("show")
@click.argument("run_id", metavar="ID", type=int)
@click.option("--json", "as_json", is_flag=True, help="print the run as one JSON document")
@_logs_option
def show_command(run_id: int, as_json: bool, logs: Path | None) -> None:
    """One run: every turn, every tool call with arguments, result and timing, the answer."""
    log = read_log(logs)
    run = log.get_run(run_id)
    if run is None:
        raise UserError(Problem(None, None, f"no run {run_id} in the log", "see the ids with: toolrun logs"))
    run["expect_failures"] = expect_failures_of(log, run_id)
    if as_json:
        click.echo(json_printable(run))
        return
    click.echo(terminal_safe("\n".join(format_run(run))))  # results and answers came from untrusted hands


@logs_group.command("search")
@click.argument("words", metavar="TEXT", nargs=-1, required=True, type=TYPED_TEXT)
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True, help="how many runs")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
@_logs_option
def search_command(words: tuple[str, ...], limit: int, as_json: bool, logs: Path | None) -> None:
    """Runs whose prompt, answer, tool arguments or results contain every word of TEXT (full-text)."""
    text = " ".join(words)
    log = read_log(logs)
    hits = log.search(text, limit=limit)
    runs = {hit.run_id: log.get_run(hit.run_id) for hit in hits}
    if as_json:
        click.echo(json_printable([{"id": hit.run_id, "field": hit.field, "excerpt": hit.excerpt,
                                    "recipe": (runs[hit.run_id] or {}).get("recipe"),
                                    "started_at": (runs[hit.run_id] or {}).get("started_at")} for hit in hits]))
        return
    if not hits:
        click.echo(f"no run mentions {text!r}", err=True)
        return
    for hit in hits:
        run = runs[hit.run_id] or {}
        click.echo(terminal_safe(f"{hit.run_id}  {_time(run.get('started_at'))}  "
                                 f"{run.get('recipe') or run.get('command')}  [{hit.field}] {hit.excerpt}"))


@logs_group.command("prune")
@click.option("--older-than", "older_than", metavar="DURATION", required=True,
              help="remove runs that ended longer ago than this: 30d, 12h, 2w")
@click.option("--vacuum", is_flag=True, help="a log from an older toolrun: shrink it once with a full VACUUM "
              "(holds the log while it runs)")
@click.option("--json", "as_json", is_flag=True, help="print what was removed as JSON")
@_logs_option
def prune_command(older_than: str, vacuum: bool, as_json: bool, logs: Path | None) -> None:
    """Remove old runs with their search rows and give the space back, while runs go on writing."""
    from toolrun.runlog.prune import prune_runs  # only prune needs it

    pruned = prune_runs(read_log(logs), time.time() - _age(older_than), vacuum_once=vacuum)
    if as_json:
        click.echo(json.dumps({"runs": pruned.runs, "bytes_freed": pruned.bytes_freed,
                               "incremental": pruned.incremental}))
        return
    click.echo(f"removed {counted(pruned.runs, 'run')} older than {older_than}; "
               f"the log is {pruned.bytes_freed // 1024} KiB smaller", err=True)
    if not pruned.incremental:
        click.echo("note: this log was made before toolrun gave pruned space back, so the file keeps its size "
                   "(new runs reuse the space); shrink it once with: toolrun logs prune --older-than "
                   f"{older_than} --vacuum, while no run writes", err=True)


_DAYS = {"d": 86400.0, "w": 7 * 86400.0}


def _age(text: str) -> float:
    """Seconds for ``30d``, ``2w`` or any duration of the tool files (``12h``, ``90m``)."""
    try:
        if text[-1:] in _DAYS and text[:-1].replace(".", "", 1).isdigit():
            return float(text[:-1]) * _DAYS[text[-1]]
        return parse_duration(text)
    except ValueError:
        raise UserError(Problem(None, None, f"--older-than: {text!r} is not a duration",
                                "write it as 30d, 2w, 12h or 90m")) from None


def format_run(run: dict[str, Any]) -> list[str]:
    """``logs show``: a header, each turn with its calls, the answer or the error."""
    usage = run["usage"]
    lines = [f"run {run['id']} · {run['command']} {run['recipe'] or ''} · {run['model']} · {run['mode']} · "
             f"{run['status']}",
             f"started {_time(run['started_at'])} · {_duration(run['started_at'], run['ended_at'])} · "
             f"{usage['input_tokens']} in / {usage['output_tokens']} out tokens · "
             f"{counted(usage['requests'], 'model request')}"]
    if run.get("prompt"):
        lines.append(f"prompt: {run['prompt']}")
    if run.get("vars"):
        lines.append(f"vars: {json.dumps(run['vars'], ensure_ascii=False)}")
    for notice in run.get("notices", []):
        lines.append(f"{notice['kind']}: {notice['message']}")
    for turn in run["turns"]:
        lines.append(f"turn {turn['turn']} · {turn['stop_reason']} · {turn['usage']['input_tokens']} in / "
                     f"{turn['usage']['output_tokens']} out tokens")
        lines += _offered(turn.get("tools_offered"))
        if turn["text"] and turn["tool_calls"]:
            lines.append(f"  says: {_preview(turn['text'])}")
        for call in turn["tool_calls"]:
            arguments = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"], ensure_ascii=False)
            timing = f"{call['duration_ms']} ms" if call["duration_ms"] is not None else "did not finish"
            timing = "never ran" if never_ran(call) else timing
            lines.append(f"  → {call['name']} {_preview(arguments)} · {timing}")
            if call["result"] is not None:
                mark = "✗ error: " if call["is_error"] else "← "
                lines.append(f"    {mark}{_preview(call['result'])}")
    if run.get("final"):
        lines.append("answer:")
        lines.append(run["final"])
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    for failure in run.get("expect_failures") or []:
        lines.append(f"expect failed: {failure}")
    return lines


def _offered(offered: list[str] | str | None) -> list[str]:
    """The tools a turn's request offered under settings.tool_selection (nothing without one)."""
    if offered is None:
        return []
    if offered == "all":
        return ["  offered: all the run's tools"]
    return [f"  offered {len(offered)}: {', '.join(offered)}"]


def _calls(run: dict[str, Any]) -> str:
    return f"{run['calls']} ({run['errors']} failed)" if run["errors"] else str(run["calls"])


def _time(seconds: float | None) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S") if seconds else ""


def _duration(start: float | None, end: float | None) -> str:
    if not start or not end:
        return "unfinished"
    return f"{end - start:.2f} s"


def _preview(text: str) -> str:
    flat = text.replace("\r", "").replace("\n", " ⏎ ")
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
