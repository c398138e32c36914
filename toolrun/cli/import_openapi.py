"""``toolrun import openapi SPEC``: write a toolset for an OpenAPI document, then lint it."""

from __future__ import annotations

from pathlib import Path

import click

from toolrun.errors import EXIT_RUN_FAILED
from toolrun.openapi import group_findings, import_openapi, lint_toolset
from toolrun.openapi.toolset import plural


@click.command("openapi")
@click.argument("spec")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the toolset here (e.g. tools.d/myapi.yaml). Default: stdout.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Only operations whose path or operationId matches. Repeatable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out operations whose path or operationId matches.")
@click.option("--tag", "tags", multiple=True, metavar="T", help="Only operations with this tag. Repeatable.")
@click.option("--base-url", help="The API's base URL, instead of the document's first server.")
@click.pass_context
def openapi_command(ctx: click.Context, spec: str, output: Path | None, include: tuple[str, ...],
                    exclude: tuple[str, ...], tags: tuple[str, ...], base_url: str | None) -> None:
    """Import the OpenAPI 3.x or Swagger 2.0 document SPEC (a file or an http(s) URL) as HTTP tools.

    The summary (what was skipped and why, which variables to set) and the lint's findings,
    grouped by rule, go to stderr. Exit 0 when the toolset loads, 1 when it has lint errors,
    2 when the document cannot be read.
    """
    result = import_openapi(spec, include=include, exclude=exclude, tags=tags, base_url=base_url)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(result.text, encoding="utf-8")
    else:
        click.echo(result.text, nl=False)
    say = _stderr
    where = f" to {output}" if output is not None else ""
    say(f"imported {plural(len(result.tools), 'tool')}{where} from {result.title} ({result.spec_version}); "
        f"{len(result.skipped)} skipped" + (f", {result.not_selected} not selected" if result.not_selected else ""))
    for skipped in result.skipped:
        say(f"  skipped {skipped}")
    for note in result.notes:
        say(f"  note: {note}")
    if result.variables:
        say("set " + ", ".join(result.variables) + " (see the file's header)")
    review = lint_toolset(result.text, output)
    for problem in review.problems:
        say(f"error: {problem}")
    groups = group_findings(review.findings)
    counts = {severity: sum(g.count for g in groups if g.severity == severity) for severity in ("error", "warning", "info")}
    say(f"lint: {plural(review.tools, 'tool')} — {plural(counts['error'], 'error')}, "
        f"{plural(counts['warning'], 'warning')}, {counts['info']} info "
        "(by rule; `toolrun tools lint` lists each):")
    for group in groups:
        say(f"  {group}")
    if review.problems or counts["error"]:
        ctx.exit(EXIT_RUN_FAILED)


def _stderr(text: str) -> None:
    click.echo(text, err=True)
