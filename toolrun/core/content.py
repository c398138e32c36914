"""Blocks of a tool result that are not text: images, audio and embedded resources, as MCP writes them.

An MCP server may answer a call with such blocks beside its text. They travel with the
result unchanged (``wire`` is the MCP block: ``{"type": "image", "data": <base64>,
"mimeType": ...}``, ``{"type": "audio", ...}``, ``{"type": "resource", "resource": {uri,
mimeType?, text | blob}}``, ``{"type": "resource_link", ...}``), so a provider that takes
images in tool results gets the image, an MCP client gets the block as it came, and a
provider that takes only text gets ``note`` instead. ``MAX_CONTENT_BYTES`` caps the decoded
size of one result's blocks together: what is over it is named in a note and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_CONTENT_BYTES = 5 * 1024 * 1024  # decoded; Anthropic's own limit for one image
BLOCK_TYPES = frozenset({"image", "audio", "resource", "resource_link"})


def _decoded_size(encoded: str) -> int:
    """Bytes of a base64 text once decoded, without decoding it."""
    length = len(encoded.rstrip("="))
    return length * 3 // 4


def size_text(size: int) -> str:
    """``68 bytes``, ``12.3 KB``, ``4.0 MB``."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class ContentBlock:
    """One non-text block of a tool's result; ``wire`` is the MCP content block, JSON-ready."""

    wire: dict[str, Any]

    @property
    def kind(self) -> str:
        """``image``, ``audio``, ``resource`` or ``resource_link``."""
        return str(self.wire.get("type"))

    @property
    def resource(self) -> dict[str, Any]:
        embedded = self.wire.get("resource")
        return embedded if isinstance(embedded, dict) else {}

    @property
    def mime_type(self) -> str:
        mime = self.wire.get("mimeType") or self.resource.get("mimeType")
        return str(mime) if mime else "application/octet-stream"

    @property
    def base64_data(self) -> str | None:
        """The base64 bytes of an image, audio or blob resource (None for text and links)."""
        data = self.wire.get("data") if self.kind in ("image", "audio") else self.resource.get("blob")
        return data if isinstance(data, str) else None

    @property
    def size(self) -> int:
        """Decoded bytes: of the data, the blob, or the resource's text in UTF-8."""
        data = self.base64_data
        if data is not None:
            return _decoded_size(data)
        text = self.resource.get("text")
        return len(text.encode("utf-8")) if isinstance(text, str) else 0

    def describe(self) -> str:
        """``an image (image/png, 68 bytes)``; a resource also names its uri."""
        article = "an" if self.kind[0] in "aeiou" else "a"
        uri = self.wire.get("uri") or self.resource.get("uri")
        where = f" {uri}" if uri else ""
        return f"{article} {self.kind.replace('_', ' ')}{where} ({self.mime_type}, {size_text(self.size)})"

    def note(self) -> str:
        """What a model whose tool results carry only text is told instead of the block."""
        return f"[the tool also returned {self.describe()}, which this model cannot be shown]"


def capped_blocks(wires: Iterable[dict[str, Any]], limit: int = MAX_CONTENT_BYTES) -> tuple[list[ContentBlock], list[str]]:
    """The blocks that fit in ``limit`` decoded bytes together, and a note for each one that did not."""
    kept: list[ContentBlock] = []
    notes: list[str] = []
    total = 0
    for wire in wires:
        block = ContentBlock(wire)
        if total + block.size > limit:
            notes.append(f"[the tool also returned {block.describe()}, dropped: over the {size_text(limit)} "
                         "toolrun keeps of one result's images, audio and resources]")
            continue
        total += block.size
        kept.append(block)
    return kept, notes


def blocks_from_json(value: Any) -> list[ContentBlock]:
    """Blocks read back from a transcript or run log (``content`` of a call), ignoring what is not one."""
    if not isinstance(value, list):
        return []
    return [ContentBlock(item) for item in value if isinstance(item, dict) and item.get("type") in BLOCK_TYPES]


def shown_as_image(block: ContentBlock, accepted: frozenset[str]) -> bool:
    """An image block with its bytes inline, of a type the format's images accept."""
    return block.kind == "image" and block.base64_data is not None and block.mime_type in accepted


def text_with_notes(text: str, blocks: Iterable[ContentBlock]) -> str:
    """A result's text with a note for each block, for formats whose tool results carry only text."""
    notes = [block.note() for block in blocks]
    return "\n".join([text, *notes] if text else notes)
