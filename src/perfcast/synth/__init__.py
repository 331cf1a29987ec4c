"""Evaluation toolkit: synthetic measurements of known PMNF functions, the noise patterns
of the noise-resilient-priors paper, and the accuracy metrics ED and RE.

Typical use, with a seeded generator so every run is reproducible::

    rng = np.random.default_rng(42)
    bench = generate(100, rng, n_parameters=2)
    noisy = Noise("uniform", 0.05, symmetric=True).apply_to(bench.experiment, rng)

Benchmark *programs* (:mod:`perfcast.synth.programs`, ``perfcast synth``) are the real-code
counterpart: C++ MPI programs whose kernels have a chosen computational and communication
complexity, with the ground truth written beside each::

    spec = random_program(rng, "bench", kernels=5)
    write_program(spec, "out")                 # out/bench.cpp, out/bench.truth.json
    truth = read_truth("out/bench.truth.json")  # per kernel: effort, bytes, law
"""

from perfcast.synth.functions import FunctionSpace, Structure, pmnf_function, random_function
from perfcast.synth.measurements import (
    PAPER_GRIDS,
    SyntheticBenchmark,
    default_grid,
    evaluation_point,
    generate,
    grid_points,
    next_point,
    sample,
)
from perfcast.synth.metrics import (
    exponent_deviation,
    exponent_deviations,
    leading_exponent,
    leading_exponent_matches,
    model_relative_error,
    relative_error,
)
from perfcast.synth.noise import Noise, NoisePattern, unit_samples
from perfcast.synth.programs import (
    COMMUNICATION_OPERATIONS,
    KernelSpec,
    KernelTruth,
    ProgramGenerator,
    ProgramSpec,
    random_program,
    read_truth,
    write_program,
)

__all__ = [
    "COMMUNICATION_OPERATIONS",
    "PAPER_GRIDS",
    "FunctionSpace",
    "KernelSpec",
    "KernelTruth",
    "Noise",
    "NoisePattern",
    "ProgramGenerator",
    "ProgramSpec",
    "Structure",
    "SyntheticBenchmark",
    "default_grid",
    "evaluation_point",
    "exponent_deviation",
    "exponent_deviations",
    "generate",
    "grid_points",
    "leading_exponent",
    "leading_exponent_matches",
    "model_relative_error",
    "next_point",
    "pmnf_function",
    "random_function",
    "random_program",
    "read_truth",
    "relative_error",
    "sample",
    "unit_samples",
    "write_program",
]
