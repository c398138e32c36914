"""A small MCP server for the example toolset tickets.yaml: an in-memory helpdesk, offline.

Written with the official ``mcp`` SDK, as a team's own server would be; toolrun starts it
over stdio (``python ticket_server.py``) and uses its tools like any others. Run it alone
with ``python tools.d/ticket_server.py`` and talk JSON-RPC on stdin, or point any MCP
client at it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

TicketId = Annotated[str, Field(pattern=r"^T-\d{4}$", description="The ticket's id, e.g. T-1001.")]
server = MCPServer("tickets", instructions="The helpdesk tickets of the ops team (an in-memory example).")

TICKETS: dict[str, dict[str, str]] = {
    "T-1001": {"id": "T-1001", "title": "checkout latency above 2 s in production", "status": "open", "service": "checkout"},
    "T-1002": {"id": "T-1002", "title": "payments webhook retries pile up", "status": "open", "service": "payments"},
    "T-1003": {"id": "T-1003", "title": "search index rebuild finished", "status": "closed", "service": "search"},
}


@server.tool(
    title="Search tickets",
    description=(
        "Finds helpdesk tickets whose title or service contains a word, newest first, with their id, "
        "title, status and service. Use it when someone asks which tickets exist about a service or a "
        "symptom. Do not use it to read one ticket you already know the id of (use get_ticket) or to "
        "change a ticket. It searches titles and service names only, at most 20 tickets."
    ),
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
)
def search_tickets(
    query: Annotated[str, Field(min_length=1, description="A word of the title or a service name, e.g. checkout.")],
    status: Annotated[Literal["open", "closed", "any"], Field(description="Only tickets with this status; any for all.")] = "any",
) -> dict[str, list[dict[str, str]]]:
    word = query.lower()
    found = [t for t in reversed(TICKETS.values())
             if (word in t["title"].lower() or word in t["service"]) and status in (t["status"], "any")]
    return {"tickets": found[:20]}


@server.tool(
    title="Get a ticket",
    description=(
        "Returns one helpdesk ticket by its id (for example T-1001): title, status and service. Use it "
        "when the user names a ticket id or after search_tickets found one. Do not use it to search; "
        "an unknown id is an error."
    ),
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
)
def get_ticket(ticket_id: TicketId) -> dict[str, str]:
    if ticket_id not in TICKETS:
        raise ToolError(f"no ticket {ticket_id}")  # an anticipated failure: the model reads this message
    return TICKETS[ticket_id]


@server.tool(
    title="Close a ticket",
    description=(
        "Closes one open helpdesk ticket with a resolution note and returns the updated ticket. Use it "
        "only when a person asks to close a ticket they name. Do not use it to search or read tickets. "
        "A closed ticket cannot be reopened with this tool."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
)
def close_ticket(
    ticket_id: TicketId,
    resolution: Annotated[str, Field(min_length=5, description="One sentence saying how it was resolved.")],
) -> dict[str, str]:
    if ticket_id not in TICKETS:
        raise ToolError(f"no ticket {ticket_id}")  # an anticipated failure: the model reads this message
    TICKETS[ticket_id] = {**TICKETS[ticket_id], "status": "closed", "resolution": resolution}
    return TICKETS[ticket_id]


if __name__ == "__main__":
    server.run()
