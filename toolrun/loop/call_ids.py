"""Unique tool-call ids for a whole run.

Providers send ids that cannot be trusted to tell calls apart: Gemini sends none, some
OpenAI-compatible servers send ``""`` or repeat ``"0"``, ``"1"`` in every turn. The result
of a call is tied to its call only by the id, so the runner rewrites ``ToolCall.id`` to a
value unique in the run and keeps what the provider sent in ``provider_id``.
"""

from __future__ import annotations

from toolrun.core.messages import ToolCall


class CallIdAllocator:
    """Hands out run-unique ids; keeps a provider's id when it is new and non-empty.

    Made-up ids depend only on the run's history (``call_toolrun_3``), never on chance: they
    travel in the follow-up requests, so a replay must make the same ones as its recording.
    """

    def __init__(self, prefix: str = "call_toolrun_") -> None:
        self._prefix = prefix
        self._seen: set[str] = set()

    def _fresh(self) -> str:
        number = len(self._seen)
        while True:
            candidate = f"{self._prefix}{number}"
            if candidate not in self._seen:
                return candidate
            number += 1

    def assign(self, call: ToolCall) -> ToolCall:
        """Give ``call`` a run-unique ``id`` (in place), remembering the provider's own id."""
        if call.provider_id is None and call.id:
            call.provider_id = call.id  # an adapter that filled only ``id``
        wanted = call.provider_id or ""
        call.id = wanted if wanted and wanted not in self._seen else self._fresh()
        self._seen.add(call.id)
        return call

    def assign_all(self, calls: list[ToolCall]) -> list[ToolCall]:
        """Assign ids to one turn's calls, in order."""
        return [self.assign(call) for call in calls]
