"""``toolrun view [ID | TRANSCRIPT] [-o FILE] [--open]``: a run as one self-contained HTML page."""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path

import click

from toolrun.cli.logs import read_log
from toolrun.errors import Problem, UserError
from toolrun.view import render_page, timeline_from_log, timeline_from_transcript


@click.command("view")
@click.argument("source", metavar="[ID | TRANSCRIPT]", required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="where to write the page (default: run-ID.html or TRANSCRIPT.html here; - for stdout)")
@click.option("--open", "open_page", is_flag=True, help="open the page in the web browser")
@click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
              help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")
def view_command(source: str | None, output: Path | None, open_page: bool, logs: Path | None) -> None:
    """Draw a run as a timeline: turns, tool calls as bars in time, arguments and results on click.

    SOURCE is a run id of the log (default: the newest run) or a file written by --transcript.
    """
    if source is not None and not source.isdigit():
        path = Path(source)
        if not path.is_file():
            raise UserError(Problem(path, None, "no such transcript file, and not a run id",
                                    "name a run id from `toolrun logs` or a file written with --transcript"))
        run = timeline_from_transcript(path)
        default = Path(f"{path.stem}.html")
    else:
        log = read_log(logs)
        try:
            run = timeline_from_log(log, int(source) if source else None)
        finally:
            log.close()
        default = Path(f"run-{run['id']}.html")
    page = render_page(run)
    if output is not None and str(output) == "-":
        sys.stdout.write(page)
        return
    target = output or default
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(Problem(target, None, f"cannot write the page ({exc.strerror or exc})",
                                "choose another file with -o")) from None
    click.echo(f"wrote {target}", err=True)
    if open_page:
        webbrowser.open(target.resolve().as_uri())
