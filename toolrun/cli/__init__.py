"""The command line: parse options, call the library, print. Nothing else lives here.

``main`` is the ``toolrun`` script's entry point. ``toolrun --version`` is answered here
without importing click (that import alone is two to three times Python's own start-up);
everything else goes to the click group in ``toolrun.cli.group``, which ``main`` stands for
(``CliRunner().invoke(main, ...)`` works as with the group itself).

A new command: a module with a ``@click.command`` function, and one line in ``COMMANDS``
(or ``TOOLS_COMMANDS``) of ``toolrun.cli.group`` naming it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not imported for the version either
if TYPE_CHECKING:
    import click


class _Main:
    """The ``toolrun`` command: the click group, imported when more than the version is asked."""

    name = "main"

    def __call__(self, *args: object, **kwargs: object) -> object:
        if not args and not kwargs and sys.argv[1:] == ["--version"]:
            from toolrun import __version__

            print(f"toolrun, version {__version__}")  # what click's version option prints
            sys.exit(0)
        return self._group()(*args, **kwargs)

    def __getattr__(self, name: str) -> object:  # .main(), .name, .commands ...: the group's own
        return getattr(self._group(), name)

    @staticmethod
    def _group() -> click.Group:
        from toolrun.cli.group import main as group

        return group


main = _Main()


def __getattr__(name: str) -> object:  # ToolrunGroup, COMMANDS ...: from the click module
    from toolrun.cli import group

    return getattr(group, name)
