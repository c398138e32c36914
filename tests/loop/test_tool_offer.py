"""Tool selection in the loop: which tools each request offers, under rank and search, against a scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import textwrap

import pytest

from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.errors import UserError
from toolrun.core.messages import Message, TextPart
from toolrun.core.tool import Tool
from toolrun.loop.runner import RunSettings, run_conversation
from toolrun.loop.tool_offer import FIND_TOOLS_DEFINITION, ToolOffer, ToolSelection
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_chat import OpenAIChatProvider
from toolrun.providers.scripted import ScriptedModel

TOOLS = {  # name: description; every tool runs the same echo function
    "get_weather": "Returns the weather forecast of a city, with temperature and rain.",
    "convert_currency": "Converts an amount of money from one currency to another.",
    "get_flower_inventory": "Returns the flower stock of one shop.",
    "send_email": "Sends an email to one address.",
    "create_ticket": "Opens a support ticket with a title.",
    "list_files": "Lists the files of a folder.",
}


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> list[Tool]:
    folder = tmp_path_factory.mktemp("offer")
    (folder / "echo.py").write_text("def echo(**arguments):\n    return 'ok'\n")
    entries = "".join(textwrap.dedent(f"""\
        - name: {name}
          description: {description} Use it when asked to; it needs nothing else.
          parameters: {{type: object, properties: {{text: {{type: string, description: What to do}}}}}}
          backend: {{python: "echo.py:echo"}}
        """) for name, description in TOOLS.items())
    (folder / "tools.yaml").write_text("tools:\n" + textwrap.indent(entries, "  "))
    return list(load_catalog_or_raise(folder))


def _user(text: str) -> list[Message]:
    return [Message("user", [TextPart(text)])]


def _run(model: ScriptedModel, tools: list[Tool], text: str, selection: ToolSelection | None):
    settings = RunSettings(stream=False, tool_selection=selection)
    return asyncio.run(run_conversation(model, tools, system=None, messages=_user(text), settings=settings,
                                        context=CallContext(environ={})))


def _offered(model: ScriptedModel) -> list[list[str]]:
    return [[tool.name for tool in request.tools] for request in model.requests]


def test_rank_offers_the_most_relevant_tools_plus_always_and_called(tools: list[Tool]) -> None:
    model = ScriptedModel([ScriptedModel.calls([("send_email", {"text": "hi"})]), ScriptedModel.text("done")])
    result = _run(model, tools, "What is the weather forecast in Paris, and convert 20 euros to a currency?",
                  ToolSelection(max_tools=2, tools_always=("list_*",)))
    assert result.stop_reason == "stop"
    # a call of a tool that was not offered still runs, and is offered from then on (catalog order)
    assert result.tool_calls[0].name == "send_email" and not result.tool_calls[0].is_error
    assert _offered(model) == [["get_weather", "convert_currency", "list_files"],
                               ["get_weather", "convert_currency", "send_email", "list_files"]]


@pytest.mark.parametrize(("mode", "first"), [("rank", ["get_weather", "convert_currency", "create_ticket"]),
                                             ("search", ["find_tools", "create_ticket"])])
def test_the_tool_tool_choice_names_is_offered_in_the_request_that_forces_it(tools: list[Tool], mode, first) -> None:
    model = ScriptedModel([ScriptedModel.text("done")])
    settings = RunSettings(stream=False, tool_choice="create_ticket", tool_selection=ToolSelection(max_tools=2, mode=mode))
    asyncio.run(run_conversation(model, tools, system=None, messages=_user("weather forecast, convert currency"),
                                 settings=settings, context=CallContext(environ={})))
    assert model.requests[0].settings.tool_choice == "create_ticket"
    assert _offered(model) == [first], "a provider refuses a request forcing a tool it does not offer"


def test_without_a_selection_every_tool_is_offered(tools: list[Tool]) -> None:
    model = ScriptedModel([ScriptedModel.text("done")])
    _run(model, tools, "weather", None)
    assert _offered(model) == [list(TOOLS)]


def test_search_mode_offers_find_tools_and_then_what_it_found(tools: list[Tool]) -> None:
    model = ScriptedModel([ScriptedModel.calls([("find_tools", {"query": "flower stock"})]),
                           ScriptedModel.calls([("get_flower_inventory", {"text": "rose"})]),
                           ScriptedModel.text("done")])
    result = _run(model, tools, "How many roses are left?", ToolSelection(max_tools=1, mode="search"))
    found = json.loads(result.tool_calls[0].result)
    assert found == {"tools": [{"name": "get_flower_inventory",
                                "description": TOOLS["get_flower_inventory"] + " Use it when asked to; it needs nothing else."}]}
    assert _offered(model) == [["find_tools"], ["find_tools", "get_flower_inventory"],
                               ["find_tools", "get_flower_inventory"]]
    assert model.requests[0].tools[0] == FIND_TOOLS_DEFINITION
    assert not result.tool_calls[1].is_error


def test_a_search_without_a_query_is_an_error_the_model_can_fix(tools: list[Tool]) -> None:
    offer = ToolOffer(tools, ToolSelection(mode="search"))
    result, failed = offer.find({"q": "weather"})
    assert failed and "needs a 'query'" in result
    assert offer.find(None)[1]


def test_the_offer_never_passes_the_providers_limit(tools: list[Tool]) -> None:
    offer = ToolOffer(tools, ToolSelection(max_tools=3))
    history = _user("weather forecast, currency, flower stock, email, ticket, files")
    three = [d.name for d in offer.definitions(history)]
    two = [d.name for d in offer.definitions(history, limit=2)]
    assert len(three) == 3 and len(two) == 2 and set(two) < set(three)


def test_openai_refuses_more_than_128_tools_before_any_request(tools: list[Tool]) -> None:
    many = [dataclasses.replace(tools[0], name=f"tool_{index}") for index in range(129)]
    provider = OpenAIChatProvider("gpt-4o", ProviderConfig(base_url="http://127.0.0.1:9", api_key="k"))
    with pytest.raises(UserError, match=r"129 tools for provider 'openai', which accepts at most 128 per request"):
        asyncio.run(run_conversation(provider, many, system=None, messages=_user("hi"),
                                     settings=RunSettings(stream=False), context=CallContext(environ={})))
    with pytest.raises(UserError, match="lower settings.tool_selection.max_tools"):
        asyncio.run(run_conversation(provider, many, system=None, messages=_user("hi"),
                                     settings=RunSettings(stream=False, tool_selection=ToolSelection(max_tools=128)),
                                     context=CallContext(environ={})))


def test_a_selection_naming_no_tool_or_an_unknown_mode_is_refused(tools: list[Tool]) -> None:
    for selection, message in ((ToolSelection(tools_always=("nope",)), "tools_always names 'nope'"),
                               (ToolSelection(mode="guess"), "mode 'guess' is not one of rank, search"),
                               (ToolSelection(max_tools=0), "max_tools is 0")):
        with pytest.raises(UserError, match=message):
            _run(ScriptedModel([ScriptedModel.text("done")]), tools, "hi", selection)


def test_no_tools_offer_nothing() -> None:
    assert ToolOffer([], None).definitions(_user("anything")) == []


def test_rank_fills_its_slots_when_few_tools_match_the_question(tools: list[Tool]) -> None:
    # "weather" matches one tool; the other two of max_tools=3 slots go to the rest in catalog order, so a
    # question that shares no word with the right tool still gets tools to choose from
    model = ScriptedModel([ScriptedModel.text("done")])
    _run(model, tools, "weather in Paris?", ToolSelection(max_tools=3))
    assert _offered(model) == [["get_weather", "convert_currency", "get_flower_inventory"]]
    model = ScriptedModel([ScriptedModel.text("done")])
    _run(model, tools, "zzz qqq", ToolSelection(max_tools=2))
    assert _offered(model) == [["get_weather", "convert_currency"]]
