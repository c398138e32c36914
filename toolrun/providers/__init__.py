"""Provider adapters, one module per wire format, registered by name like plugins."""

from __future__ import annotations

from toolrun.core.errors import Problem, UserError
from toolrun.core.registry import PluginRegistry, UnknownPlugin
from toolrun.providers.base import Provider, ProviderConfig, ProviderOverrides

SCRIPTED_PROVIDER = "scripted"  # --model scripted:FILE: a script file (providers/scripted_file.py), not a registered provider
PROVIDERS: PluginRegistry[type[Provider]] = PluginRegistry(
    "provider",
    "toolrun.providers",
    {
        "openai": "toolrun.providers.openai_chat:OpenAIChatProvider",
        "openai-responses": "toolrun.providers.openai_responses:OpenAIResponsesProvider",
        "anthropic": "toolrun.providers.anthropic:AnthropicProvider",
        "gemini": "toolrun.providers.gemini:GeminiProvider",
        "ollama": "toolrun.providers.ollama:OllamaProvider",
    },
)


def provider_targets() -> dict[str, str]:
    """Provider name -> "module:Class", built-ins first, then installed plugins."""
    return PROVIDERS.targets()


def get_provider_class(name: str) -> type[Provider]:
    """The adapter class registered as ``name``; UserError listing the known ones otherwise."""
    try:
        return PROVIDERS.load(name)
    except UnknownPlugin as exc:
        raise UserError(Problem(None, None, f"unknown provider {name!r}",
                                f"use one of: {', '.join(exc.known)} (as provider:model)")) from None


def split_model(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o-mini"`` -> ("openai", "gpt-4o-mini"). The model part may contain colons."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise UserError(Problem(None, None, f"model {spec!r} is not of the form provider:model",
                                "write e.g. openai:gpt-4o-mini or anthropic:claude-sonnet-4-5"))
    return provider, model


__all__ = ["PROVIDERS", "SCRIPTED_PROVIDER", "Provider", "ProviderConfig", "ProviderOverrides", "get_provider_class",
           "provider_targets", "split_model"]
