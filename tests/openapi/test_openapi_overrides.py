"""Hand edits survive re-import: they live in FILE.overrides beside the imported FILE.yaml (the loader
reads no such file), and every import applies them; an edit made in the imported file itself stops
the next import instead of being lost."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from click.testing import CliRunner

from toolrun.catalog.loader import load_catalog
from toolrun.cli import main

DOCUMENT = """\
openapi: 3.0.3
info: {title: Incidents, version: "1"}
servers: [{url: "https://incidents.example.com/v1"}]
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
security: [{bearer: []}]
paths:
  /incidents:
    get:
      operationId: listIncidents
      summary: List incidents
      responses: {"200": {description: ok}}
  /incidents/{id}:
    delete:
      operationId: deleteIncident
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
"""

EDITS = """\
defaults:
  http:
    headers: {X-Team: ops}
tools:
  - name: listIncidents
    description: |-
      Lists the open incidents of the team, newest first. Use it to see what is on fire now;
      do not use it for closed incidents.
  - name: deleteIncident
    drop: true
  - name: ping
    description: Checks that the incidents API answers; use it before a long investigation, not otherwise.
    backend: {http: {url: /ping, headers: {Authorization: null}}}
"""


def _import(spec: Path, target: Path):
    return CliRunner().invoke(main, ["import", "openapi", str(spec), "-o", str(target)], catch_exceptions=False)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_edits_in_the_overrides_file_survive_a_re_import_of_a_changed_document(tmp_path: Path) -> None:
    spec = _write(tmp_path / "incidents.yaml", DOCUMENT)
    target = tmp_path / "tools.d" / "incidents.yaml"
    assert _import(spec, target).exit_code == 0
    _write(tmp_path / "tools.d" / "incidents.overrides", EDITS)  # add a header, change a description, add a tool
    # the API grows an operation and renames a summary: import again
    _write(spec, DOCUMENT.replace("List incidents", "List all incidents") + """\
  /incidents/{id}/ack:
    post:
      operationId: ackIncident
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
""")
    outcome = _import(spec, target)
    assert outcome.exit_code == 0, outcome.output
    assert "applied the edits in incidents.overrides" in outcome.stderr
    toolset = yaml.safe_load(target.read_text())
    assert toolset["defaults"]["http"]["headers"] == {"Authorization": "Bearer ${env:INCIDENTS_TOKEN}", "X-Team": "ops"}
    names = [tool["name"] for tool in toolset["tools"]]
    assert names == ["listIncidents", "ackIncident", "ping"]  # deleteIncident dropped, the new operation in
    assert toolset["tools"][0]["description"].startswith("Lists the open incidents of the team")
    assert toolset["tools"][2]["backend"]["http"]["headers"] == {"Authorization": None}
    assert "# added in incidents.overrides" in target.read_text()
    loaded = load_catalog(target.parent)  # the overrides file is no tool file
    assert not loaded.problems, loaded.problems
    assert sorted(loaded.catalog.tools) == ["ackIncident", "listIncidents", "ping"]


def test_an_import_edited_by_hand_is_not_replaced(tmp_path: Path) -> None:
    spec = _write(tmp_path / "incidents.yaml", DOCUMENT)
    target = tmp_path / "tools.d" / "incidents.yaml"
    assert _import(spec, target).exit_code == 0
    assert _import(spec, target).exit_code == 0  # unedited: replaced as often as wanted
    edited = target.read_text().replace("description: List incidents", "description: Lists the open incidents")
    target.write_text(edited)
    outcome = _import(spec, target)
    assert outcome.exit_code == 2
    assert "edited by hand since it was imported" in outcome.stderr and "incidents.overrides" in outcome.stderr
    assert target.read_text() == edited


def test_a_mistake_in_the_overrides_file_names_its_line(tmp_path: Path) -> None:
    spec = _write(tmp_path / "incidents.yaml", DOCUMENT)
    target = tmp_path / "tools.d" / "incidents.yaml"
    overrides = tmp_path / "tools.d" / "incidents.overrides"
    for text, said in [("tools:\n  - description: no name\n", "tools[0] names no tool"),
                       ("tools:\n  - name: x\n    backend: {shell: {argv: [rm]}}\n", "http tools only"),
                       ("tool:\n  - name: x\n", "unknown key tool"),
                       ("tools: [\n", "YAML syntax error")]:
        _write(overrides, text)
        outcome = _import(spec, target)
        assert outcome.exit_code == 2 and said in outcome.stderr and "incidents.overrides" in outcome.stderr, (
            text, outcome.stderr)
    assert not target.exists()


def test_a_key_the_tool_format_does_not_have_stops_the_import_at_its_line_and_keeps_the_last_import(
        tmp_path: Path) -> None:
    spec = _write(tmp_path / "incidents.yaml", DOCUMENT)
    target = tmp_path / "tools.d" / "incidents.yaml"
    overrides = tmp_path / "tools.d" / "incidents.overrides"
    assert _import(spec, target).exit_code == 0
    imported = target.read_text()
    for text, said in [
            ("defaults:\n  mcp_server: {command: [touch, ran]}\n", ":2: defaults.mcp_server: an imported toolset holds http tools only"),
            ("defaults:\n  shell: {cwd: /}\n", ":2: defaults.shell: an imported toolset holds http tools only"),
            ("defaults:\n  http:\n    timeuot: 5s\n", ":3: unknown key 'timeuot' in defaults.http — did you mean 'timeout'?"),
            ("tools:\n  - name: listIncidents\n    retries: 2\n", ":3: unknown key 'retries' in tools[0]"),
            ("tools:\n  - name: ping\n    backend: {http: {methd: GET}}\n", ":3: unknown key 'methd' in tools[0].backend.http"),
            ("tools:\n  - name: listIncidents\n    timeout: soon\n", ":3: tools[0].timeout must be")]:
        _write(overrides, text)
        outcome = _import(spec, target)
        assert outcome.exit_code == 2 and f"incidents.overrides{said}" in outcome.stderr, (text, outcome.stderr)
        assert "bug in the importer" not in outcome.stderr
        assert target.read_text() == imported  # the working import is not replaced by one that does not load
    _write(overrides, EDITS)
    assert _import(spec, target).exit_code == 0  # partial edits and null are not mistakes
