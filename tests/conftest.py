"""Shared test configuration: hypothesis profiles, picked with HYPOTHESIS_PROFILE.

- `ci` (the default): a few dozen examples per property, enough to keep every feature in play
  while tests/test_properties.py stays within about a minute on a 2-core machine.
- `long`: thousands of examples per property, for a local soak run (docs/testing.md).
- `dev`: a handful of examples, for a quick check while editing the strategies.
"""

from __future__ import annotations

import os

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
