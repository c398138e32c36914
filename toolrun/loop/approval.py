"""Human approval of tool calls: ``confirm: true`` or a destructive annotation.

An ``Approver`` is any async callable ``(tool, arguments) -> bool``: True runs the call,
False denies it and the model gets the error result "the user denied this call". With no
approver at all, such a call is refused (nobody can approve it). The terminal prompt of the
command line is ``toolrun.cli.approval_prompt.TerminalApprover``; a server asks its client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolrun.core.tool import Tool

Approver = Callable[["Tool", dict[str, Any]], Awaitable[bool]]


async def approve_all(tool: Tool, arguments: dict[str, Any]) -> bool:
    """An approver that says yes to every call (``--yes``)."""
    return True
