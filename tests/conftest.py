"""Shared test configuration: the `one_thread` fixture, and hypothesis profiles, picked with
HYPOTHESIS_PROFILE.

- `ci` (the default): a few dozen examples per property, enough to keep every feature in play
  while tests/test_properties.py stays within about a minute on a 2-core machine.
- `long`: thousands of examples per property, for a local soak run (docs/testing.md).
- `dev`: a handful of examples, for a quick check while editing the strategies.

The tiny sizes and the model builders the tests share are plain functions in tests/tiny.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # the first example pays for imports; timing is not what is tested
    "print_blob": True,  # a failure prints the @reproduce_failure line to replay it
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

settings.register_profile("ci", max_examples=40, **_COMMON)
settings.register_profile("long", max_examples=3000, **_COMMON)
settings.register_profile("dev", max_examples=5, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Torch on one thread for a module's tests (`pytestmark = pytest.mark.usefixtures(...)`):
    their models are tiny, so extra threads only spin, and cost much on a busy machine."""
    import torch  # here, not at the top: most test files never touch torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
