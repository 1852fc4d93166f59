"""The ``sgdsim`` command line: an edge around simcore (and profilers, imported lazily)."""
