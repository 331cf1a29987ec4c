"""Benchmark generator (``noise-resilient-priors.txt`` IV): C++ MPI programs with known
computational and communication complexity, the ground truth written beside each.

::

    rng = np.random.default_rng(1)
    spec = random_program(rng, "bench", kernels=5)
    source = write_program(spec, "out")            # out/bench.cpp, out/bench.truth.json
    truth = read_truth("out/bench.truth.json")      # {"kernel_01_compute": KernelTruth, ...}

    perfcast build --counters -- mpicxx -O2 out/bench.cpp -o bench
    PERFCAST_PROFILE_DIR=prof mpirun -np 4 ./bench 3000 [REPEAT]

A program is ``main`` (the benchmark frame: arrays, buffers, a checksum) calling each kernel
``REPEAT`` times (default 1). ``p`` (the first parameter) is ``MPI_Comm_size``, ``n`` (the
second) is ``argv[1]``. Kernels are ``extern "C"`` non-inlined functions
``kernel_<NN>_compute`` or ``kernel_<NN>_<operation>``: call paths ``main->kernel_NN_...`` and
``main->kernel_NN_<op>->MPI_<Op>``. ``send``/``recv`` kernels also leave ``main->MPI_Irecv``/
``main->MPI_Isend`` and ``main->MPI_Wait`` (the frame posts the matching side); those and
``MPI_Init``/``MPI_Finalize`` belong to the frame and have no truth.

What the truth promises, per call of a kernel and per rank (divide a run's metrics by the
call path's ``visits``):

* **Computation** (``KernelTruth.effort``, metric ``iterations``). The kernel runs one loop
  nest per PMNF term, one after the other; a term's factors are nested loops (ranks loop
  outside), each running ``max(1, llround(scale * x^i * log2(x)^j))`` times.
  ``KernelTruth.iterations(point)`` is the exact number of innermost iterations; ``effort``
  equals it up to rounding each trip count to an integer (relative difference at most
  ``sum over the nest's loops of 1/(2 * trips)``; at ``p = 1`` a ``log2(p)`` loop is clamped to
  one trip, so measure at ``p >= 2``). The counted ``basic_blocks`` of the kernel's call path
  are ``b * iterations + a * outer_iterations + c`` (``KernelTruth.outer_iterations``: the
  iterations of the loops around the innermost ones), with ``b``, ``a``, ``c`` constants of
  the kernel and build (clang-16 -O2: ``b = 1``, ``a = 2``; the loops are generated without
  vectorisation and unrolling). The overhead term lacks the innermost factor, so it is of
  lower order and the counts have the truth's leading exponents; where an inner loop runs
  only a few times (a steep term at the smallest sizes) it is a visible share of the count.
  The absolute count is not promised.
* **Communication** (``KernelTruth.bytes``). The kernel calls its MPI routine once with a
  message of ``max(1, llround(scale * term))`` doubles per rank (``KernelTruth.message``).
  ``bytes`` is the rank-mean of ``bytes_metric`` per call under perfcast's byte rules:
  ``8 * message`` for send, recv (received), sendrecv, bcast, scatter, gather and reduce,
  ``8 * p * message`` for allgather and allreduce, 0 for barrier; it equals
  ``KernelTruth.exact_bytes(point)`` up to the rounding of the message size, and that
  integer equals the measured value exactly. ``law`` is the operation's Table I law.
* **Time** has no truth: it depends on the machine. The paper's evaluation compares time
  models against ``effort`` (computation) and against ``law`` applied to ``bytes``.

The whole generation is seeded by the ``rng`` argument: the same seed writes the same files.
"""

from perfcast.synth.programs.emit import render_program
from perfcast.synth.programs.expressions import parse_communication, parse_computation
from perfcast.synth.programs.generate import (
    DEFAULT_RANKS,
    DEFAULT_REFERENCE,
    DEFAULT_SIZES,
    ProgramGenerator,
    kernel_name,
    random_program,
)
from perfcast.synth.programs.spec import (
    COMMUNICATION_OPERATIONS,
    ELEMENT_BYTES,
    MPI_FUNCTIONS,
    KernelSpec,
    Loop,
    LoopNest,
    Message,
    ProgramSpec,
    Work,
)
from perfcast.synth.programs.truth import (
    KernelTruth,
    read_spec,
    read_truth,
    truth_of,
    write_program,
)

__all__ = [
    "COMMUNICATION_OPERATIONS",
    "DEFAULT_RANKS",
    "DEFAULT_REFERENCE",
    "DEFAULT_SIZES",
    "ELEMENT_BYTES",
    "MPI_FUNCTIONS",
    "KernelSpec",
    "KernelTruth",
    "Loop",
    "LoopNest",
    "Message",
    "ProgramGenerator",
    "ProgramSpec",
    "Work",
    "kernel_name",
    "parse_communication",
    "parse_computation",
    "random_program",
    "read_spec",
    "read_truth",
    "render_program",
    "truth_of",
    "write_program",
]
