"""The command line: parse options, call the library, print. Nothing else lives here.

``main`` is the ``toolrun`` script's entry point. ``toolrun --version`` is answered here
without importing click (that import alone is two to three times Python's own start-up), and
so is the common ``toolrun recipe FILE`` (``toolrun.cli.direct``); everything else goes to the
click group in ``toolrun.cli.group``, which ``main`` stands for
(``CliRunner().invoke(main, ...)`` works as with the group itself; ``toolrun.cli.group.main``
is the group, for anything else).

A new command: a module with a ``@click.command`` function, and one line in ``COMMANDS``
(or ``TOOLS_COMMANDS``) of ``toolrun.cli.command_table`` naming it.
"""

# No __future__ or importlib: see toolrun/__init__.py (annotations naming click are quoted).
import gc
import sys

from toolrun import __version__

TYPE_CHECKING = False  # typing itself is not imported for the version either
if TYPE_CHECKING:
    from typing import Any

    import click

    from toolrun.cli.direct import DirectRecipe


class _Main:
    """The ``toolrun`` command: the click group, imported when more than the version is asked."""

    name = "main"

    def __call__(self, *args: "Any", **kwargs: "Any") -> "Any":
        script = not args and not kwargs  # the console script; a caller passing arguments keeps its process as it is
        if script and sys.argv[1:] == ["--version"]:
            print(f"toolrun, version {__version__}")  # what click's version option prints
            sys.exit(0)
        if not script:
            return self._group()(*args, **kwargs)
        try:
            direct = _load_command(sys.argv[1:])
            if direct is not None:
                sys.exit(direct.run())
            group = self._group()
        except KeyboardInterrupt:  # Ctrl-C while the command's modules load: as click ends a command it stops
            sys.stderr.write("\nAborted!\n")
            sys.exit(1)
        return group(*args, **kwargs)

    def main(self, *args: "Any", **kwargs: "Any") -> "Any":
        """The click group's ``main`` (what ``CliRunner().invoke(main, ...)`` calls)."""
        return self._group().main(*args, **kwargs)

    @staticmethod
    def _group() -> "click.Group":
        from toolrun.cli.group import main as group

        return group


main = _Main()


def _load_command(args: list[str]) -> "DirectRecipe | None":
    """Import what the command ``args`` name needs with the garbage collector off, then freeze
    what the imports made; returns the command when it runs without click (``toolrun.cli.direct``).

    Nearly every object made while modules load (functions, classes, module dicts) lives until
    exit, yet the collector would walk them again and again: a tenth of a short command's time.
    Frozen, later collections skip them; the command itself runs with the collector on.
    """
    from toolrun.core.cache_folder import keep_bytecode, prune_when_due

    keep_bytecode()  # first: the modules imported below are read compiled when Python may not write bytecode
    prune_when_due()  # once a day, as the command ends: what nothing uses any more leaves the cache folder
    from toolrun.cli.echo import fit_narrow_streams

    fit_narrow_streams()
    from toolrun.cli.startup import keep_compiled_code

    keep_compiled_code(args)  # before anything that makes a dataclass is imported
    from toolrun.cli.direct import direct_command

    direct = direct_command(args)
    if not gc.isenabled():
        return direct  # the embedding program turned it off: leave its choice alone
    gc.disable()
    try:
        if direct is not None:
            direct.load()
        else:
            import toolrun.cli.group  # noqa: F401 - click and the groups, for the command below
            from toolrun.cli.command_table import import_command_module

            import_command_module(args)
    finally:
        gc.freeze()
        gc.enable()
    return direct


def __getattr__(name: str) -> object:  # ToolrunGroup, COMMANDS ...: from the click module
    missing = AttributeError(f"module 'toolrun.cli' has no attribute {name!r}")
    if name.startswith("__"):  # __all__, __wrapped__ ...: asked of any module, never the group's to answer
        raise missing
    # Not "from toolrun.cli import group": before that submodule is imported, the import asks
    # this package for "group" first, which would land here again and recurse without end.
    __import__("toolrun.cli.group")
    group = sys.modules["toolrun.cli.group"]
    if name == "group":
        return group
    if not hasattr(group, name):
        raise missing
    return getattr(group, name)
