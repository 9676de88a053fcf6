"""`python -m archspec` runs the command line."""

from archspec.cli import main

main()
