"""``toolrun import openapi SPEC``: write a toolset for an OpenAPI document, then lint it."""

from __future__ import annotations

from pathlib import Path

import click

from toolrun.core.errors import EXIT_RUN_FAILED, Problem, UserError
from toolrun.core.text import terminal_safe
from toolrun.openapi import group_findings, import_openapi, lint_toolset
from toolrun.openapi.overrides import edited_since_import, overrides_path
from toolrun.openapi.toolset import HEADER_START, plural


@click.command("openapi")
@click.argument("spec")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the toolset here (e.g. tools.d/myapi.yaml); an earlier import there is replaced, "
                   "any other file is left alone. Default: stdout.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Only operations whose path or operationId matches. Repeatable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out operations whose path or operationId matches.")
@click.option("--tag", "tags", multiple=True, metavar="T", help="Only operations with this tag. Repeatable.")
@click.option("--base-url", help="The API's base URL, instead of the document's first server.")
@click.option("--allow-external-refs", is_flag=True,
              help="Let the document's $refs read other hosts and files outside its folder (a document you trust).")
@click.option("--header", "headers", multiple=True, metavar="'K: V'",
              help="A header for every tool; a secret only as ${env:NAME}. Repeatable.")
@click.option("--auth-env", metavar="NAME", help="The environment variable of the API's token (default: from the title).")
@click.option("--env-prefix", metavar="PREFIX", help="Start every environment variable's name with PREFIX.")
@click.pass_context
def openapi_command(ctx: click.Context, spec: str, output: Path | None, include: tuple[str, ...],
                    exclude: tuple[str, ...], tags: tuple[str, ...], base_url: str | None,
                    allow_external_refs: bool, headers: tuple[str, ...], auth_env: str | None,
                    env_prefix: str | None) -> None:
    """Import the OpenAPI 3.x or Swagger 2.0 document SPEC (a file or an http(s) URL) as HTTP tools.

    The summary (what was skipped and why, which variables to set) and the lint's findings,
    grouped by rule, go to stderr. Exit 0 when the toolset loads, 1 when it has lint errors,
    2 when the document cannot be read.
    """
    if output is not None:
        _check_not_edited(output)
    result = import_openapi(spec, include=include, exclude=exclude, tags=tags, base_url=base_url,
                            allow_external_refs=allow_external_refs, headers=headers, auth_env=auth_env,
                            env_prefix=env_prefix, overrides=overrides_path(output) if output is not None else None)
    replaced = False
    if output is not None:
        replaced = _write(output, result.text)
    else:
        click.echo(result.text, nl=False)
    say = _stderr
    where = f" to {output}" + (" (replacing the earlier import)" if replaced else "") if output is not None else ""
    say(f"imported {plural(len(result.tools), 'tool')}{where} from {result.title} ({result.spec_version}); "
        f"{len(result.skipped)} skipped" + (f", {result.not_selected} not selected" if result.not_selected else ""))
    if result.overrides_applied:
        say(f"  applied the edits in {result.overrides_name}")
    for skipped in result.skipped:
        say(f"  skipped {skipped}")
    for entry in result.other_origins:
        say(f"  other origin: {entry}")
    for note in result.notes:
        say(f"  note: {note}")
    if result.without_credentials:
        say("  without credentials: " + ", ".join(result.without_credentials))
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


def _check_not_edited(output: Path) -> None:
    """Refuse to replace an import that was edited by hand since: the edits belong in its overrides file."""
    try:
        text = output.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return  # a new file, or one _write reports on
    if text.startswith(HEADER_START) and edited_since_import(text):
        edits = overrides_path(output)
        raise UserError(Problem(output, None, "was edited by hand since it was imported: importing again would lose the edits",
                                f"move them to {edits} (applied on every import, see docs/openapi.md), then delete "
                                f"{output.name} and import again"))


def _write(output: Path, text: str) -> bool:
    """Write the toolset to ``output``; True when it replaced an earlier import.

    A file that is not an earlier import (a hand-written toolset, anything else) is never replaced.
    """
    try:
        with output.open(encoding="utf-8", errors="replace") as existing:
            first_line = existing.readline()
    except (FileNotFoundError, NotADirectoryError):
        first_line = None  # a new file (or a folder that cannot be made, which the write reports)
    except OSError as exc:
        raise UserError(Problem(output, None, f"cannot read the existing file: {_reason(exc)}",
                                "choose another file with -o")) from None
    if first_line and not first_line.startswith(HEADER_START):  # an empty file holds nothing to lose
        raise UserError(Problem(output, None, "exists and was not written by `toolrun import openapi`: not replaced",
                                "choose another file with -o, or delete this one first"))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(Problem(output, None, f"cannot write the toolset: {_reason(exc, output)}",
                                "choose a file in a folder you can write to with -o")) from None
    return bool(first_line)


def _reason(exc: OSError, output: Path | None = None) -> str:
    """``No such file or directory (/proc/x)``: the system's words and the path it is about."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and output is not None:
        blocking = next((folder for folder in output.parents if folder.exists() and not folder.is_dir()), None)
        if blocking is not None:  # mkdir's "File exists" does not say which part is the file
            return f"{blocking} is a file, not a folder"
    return f"{exc.strerror} ({exc.filename})" if exc.strerror and exc.filename else str(exc)


def _stderr(text: str) -> None:
    click.echo(terminal_safe(text), err=True)  # a document's text (a path, a reason) cannot drive the terminal
