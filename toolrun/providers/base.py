"""What a provider adapter is, and how it finds its endpoint and credentials.

An adapter has two halves: *mapping* (pure functions from the neutral model to a request
body and from a response body or stream events back), unit-tested against recorded
fixtures; and *transport* (``toolrun.providers.transport``), the only part that talks HTTP.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from toolrun.errors import Problem, UserError
from toolrun.messages import ModelRequest, ModelResponse, StreamEvent
from toolrun.providers.transport import HttpxTransport, Transport
from toolrun.secrets import register_secret

EventSink = Callable[[StreamEvent], None]


@dataclass
class ProviderConfig:
    """Where and how to reach a provider. ``api_key`` is registered as a secret for redaction."""

    base_url: str
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ProviderOverrides:
    """A recipe's ``provider:`` section: an internal gateway, another key variable, headers."""

    base_url: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


class Provider(ABC):
    """One wire format. Subclasses set the class attributes and implement ``complete``."""

    name: ClassVar[str]
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[tuple[str, ...]] = ()
    api_key_env: ClassVar[tuple[str, ...]] = ()
    requires_api_key: ClassVar[bool] = True

    def __init__(self, model: str, config: ProviderConfig, transport: Transport | None = None):
        self.model = model
        self.config = config
        self.transport = transport or HttpxTransport()
        register_secret(config.api_key)  # a key given directly (tests, plugins) is redacted too

    @classmethod
    def resolve_config(
        cls, overrides: ProviderOverrides | None = None, environ: Mapping[str, str] | None = None
    ) -> ProviderConfig:
        """Endpoint and key from the recipe's overrides, else the provider's usual variables.

        Raises ``UserError`` naming the variable to set when a required key is missing.
        """
        env = os.environ if environ is None else environ
        overrides = overrides or ProviderOverrides()
        base_url = overrides.base_url or next(
            (env[name] for name in cls.base_url_env if env.get(name)), cls.default_base_url
        )
        key_names = (overrides.api_key_env,) if overrides.api_key_env else cls.api_key_env
        api_key = next((env[name] for name in key_names if env.get(name)), None)
        if api_key is None and cls.requires_api_key:
            raise UserError(
                Problem(None, None, f"no credentials for provider {cls.name!r}",
                        f"set {' or '.join(key_names)} in the environment")
            )
        register_secret(api_key)
        return ProviderConfig(base_url=base_url.rstrip("/"), api_key=api_key, headers=dict(overrides.headers))

    @classmethod
    def has_credentials(cls, overrides: ProviderOverrides | None = None, environ: Mapping[str, str] | None = None) -> bool:
        try:
            cls.resolve_config(overrides, environ)
        except UserError:
            return False
        return True

    @abstractmethod
    async def complete(
        self, request: ModelRequest, *, stream: bool, on_event: EventSink | None = None
    ) -> ModelResponse:
        """Send one request and return the assembled answer (streamed or not)."""

    async def aclose(self) -> None:
        await self.transport.aclose()
