from __future__ import annotations

import gc
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.loopback import Handler, LoopbackServer
from toolrun.core.secrets import Redactor, redacting

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_SESSION_DATA: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """No test writes to the real home: every run of the session (subprocesses inherit the
    environment) logs to a database in a temporary folder, removed when the session ends."""
    folder = tempfile.mkdtemp(prefix="toolrun-tests-")
    _SESSION_DATA.append(folder)
    os.environ["TOOLRUN_LOGS"] = str(Path(folder) / "logs.db")
    os.environ["XDG_DATA_HOME"] = str(Path(folder) / "data")  # a test that unsets TOOLRUN_LOGS lands here
    os.environ["TOOLRUN_CACHE_DIR"] = str(Path(folder) / "cache")  # the catalog cache, likewise
    # Where bytecode writing is off (PYTHONDONTWRITEBYTECODE), each toolrun command and MCP server a
    # test starts compiled toolrun's modules again (a sixth of the suite's time): the children may
    # write them (into __pycache__, which git ignores), as Python does by default. A cache prefix
    # would not do: it hides the bytecode pip compiled for the dependencies, and costs as much.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # Started in the background (`python -m pytest &` in a script ignores SIGINT, and its children inherit that):
    # the tests that press Ctrl-C on a toolrun process need the signal to reach it, as it does from a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In a fresh clone, hypothesis first works out which characters UTF-8 encodes and the category of each
    (the ``unicode_data`` folder of its storage, ``.hypothesis``): about 4 s of CPU, which each xdist worker
    spent again at its first text strategy, both at once. The process that starts the workers does it once
    before they start (xdist starts them last in this hook) and they read what it wrote."""
    if getattr(session.config, "workerinput", None) is not None or not session.config.getoption("numprocesses", None):
        return
    storage = Path(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or ".hypothesis")
    if (storage / "unicode_data").is_dir():
        return
    from hypothesis import strategies

    strategies.text().validate()  # builds the character tables, written to the storage for the workers


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: three workers for every two cores this process may use. About a third of a test's time is
    spent waiting (a server starting, a child process, a timeout the test is about); a third worker on 2
    cores fills those waits. Measured on 2 cores in a clean environment, three runs each: 2 workers 68-73 s,
    3 workers 59-61 s, 4 workers 56-64 s (each worker's start-up and collection, about 4 s of CPU, eats the
    rest). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` and ``-n logical`` keep xdist's own count."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.numprocesses == "logical":
        return None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return usable + usable // 2


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` keeps an ``xdist_group`` on one worker only while the group's name ends the test's id:
    pytest-xdist (3.8) writes ``<id>@<group>`` into ``Item._nodeid``, which pytest 9.2 no longer reads (an item's id
    is structured, ``Item._id``). Without the suffix each group's tests spread over every worker and each worker
    started the group's module and session servers again (the team server, the stdio sessions of
    ``mcp/test_mcp_server.py``: about 10 s of CPU a run, every SDK import paid twice). The suffix goes here where
    xdist's did not take; with an older pytest xdist's own does and nothing changes."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = type(item._id).parse(item.nodeid + suffix)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported now: what they and their libraries built stays for the session, so
    the garbage collector need not walk it again. Each full collection walked it all: about a CPU second
    per worker (pytest runs five at the end, looking for unraisable exceptions); half that with it frozen."""
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _SESSION_DATA:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def tmp_path(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A fresh folder for the test under the session's base folder, as pytest's own, made by one ``mkdtemp``.

    pytest numbers its folders by listing every folder made before (each test's costs grow with the
    session) and points a ``-current`` link at the newest: about 2 ms a test here, a second per worker."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path_factory.getbasetemp()))


@pytest.fixture
def loopback() -> Iterator:
    """Start real loopback HTTP servers; every one is stopped at teardown."""
    servers: list[LoopbackServer] = []

    def start(handler: Handler) -> LoopbackServer:
        server = LoopbackServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def team_mcp_server(tmp_path_factory: pytest.TempPathFactory, seed_tools_d_listings: Callable[[Path], Path]) -> Iterator:
    """One `toolrun mcp --http --auth` on a free loopback port serving tools.d (tests/mcp_helpers.py);
    started on first use (the SDK's import makes each start cost seconds), stopped at the end. Its cache
    holds the ticket server's tool list: it starts that server only for a call to one of its tools."""
    from tests.mcp_helpers import ROOT, TEAM_TOKENS, TeamServer, http_server, team_auth_file

    folder = tmp_path_factory.mktemp("team-mcp")
    audit = folder / "audit.jsonl"
    env = {"ONCALL_TOKEN": TEAM_TOKENS["oncall-bot"], "UPSTREAM_TOKEN": TEAM_TOKENS["upstream"],
           "TOOLRUN_CACHE_DIR": str(seed_tools_d_listings(folder / "cache"))}
    with http_server("--tools-dir", str(ROOT / "tools.d"), "--auth", str(team_auth_file(folder)),
                     "--audit", str(audit), "--allow-origin", "http://localhost:6274", env=env) as server:
        yield TeamServer(server, audit)


@pytest.fixture
def fixtures_dir() -> Path:
    """tests/fixtures: recorded provider traffic and official specs (see its README.md)."""
    return FIXTURES


@pytest.fixture(autouse=True)
def run_scope() -> Iterator[Redactor]:
    """Each test is one scope with its own redactor, as a run is: a secret a test registers is
    redacted in what it runs, and never seen by another test."""
    with redacting(Redactor()) as redactor:
        yield redactor



TICKET_LISTING = FIXTURES / "ticket_server_tools.json"  # what tools.d's ticket server lists (checked live in integration/)


@pytest.fixture(scope="session")
def seed_tools_d_listings() -> Callable[[Path], Path]:
    """``seed(cache_folder)``: a fresh cache folder holding tools.d's ticket server tool list; returns the folder.

    A test that runs a program loading all of tools.d in a fresh cache folder seeds it: the program then
    starts no MCP server to learn names it never calls, as a user's second command does (starting the
    ticket server costs seconds of CPU, nearly all the SDK's import). The list is the server's own,
    recorded; ``tests/integration/test_ticket_listing.py`` checks that it still is what the server lists."""
    import yaml

    from toolrun.catalog.server_listing import ListedTool, ServerListing, listing_key, write_listing

    toolset = Path(__file__).resolve().parent.parent / "tools.d" / "tickets.yaml"
    config = yaml.safe_load(toolset.read_text(encoding="utf-8"))["mcp_server"]
    tools = [ListedTool(**tool) for tool in json.loads(TICKET_LISTING.read_text(encoding="utf-8"))["tools"]]

    def seed(folder: Path) -> Path:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TOOLRUN_CACHE_DIR", str(folder))
            write_listing(toolset, listing_key(toolset, config), ServerListing(tools=tools))
        return folder

    return seed


@pytest.fixture(scope="session", autouse=True)
def seeded_session_cache(seed_tools_d_listings: Callable[[Path], Path]) -> None:
    """The session's own cache folder (``TOOLRUN_CACHE_DIR``, set above) holds tools.d's ticket server tool list
    too, as after a user's first command. Else the first program of each worker to load tools.d in it, whichever
    test that is, started the ticket server (seconds of CPU) to learn names the test never calls. A test about
    listing a server's tools live uses a cache folder of its own."""
    seed_tools_d_listings(Path(os.environ["TOOLRUN_CACHE_DIR"]))
