"""Taint analysis (perf-taint): which parameters can change the cost of each function.

The pipeline: :mod:`~perfcast.taint.instrument` rewrites the sources with libclang (sinks on
loop exit conditions and branches, a shadow call stack, control-flow taint) and prunes
statically; :mod:`~perfcast.taint.build` compiles them with clang's DataFlowSanitizer and
the C runtime beside this package; :mod:`~perfcast.taint.runner` runs the program in
batches of 8 labels; :mod:`~perfcast.taint.profile` turns the records into the profile
(format in README.md; the typed profile and its validating reader:
:mod:`~perfcast.taint.profile_model`); :mod:`~perfcast.taint.priors` derives modeling priors,
:mod:`~perfcast.taint.filter` the instrumentation filter, :mod:`~perfcast.taint.campaign` runs
the analysis for a ``perfcast.toml``.

The exports are imported on first use (:mod:`perfcast.lazy`): modeling with a taint profile
reads the profile, and must not load libclang and the compiler drivers to do so.
"""

from typing import TYPE_CHECKING

from perfcast.lazy import lazy_exports

if TYPE_CHECKING:
    from perfcast.taint.driver import TaintOptions, taint_program
    from perfcast.taint.filter import instrumented_functions, relevant_functions, write_filter
    from perfcast.taint.instrument import INCLUDE_DIR
    from perfcast.taint.params import ArgvParameter
    from perfcast.taint.priors import priors_from_profile
    from perfcast.taint.profile_model import TaintProfile, read_profile

__all__ = [
    "INCLUDE_DIR",
    "ArgvParameter",
    "TaintOptions",
    "TaintProfile",
    "instrumented_functions",
    "priors_from_profile",
    "read_profile",
    "relevant_functions",
    "taint_program",
    "write_filter",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "INCLUDE_DIR": "perfcast.taint.instrument",
        "ArgvParameter": "perfcast.taint.params",
        "TaintOptions": "perfcast.taint.driver",
        "TaintProfile": "perfcast.taint.profile_model",
        "instrumented_functions": "perfcast.taint.filter",
        "priors_from_profile": "perfcast.taint.priors",
        "read_profile": "perfcast.taint.profile_model",
        "relevant_functions": "perfcast.taint.filter",
        "taint_program": "perfcast.taint.driver",
        "write_filter": "perfcast.taint.filter",
    },
)
