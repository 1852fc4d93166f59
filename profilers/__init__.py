"""Measuring real things with torch: per-layer step profiles and network transfer profiles.

This package depends on :mod:`simcore`'s trace model, never the other way round. Its modules that
measure import torch; importing the package does not (``profile_model`` loads on first use), so
that the command line can take options from torch-free modules such as
:mod:`profilers.network_measure`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["profile_model"]


def __getattr__(name: str) -> Any:
    if name == "profile_model":
        from profilers.layer_profiler import profile_model

        return profile_model
    raise AttributeError(f"module 'profilers' has no attribute {name!r}")
