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
  nest per PMNF term ``c * g(p) * h(n)``, one after the other. A term's iteration count is
  rounded once, as a whole: ``T = max(1, llround(c * g(p) * h(n)))``, and the innermost body
  runs exactly ``T`` times. A term of one factor is one loop; a product term is two nested
  loops, the outer one over the ranks factor running ``O = min(T, max(1, llround(s * g(p))))``
  times, the inner ones sharing the ``T`` iterations out (``T // O`` each, one more in the
  first ``T % O``), so rounding ``O`` moves no iteration. ``KernelTruth.iterations(point)``
  is the exact integer (the sum of the terms' ``T``), ``KernelTruth.outer_iterations(point)``
  the sum of the ``O`` (single loops have none); ``|iterations - effort| <= nests / 2``.
  The counted ``basic_blocks`` of the kernel's call path are exactly
  ``iterations + 2 * outer_iterations + c``, ``c`` a constant of the kernel and build
  (clang-16 -O2, the loops generated without vectorisation and unrolling: ``c`` from 2 to
  about 30), so ``|basic_blocks - c - effort| <= nests / 2 + 2 * outer_iterations``.
  Generated coefficients (:class:`ProgramGenerator`) are sized to keep that bound tiny at
  every point with ``p``, ``n`` at least the smallest point (default ``(2, 1000)``): a
  kernel runs at least ``MIN_ITERATIONS`` (10^4) iterations there (at least ~3000 where
  ``MAX_ITERATIONS`` caps the steepest terms) and an outer loop about ``T / 16384`` times,
  so ``basic_blocks - c`` is within 0.1 % of ``effort`` (0.05 % over 5000 random kernels
  on the default grid and at (7, 6000)) and the remaining deviation is below what
  :class:`~perfcast.effort.CountModeler` would fit as a term: the count models have the
  truth's terms. Why rounding once: a product of separately rounded trip counts (an outer
  loop of ~32 trips, an inner one of a few at small ``n``) drifts from ``c * g * h`` by
  several percent, which on a narrow range such as ``p`` in 2..6 swaps neighbouring
  exponents (``p^(1/4)`` and ``p^(1/3)`` differ by under 10 % there). At ``p = 1`` a
  ``log2(p)`` term is clamped to one iteration, so measure at ``p >= 2``.
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
