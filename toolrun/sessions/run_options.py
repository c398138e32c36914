"""``RunOptions``: everything one recipe run is asked to do besides the recipe itself, with its defaults.

``toolrun.run`` and ``toolrun.arun`` take these as keyword arguments (their signatures are
the public API and are tested against this class); inside the package a run's options
travel as one ``RunOptions`` — ``toolrun recipe`` and ``ask``, a chat's answers and every
run of a batch build one and hand it to ``toolrun.sessions.play.run_recipe``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # types only: the options name them, the run imports them
    from toolrun.catalog.model import Catalog
    from toolrun.loop.approval import Approver
    from toolrun.loop.runner import RunObserver
    from toolrun.providers.base import Provider
    from toolrun.providers.transport import Transport

Mode = Literal["auto", "live", "replay"]
MODES: tuple[str, ...] = ("auto", "live", "replay")


@dataclass(frozen=True)
class RunOptions:
    """One run's options; ``toolrun.arun``'s docstring says what each does. Every default means "the recipe's own"."""

    vars: Mapping[str, Any] | None = None
    model: str | Provider | None = None
    mode: Mode = "auto"
    prompt: str | None = None
    tools_dir: str | Path | None = None
    catalog: Catalog | None = None
    observer: RunObserver | None = None
    approver: Approver | None = None
    stream: bool | None = None
    max_turns: int | None = None
    record: str | Path | None = None
    replay: str | Path | None = None
    strict: bool = False
    replay_tools: bool = False
    environ: Mapping[str, str] | None = None  # None: this process's environment
    transport: Transport | None = None
