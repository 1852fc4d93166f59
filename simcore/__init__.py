"""sgdsim core: the trace model, the discrete-event simulator and the analytic models.

The engine and models here are pure (no torch, no plotting at import, no file I/O); loading and
saving files lives in the edge modules ``simcore.trace.io`` and ``simcore.cli``.
"""

from simcore.errors import ConfigError, ProfilingError, SgdsimError, TraceError

__version__ = "0.1.0"

__all__ = ["ConfigError", "ProfilingError", "SgdsimError", "TraceError", "__version__"]
