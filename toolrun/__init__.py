"""toolrun: a tool runner for LLM tool calling, configured entirely in YAML.

The public API is the names in ``__all__``; everything else is internal::

    import toolrun

    catalog = toolrun.load_catalog("tools.d")                  # LoadError(.problems) if broken
    out = toolrun.call(catalog, "get_flower_inventory", {"city": "北京"})   # .result, .is_error
    result = toolrun.run("recipes/inventory.yaml", vars={"question": "上海有多少玫瑰?"})
    print(result.final, result.usage, result.to_json())

    # offline, with the real tools and a scripted model:
    model = toolrun.ScriptedModel([
        toolrun.ScriptedModel.calls([("get_flower_inventory", {"city": "上海"})]),
        "上海: 百合 80, 康乃馨 120",
    ])
    result = toolrun.run("recipes/inventory.yaml", model=model)

Async twins: ``await toolrun.arun(...)``, ``await toolrun.acall(...)``. Names are
imported on first use, so ``import toolrun`` stays cheap (the command line's start-up).
"""

# No __future__, typing or importlib here: `toolrun --version` imports only this package and
# toolrun.cli; those three were over a third of its start-up beyond Python's own.
import sys as _sys  # not a public name

TYPE_CHECKING = False
__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "load_catalog": "toolrun.api",
    "load_recipe": "toolrun.api",
    "run": "toolrun.api",
    "arun": "toolrun.sessions.play",
    "call": "toolrun.api",
    "acall": "toolrun.api",
    "CallResult": "toolrun.api",
    "Catalog": "toolrun.catalog.model",
    "Tool": "toolrun.core.tool",
    "Recipe": "toolrun.sessions.recipe",
    "RunResult": "toolrun.loop.results",
    "TurnRecord": "toolrun.loop.results",
    "ToolCallRecord": "toolrun.loop.results",
    "RunObserver": "toolrun.loop.runner",
    "ScriptedModel": "toolrun.providers.scripted",
    "ToolError": "toolrun.core.errors",
    "ToolrunError": "toolrun.core.errors",
    "UserError": "toolrun.core.errors",
    "LoadError": "toolrun.core.errors",
    "ProviderError": "toolrun.core.errors",
    "Problem": "toolrun.core.errors",
}

__all__ = [
    "__version__",
    "load_catalog",
    "load_recipe",
    "run",
    "arun",
    "call",
    "acall",
    "CallResult",
    "Catalog",
    "Tool",
    "Recipe",
    "RunResult",
    "TurnRecord",
    "ToolCallRecord",
    "RunObserver",
    "ScriptedModel",
    "ToolError",
    "ToolrunError",
    "UserError",
    "LoadError",
    "ProviderError",
    "Problem",
]

if TYPE_CHECKING:
    from typing import Any

    from toolrun.api import CallResult, acall, call, load_catalog, load_recipe, run
    from toolrun.catalog.model import Catalog
    from toolrun.core.errors import LoadError, Problem, ProviderError, ToolError, ToolrunError, UserError
    from toolrun.core.tool import Tool
    from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
    from toolrun.loop.runner import RunObserver
    from toolrun.providers.scripted import ScriptedModel
    from toolrun.sessions.play import arun
    from toolrun.sessions.recipe import Recipe


def __getattr__(name: str) -> "Any":
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolrun' has no attribute {name!r}")
    __import__(module)
    value = getattr(_sys.modules[module], name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
