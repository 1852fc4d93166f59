"""Measuring real things with torch: per-layer step profiles and network transfer profiles.

This package depends on :mod:`simcore`'s trace model, never the other way round. It imports torch,
so the CLI imports it only inside the commands that need it.
"""

from profilers.layer_profiler import profile_model

__all__ = ["profile_model"]
