"""``python -m toolrun``: the command line, as the ``toolrun`` script runs it."""

from toolrun.cli import main

main()
