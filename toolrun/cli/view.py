"""``toolrun view [ID | TRANSCRIPT] [-o FILE] [--open]``: a run as one self-contained HTML page."""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path

import click

from toolrun.cli.echo import write_flushed
from toolrun.cli.logs import read_log
from toolrun.core.errors import Problem, UserError
from toolrun.core.private_files import write_private_text
from toolrun.core.text import text_as_sent
from toolrun.view import render_batch_page, render_page, timeline_from_log, timeline_from_transcript

BATCH_PREFIX = "batch-"  # toolrun batch's ids: batch-YYYYMMDD-HHMMSS-xxxx
MAX_BATCH_RUNS = 1_000_000


@click.command("view")
@click.argument("source", metavar="[ID | BATCH_ID | TRANSCRIPT]", required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="where to write the page (default: run-ID.html or TRANSCRIPT.html here; - for stdout)")
@click.option("--open", "open_page", is_flag=True, help="open the page in the web browser")
@click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
              help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")
def view_command(source: str | None, output: Path | None, open_page: bool, logs: Path | None) -> None:
    """Draw a run as a timeline: turns, tool calls as bars in time, arguments and results on click.

    SOURCE is a run id of the log (default: the newest run), a batch id (a table of its
    runs' outcomes) or a file written by --transcript.
    """
    if source is not None and source.startswith(BATCH_PREFIX) and not Path(source).is_file():
        source = text_as_sent(source)  # not a file: a batch id, text to look up in the log
        log = read_log(logs)
        try:
            runs = log.list_runs(session=source, limit=MAX_BATCH_RUNS)
        finally:
            log.close()
        if not runs:
            raise UserError(Problem(None, None, f"no runs of batch {source} in the log", "see the batches with: toolrun logs batches"))
        page, default = render_batch_page(source, runs), Path(f"{source}.html")
    elif source is not None and not source.isdigit():
        path = Path(source)
        if not path.is_file():
            raise UserError(Problem(path, None, "no such transcript file, and not a run id",
                                    "name a run id from `toolrun logs` or a file written with --transcript"))
        run = timeline_from_transcript(path)
        default = Path(f"{path.stem}.html")
        page = render_page(run)
    else:
        log = read_log(logs)
        try:
            run = timeline_from_log(log, int(source) if source else None)
        finally:
            log.close()
        default = Path(f"run-{run['id']}.html")
        page = render_page(run)
    if output is not None and str(output) == "-":
        write_flushed(sys.stdout, page)
        return
    target = output or default
    try:
        write_private_text(target, page)  # the page holds the run's arguments and results
    except OSError as exc:
        raise UserError(Problem(target, None, f"cannot write the page ({exc.strerror or exc})",
                                "choose another file with -o")) from None
    click.echo(f"wrote {target}", err=True)
    if open_page:
        webbrowser.open(target.resolve().as_uri())
