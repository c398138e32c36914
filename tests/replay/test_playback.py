"""The mode rule: replay, live, the recording beside the recipe, or bad input naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrun.core.errors import UserError
from toolrun.providers.anthropic import AnthropicProvider
from toolrun.providers.base import ProviderOverrides
from toolrun.providers.ollama import OllamaProvider
from toolrun.providers.openai_chat import OpenAIChatProvider
from toolrun.replay.playback import check_cassette_provider, choose_mode, offline_config
from toolrun.replay.recording import Cassette

KEY = {"OPENAI_API_KEY": "sk-test-playback-1234"}


def recipe_with_cassette(folder: Path) -> Path:
    recipe = folder / "shop.yaml"
    recipe.write_text("name: shop\n", encoding="utf-8")
    (folder / "shop.cassette.json").write_text("{}", encoding="utf-8")
    return recipe


def choose(recipe: Path, environ: dict, **options):
    defaults = {"replay": None, "live": False, "record": None}
    return choose_mode(OpenAIChatProvider, None, recipe, environ=environ, **{**defaults, **options})


def test_replay_wins_over_credentials(tmp_path: Path):
    choice = choose(tmp_path / "r.yaml", KEY, replay=tmp_path / "x.json")
    assert (choice.mode, choice.cassette, choice.notice) == ("replay", tmp_path / "x.json", None)


def test_credentials_mean_live_even_with_a_recording_beside(tmp_path: Path):
    assert choose(recipe_with_cassette(tmp_path), KEY).mode == "live"


def test_no_credentials_falls_back_to_the_recording_beside_with_a_notice(tmp_path: Path):
    choice = choose(recipe_with_cassette(tmp_path), {})
    assert choice.mode == "replay" and choice.cassette == tmp_path / "shop.cassette.json"
    assert choice.notice.startswith("no OPENAI_API_KEY set: replaying ")
    assert choice.notice.endswith("; set the key for a live run, --live to refuse this")


@pytest.mark.parametrize("options, words", [
    ({"live": True}, "a live run needs credentials"),
    ({"record": Path("out.json")}, "--record needs a live run"),
])
def test_live_and_record_refuse_the_fallback(tmp_path: Path, options: dict, words: str):
    with pytest.raises(UserError) as info:
        choose(recipe_with_cassette(tmp_path), {}, **options)
    problem = info.value.problems[0]
    assert words in problem.message and "set OPENAI_API_KEY" in problem.fix


def test_contradicting_options_are_bad_input(tmp_path: Path):
    with pytest.raises(UserError, match="--live and --replay"):
        choose(tmp_path / "r.yaml", {}, replay=Path("x"), live=True)
    with pytest.raises(UserError, match="--record and --replay"):
        choose(tmp_path / "r.yaml", {}, replay=Path("x"), record=Path("y"))


def test_a_recipe_key_variable_is_the_one_named(tmp_path: Path):
    overrides = ProviderOverrides(api_key_env="GATEWAY_TOKEN")
    with pytest.raises(UserError, match="no GATEWAY_TOKEN set"):
        choose_mode(OpenAIChatProvider, overrides, tmp_path / "r.yaml", replay=None, live=False, record=None, environ=KEY)
    choice = choose_mode(OpenAIChatProvider, overrides, tmp_path / "r.yaml", replay=None, live=False, record=None,
                         environ={"GATEWAY_TOKEN": "tok-123456"})
    assert choice.mode == "live"


def test_a_provider_without_a_key_is_always_live(tmp_path: Path):
    choice = choose_mode(OllamaProvider, None, recipe_with_cassette(tmp_path), replay=None, live=False, record=None, environ={})
    assert choice.mode == "live"


def test_offline_config_reads_no_key_and_keeps_the_endpoint():
    config = offline_config(AnthropicProvider, None, {"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://gw/"})
    assert config.api_key is None and config.base_url == "http://gw"
    assert offline_config(AnthropicProvider, ProviderOverrides(base_url="http://other"), {}).base_url == "http://other"


def test_a_cassette_of_another_provider_is_refused(tmp_path: Path):
    from toolrun.replay.playback import ModeChoice

    cassette = Cassette(model="openai:gpt-4o-mini")
    check_cassette_provider(cassette, ModeChoice("replay", tmp_path / "c.json"), OpenAIChatProvider, None, "openai:gpt-4o")
    with pytest.raises(UserError, match="cannot be replayed as anthropic:claude"):
        check_cassette_provider(cassette, ModeChoice("replay", tmp_path / "c.json"), AnthropicProvider, None, "anthropic:claude")
    with pytest.raises(UserError, match="no ANTHROPIC_API_KEY set"):
        check_cassette_provider(cassette, ModeChoice("replay", tmp_path / "c.json", "fallback notice"),
                                AnthropicProvider, None, "anthropic:claude")
