"""Taint analysis (perf-taint): which parameters can change the cost of each function.

The pipeline: :mod:`~perfcast.taint.instrument` rewrites the sources with libclang (sinks on
loop exit conditions and branches, a shadow call stack, control-flow taint) and prunes
statically; :mod:`~perfcast.taint.build` compiles them with clang's DataFlowSanitizer and
the C runtime beside this package; :mod:`~perfcast.taint.runner` runs the program in
batches of 8 labels; :mod:`~perfcast.taint.profile` turns the records into the profile
(format in README.md); :mod:`~perfcast.taint.priors` derives modeling priors,
:mod:`~perfcast.taint.filter` the instrumentation filter, :mod:`~perfcast.taint.campaign` runs
the analysis for a ``perfcast.toml``.
"""

from perfcast.taint.driver import TaintOptions, taint_program
from perfcast.taint.filter import instrumented_functions, relevant_functions, write_filter
from perfcast.taint.instrument import INCLUDE_DIR
from perfcast.taint.params import ArgvParameter
from perfcast.taint.priors import priors_from_profile

__all__ = [
    "INCLUDE_DIR",
    "ArgvParameter",
    "TaintOptions",
    "instrumented_functions",
    "priors_from_profile",
    "relevant_functions",
    "taint_program",
    "write_filter",
]
