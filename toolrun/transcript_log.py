"""``--transcript FILE``: a run written as it happens, one JSON event per line (JSON Lines).

Each line is flushed when its event happens, so a crash or a Ctrl-C loses nothing that was
already done. Every line is a JSON object with an ``"event"`` key, secrets redacted,
``ensure_ascii=False``:

``run_start``       ``{recipe, model, mode, started_at}``
``model_response``  ``{turn, stop_reason, text, usage: {input_tokens, output_tokens},
                    tool_calls: [{id, name, arguments}]}`` — what the model asked for
``tool_call``       ``{turn, id, name, arguments, result, is_error, duration_ms}`` — one
                    finished call (calls of one turn may finish in any order)
``divergence``      ``{exchange, kind, path, recorded, now, message}`` — replay only
``notice``          ``{message}`` — e.g. the replay fallback
``run_end``         the whole transcript document (``final``, ``stop_reason``, ``usage``,
                    ``turns``, ``error`` ...) plus ``divergences`` when replaying
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from toolrun.messages import ModelResponse
from toolrun.runner import RunObserver, ToolCallRecord
from toolrun.secrets import redact
from toolrun.transcript import tool_call_document


class TranscriptLog(RunObserver):
    """Appends the events of one run to a JSON Lines file, flushing after each line."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream: TextIO | None = self.path.open("w", encoding="utf-8")
        self._turn = 0

    def write(self, event: str, **fields: Any) -> None:
        """One event line, flushed to the operating system at once."""
        if self._stream is None:
            return
        line = json.dumps(redact({"event": event, **fields}), ensure_ascii=False, default=str)
        self._stream.write(line + "\n")
        self._stream.flush()

    def run_start(self, *, recipe: str, model: str, mode: str) -> None:
        self.write("run_start", recipe=recipe, model=model, mode=mode,
                   started_at=datetime.now(UTC).isoformat(timespec="seconds"))

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        self._turn = turn_index + 1
        self.write(
            "model_response",
            turn=self._turn,
            stop_reason=response.stop_reason,
            text=response.message.text,
            usage={"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
            tool_calls=[
                {"id": call.id, "name": call.name,
                 "arguments": call.arguments if call.arguments is not None else call.raw_arguments}
                for call in response.message.tool_calls
            ],
        )

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        self.write("tool_call", turn=self._turn, **tool_call_document(record))

    def run_end(self, document: dict[str, Any]) -> None:
        self.write("run_end", **document)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
