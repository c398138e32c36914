"""The one plugin registry behind backends and providers: built-ins, entry points, clear errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from toolrun.backends import backend_targets, get_backend
from toolrun.backends.python import PythonBackend
from toolrun.core.errors import UserError
from toolrun.core.registry import PluginRegistry, UnknownPlugin
from toolrun.providers import get_provider_class, provider_targets


def _install_plugin(site: Path, group: str, name: str, target: str) -> None:
    """A real (if tiny) installed distribution declaring one entry point."""
    dist_info = site / "toolrun_test_plugin-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: toolrun-test-plugin\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[{group}]\n{name} = {target}\n")
    (site / "toolrun_test_plugin.py").write_text("class Echo:\n    label = 'echo'\n\nclass Python:\n    label = 'impostor'\n")


@pytest.fixture
def site(tmp_path: Path):
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("toolrun_test_plugin", None)


def test_a_third_party_entry_point_is_found_and_loaded_lazily(site: Path) -> None:
    _install_plugin(site, "toolrun.test_things", "echo", "toolrun_test_plugin:Echo")
    registry: PluginRegistry[Any] = PluginRegistry("thing", "toolrun.test_things", {"json": "json:JSONDecoder"})
    assert registry.targets() == {"json": "json:JSONDecoder", "echo": "toolrun_test_plugin:Echo"}
    assert "toolrun_test_plugin" not in sys.modules  # listing names imports nothing
    assert registry.load("echo").label == "echo"


def test_a_plugin_cannot_replace_a_built_in(site: Path) -> None:
    _install_plugin(site, "toolrun.test_things", "python", "toolrun_test_plugin:Python")
    registry: PluginRegistry[Any] = PluginRegistry("thing", "toolrun.test_things", {"python": "json:JSONDecoder"})
    assert registry.targets()["python"] == "json:JSONDecoder"


def test_an_unknown_name_is_a_key_error_that_lists_the_known_ones() -> None:
    registry: PluginRegistry[Any] = PluginRegistry("thing", "toolrun.test_no_such_group", {"b": "json:JSONDecoder",
                                                                                          "a": "json:JSONEncoder"})
    with pytest.raises(KeyError) as raised:
        registry.load("c")
    assert isinstance(raised.value, UnknownPlugin)
    assert str(raised.value) == "no thing named 'c' is installed (known: a, b)"


def test_backends_and_providers_use_the_registry() -> None:
    assert list(backend_targets())[:3] == ["python", "shell", "http"]
    assert isinstance(get_backend("python"), PythonBackend)
    with pytest.raises(UnknownPlugin, match="no backend named 'pyhton'"):
        get_backend("pyhton")
    assert {"openai", "anthropic", "gemini", "ollama", "openai-responses"} <= set(provider_targets())
    with pytest.raises(UserError) as raised:
        get_provider_class("opneai")
    assert "unknown provider 'opneai'" in str(raised.value.problems[0].message)
    assert "anthropic, gemini, ollama, openai, openai-responses" in str(raised.value.problems[0].fix)


def test_the_built_ins_are_the_entry_points_pyproject_declares() -> None:
    # Listed twice on purpose (the registry knows its own without reading package metadata; the
    # entry points show a plugin author the road): the two lists must not drift apart.
    import tomllib

    from toolrun.backends import BACKENDS
    from toolrun.providers import PROVIDERS

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))
    declared = pyproject["project"]["entry-points"]
    assert declared["toolrun.backends"] == BACKENDS._built_in
    assert declared["toolrun.providers"] == PROVIDERS._built_in


def test_the_extension_interface_is_one_public_module() -> None:
    import toolrun.plugins as plugins
    from toolrun.backends.http import HttpBackend
    from toolrun.providers.openai_chat import OpenAIChatProvider
    from toolrun.providers.transport import HttpxTransport

    assert set(plugins.__all__) >= {"Backend", "Provider", "StreamAssembler", "Transport"}
    assert issubclass(HttpBackend, plugins.Backend) and issubclass(OpenAIChatProvider, plugins.Provider)
    assert issubclass(HttpxTransport, plugins.Transport)
