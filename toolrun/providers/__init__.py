"""Provider adapters, one module per wire format, registered by name like plugins."""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.metadata import entry_points

from toolrun.errors import Problem, UserError
from toolrun.providers.base import Provider, ProviderConfig, ProviderOverrides

_BUILT_IN = {
    "openai": "toolrun.providers.openai_chat:OpenAIChatProvider",
    "openai-responses": "toolrun.providers.openai_responses:OpenAIResponsesProvider",
    "anthropic": "toolrun.providers.anthropic:AnthropicProvider",
    "gemini": "toolrun.providers.gemini:GeminiProvider",
    "ollama": "toolrun.providers.ollama:OllamaProvider",
}


@cache
def provider_targets() -> dict[str, str]:
    targets = dict(_BUILT_IN)
    for entry in entry_points(group="toolrun.providers"):
        targets.setdefault(entry.name, entry.value)
    return targets


def get_provider_class(name: str) -> type[Provider]:
    """The adapter class registered as ``name``; UserError listing the known ones otherwise."""
    targets = provider_targets()
    if name not in targets:
        raise UserError(Problem(None, None, f"unknown provider {name!r}",
                                f"use one of: {', '.join(sorted(targets))} (as provider:model)"))
    module_name, _, attribute = targets[name].partition(":")
    module = __import__(module_name, fromlist=[attribute])
    return getattr(module, attribute)


def split_model(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o-mini"`` -> ("openai", "gpt-4o-mini"). The model part may contain colons."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise UserError(Problem(None, None, f"model {spec!r} is not of the form provider:model",
                                "write e.g. openai:gpt-4o-mini or anthropic:claude-sonnet-4-5"))
    return provider, model


__all__ = ["Provider", "ProviderConfig", "ProviderOverrides", "get_provider_class", "provider_targets", "split_model"]
