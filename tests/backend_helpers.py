"""Tools built in code for backend and execution tests (the loader has its own tests)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolrun.backends.base import CallContext
from toolrun.core.tool import Annotations, BackendSpec, SourceLocation, Tool
from toolrun.loop.execution import ToolOutcome, execute_call


def make_tool(kind: str, config: dict[str, Any], *, folder: Path, name: str = "t",
              properties: dict[str, Any] | None = None, required: list[str] | None = None,
              timeout: float = 30.0, max_output: int = 20_000, confirm: bool = False,
              annotations: Annotations | None = None) -> Tool:
    """A Tool as the loader would build it from ``folder/tools.yaml``."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        parameters["required"] = required
    return Tool(name=name, description=f"{name} test tool", parameters=parameters,
                backend=BackendSpec(kind, config), source=SourceLocation(folder / "tools.yaml", 1),
                timeout=timeout, max_output=max_output, confirm=confirm, annotations=annotations)


def call(tool: Tool, arguments: Any, *, environ: dict[str, str] | None = None,
         allow_hosts: list[str] | None = None, approver: Any = None) -> ToolOutcome:
    """Run execute_call to completion from sync test code."""
    context = CallContext(environ=environ if environ is not None else {}, allow_hosts=allow_hosts)
    return asyncio.run(execute_call(tool, arguments, context, approver))
