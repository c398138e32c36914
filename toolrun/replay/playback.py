"""How a recipe run reaches its model: live, live and recorded, or replayed from a cassette.

``choose_mode`` applies the rule users script against: ``--replay F`` replays F; else the
run is live when the provider has credentials; else the recording beside the recipe
(``NAME.cassette.json``) is replayed with a visible notice, unless ``--live`` forbids it;
else it is bad input naming the variable to set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from toolrun.core.errors import Problem, UserError
from toolrun.core.messages import ModelRequest
from toolrun.providers.base import Provider, ProviderConfig, ProviderOverrides
from toolrun.replay.recording import Cassette, cassette_beside


@dataclass
class ModeChoice:
    """Live or replay, the cassette replayed, and the notice to show for a fallback."""

    mode: str  # "live" | "replay"
    cassette: Path | None = None
    notice: str | None = None


def choose_mode(
    provider_class: type[Provider],
    overrides: ProviderOverrides | None,
    recipe_path: Path,
    *,
    replay: Path | None,
    live: bool,
    record: Path | None,
    environ: Mapping[str, str] | None = None,
    model_line: int | None = None,
) -> ModeChoice:
    """Decide how to reach the model. Raises UserError for a combination that cannot work."""
    if replay is not None:
        if live:
            raise UserError(Problem(None, None, "--live and --replay contradict each other",
                                    "use --replay FILE for an offline run, or --live for a live one"))
        if record is not None:
            raise UserError(Problem(None, None, "--record and --replay together would record nothing new",
                                    "drop --record, or drop --replay to record a live run"))
        return ModeChoice("replay", replay)
    if provider_class.has_credentials(overrides, environ):
        return ModeChoice("live")
    key_names = credential_names(provider_class, overrides)
    beside = cassette_beside(recipe_path)
    if not live and record is None and beside.is_file():
        notice = (f"no {key_names} set: replaying {beside}; "
                  "set the key for a live run, --live to refuse this")
        return ModeChoice("replay", beside, notice)
    # A live run records on its own account (chat keeps each answer for /save): only a --record of the user's is named.
    reason = "--record needs a live run" if record is not None and not live else "a live run needs credentials"
    fix = f"set {key_names} in the environment"
    if not live and record is None:
        fix += f" (or ship a recording beside the recipe: {beside.name}, made with --record)"
    raise UserError(Problem(recipe_path, model_line, f"no {key_names} set: {reason}", fix))


def credential_names(provider_class: type[Provider], overrides: ProviderOverrides | None) -> str:
    """The variable(s) that hold the provider's key, as a user would set them."""
    if overrides is not None and overrides.api_key_env:
        return overrides.api_key_env
    return " or ".join(provider_class.api_key_env) or "the API key variable"


def offline_config(provider_class: type[Provider], overrides: ProviderOverrides | None,
                   environ: Mapping[str, str] | None = None) -> ProviderConfig:
    """The endpoint a replay pretends to reach: no key is needed, none is read."""
    env = os.environ if environ is None else environ
    overrides = overrides or ProviderOverrides()
    base_url = overrides.base_url or next(
        (env[name] for name in provider_class.base_url_env if env.get(name)), provider_class.default_base_url)
    return ProviderConfig(base_url=base_url.rstrip("/"), api_key=None, headers=dict(overrides.headers))


def follow_recorded_endpoint(provider: Provider, cassette: Cassette) -> None:
    """Point a replaying provider at the endpoint its recording was made with, when only the address differs.

    A request body may depend on the endpoint (OpenAI's own API takes ``max_completion_tokens``, a compatible
    server ``max_tokens``): a run recorded through ``OPENAI_BASE_URL`` and replayed where it is not set (CI)
    would otherwise send other requests than its recording holds, and diverge.
    """
    if not cassette.exchanges or not isinstance(recorded := cassette.exchanges[0].request.get("url"), str):
        return
    base = provider.config.base_url
    now = provider.build_request(ModelRequest(provider.model, None, [], []), stream=cassette.exchanges[0].streamed).url
    suffix = now[len(base):] if now.startswith(base) else ""
    if suffix and recorded.endswith(suffix) and recorded != now:
        provider.config.base_url = recorded[: len(recorded) - len(suffix)]


def check_cassette_provider(cassette: Cassette, choice: ModeChoice, provider_class: type[Provider],
                            overrides: ProviderOverrides | None, spec: str) -> None:
    """A recording speaks one provider's wire format: replaying it through another cannot work."""
    recorded_provider = (cassette.model or "").partition(":")[0]
    if not recorded_provider or recorded_provider == provider_class.name:
        return
    if choice.notice:  # the fallback would not fit: the run needs this provider's credentials after all
        key_names = credential_names(provider_class, overrides)
        raise UserError(Problem(None, None, f"no {key_names} set: {spec} needs a live run "
                                f"({choice.cassette} was recorded with {cassette.model})",
                                f"set {key_names} in the environment"))
    raise UserError(Problem(choice.cassette, None,
                            f"the recording was made with {cassette.model}; it cannot be replayed as {spec}",
                            f"replay it with --model {cassette.model}, or record a new one with --record"))
