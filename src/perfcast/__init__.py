"""perfcast: scaling models for parallel C/C++ programs.

The public entry points are the :class:`~perfcast.experiment.Experiment` (measurements),
the modelers in :mod:`perfcast.modeling`, and the ``perfcast`` command line.
"""

from perfcast.errors import InputError, PerfcastError

__all__ = ["InputError", "PerfcastError"]
__version__ = "0.1.0"
