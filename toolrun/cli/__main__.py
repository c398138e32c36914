"""``python -m toolrun.cli``: the command line without the installed script (how MCP clients may start it)."""

from toolrun.cli import main

main()
