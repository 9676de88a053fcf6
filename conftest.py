"""Collects the examples of README.md and docs/*.md as tests (tests/doc_examples.py says how
they run). docs/architecture.md describes the code and holds no runnable example."""

from sybil import Sybil
from sybil.parsers.markdown import SkipParser

from tests.doc_examples import BashParser, ConsoleParser, python_parser, setup, teardown

pytest_collect_file = Sybil(
    parsers=[ConsoleParser(), BashParser(), python_parser(), SkipParser()],
    patterns=["README.md", "docs/*.md"],
    excludes=["docs/architecture.md"],
    setup=setup,
    teardown=teardown,
).pytest()
