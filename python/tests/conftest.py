"""Test settings: hypothesis runs 256 cases per property, as the Rust suite does
(`HYPOTHESIS_PROFILE=quick` for 50), with no per-example deadline (a debug build of the
extension is slow, and a deadline would make the suite flaky on a loaded machine)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=256, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "quick", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
