"""How per-rank measurements are read for modeling: ``perfcast model --scaling``.

``auto`` (the default) models the values as measured and lets the search follow a metric
that falls along a parameter (``nx^4/p``: negative exponents, see
:class:`~perfcast.modeling.modeler.PMNFModeler`'s ``beyond_space``). ``weak`` and
``strong`` are Extra-P's options, for results comparable with it: both search Extra-P's
space only, and ``strong`` models the total over all ranks instead of the value per rank,
which turns ``n/p`` per rank into ``n`` in total, a shape the weak-scaling space has.
"""

from __future__ import annotations

from perfcast.errors import InputError
from perfcast.experiment.experiment import VALUE, Experiment

SCALINGS = ("auto", "weak", "strong")


def total_over_ranks(experiment: Experiment, ranks: str) -> Experiment:
    """``experiment`` with every value multiplied by the number of ranks ``ranks``: per-rank
    values (perfcast's profiles average over ranks) become totals over all ranks, what
    Extra-P's strong scaling sums from a Cube profile's processes."""
    if ranks not in experiment.parameters:
        raise InputError(
            f"strong scaling multiplies by the number of ranks, but there is no parameter "
            f"{ranks!r} (parameters: {', '.join(experiment.parameters)}); name it with "
            "--ranks-parameter",
            path=experiment.source,
        )
    data = experiment.data.copy()
    data[VALUE] = data[VALUE] * data[ranks]
    return Experiment(
        experiment.parameters, data, experiment.metrics.values(), source=experiment.source
    )
