"""Evaluation toolkit: synthetic measurements of known PMNF functions, the noise patterns
of the noise-resilient-priors paper, and the accuracy metrics ED and RE.

Typical use, with a seeded generator so every run is reproducible::

    rng = np.random.default_rng(42)
    bench = generate(100, rng, n_parameters=2)
    noisy = Noise("uniform", 0.05, symmetric=True).apply_to(bench.experiment, rng)
"""

from perfcast.synth.functions import FunctionSpace, Structure, pmnf_function, random_function
from perfcast.synth.measurements import (
    PAPER_GRIDS,
    SyntheticBenchmark,
    default_grid,
    evaluation_point,
    full_factorial,
    generate,
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

__all__ = [
    "PAPER_GRIDS",
    "FunctionSpace",
    "Noise",
    "NoisePattern",
    "Structure",
    "SyntheticBenchmark",
    "default_grid",
    "evaluation_point",
    "exponent_deviation",
    "exponent_deviations",
    "full_factorial",
    "generate",
    "leading_exponent",
    "leading_exponent_matches",
    "model_relative_error",
    "next_point",
    "pmnf_function",
    "random_function",
    "relative_error",
    "sample",
    "unit_samples",
]
