"""The Python client example of docs/mcp.md, run as written against a real ``toolrun mcp``: its ${env:} tool works."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

TOKEN_TOOL = """
name: get_flower_inventory
description: >-
  Returns the stock of one city's shop, read with the team's token. Use it when asked about
  stock; do not use it for prices or orders.
parameters: {type: object, properties: {city: {type: string, description: City name}}, required: [city]}
annotations: {read_only: true}
backend:
  shell:
    argv: [sh, -c, 'test "$TOKEN" = secret-0123456789 && echo "stock of $0 read with the token"', "{{ city }}"]
    env: {TOKEN: "${env:INVENTORY_TOKEN}"}
"""


@pytest.mark.integration  # a real toolrun mcp behind the SDK's client: seconds, more on a busy machine
def test_the_python_client_example_passes_the_environment_the_tools_read(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    example = re.search(r"```python\n(from mcp import|import os\n\nfrom mcp import.*?)```",
                        (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8"), re.S)
    assert example, "docs/mcp.md has no Python client example"
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "stock.yaml").write_text(TOKEN_TOOL, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INVENTORY_TOKEN", "secret-0123456789")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
    body = textwrap.indent(example.group(1), "    ")
    namespace: dict = {}
    exec(f"async def example():\n{body}\n    return result\n", namespace)  # noqa: S102 - our own docs
    result = asyncio.run(asyncio.wait_for(namespace["example"](), 60))
    text = result.content[0].text
    assert not result.is_error, text
    assert "stock of 北京 read with the token" in text
