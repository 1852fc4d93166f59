"""The exception hierarchy of sgdsim.

Every error a user can cause derives from :class:`SgdsimError`; the CLI turns these into one clear
line and a non-zero exit. Errors about bad input also derive from :class:`ValueError` so that
library callers can catch them the usual way.
"""

from __future__ import annotations


class SgdsimError(Exception):
    """Base class of every error sgdsim raises on purpose."""


class TraceError(SgdsimError, ValueError):
    """A trace file or trace object is malformed: names the file, the op or field and the value."""


class ConfigError(SgdsimError, ValueError):
    """A simulation, profiling or scenario configuration is invalid: names the parameter."""


class ProfilingError(SgdsimError, RuntimeError):
    """Profiling a model or a network could not be carried out."""


class ResourceError(SgdsimError, RuntimeError):
    """The machine took away what a run needed: a process of a pool died (out of memory)."""
