"""The PMNF modeler: hypothesis search with batched fits and cross-validated selection.

How a call path is modeled, and why:

1. **Noise test.** Repetitions estimate the measurement noise; an F-test per parameter
   (:mod:`perfcast.modeling.noise`) drops parameters whose effect is within the noise. A
   call path left with no parameter gets a constant model.
2. **Shapes per parameter.** Every single-parameter shape ``x^i log2(x)^j`` is fitted on
   *every* line of the design that varies that parameter (the others fixed), and its
   weighted in-sample error is summed over the lines. Using all lines rather than one makes
   the choice of exponent far more robust to noise; it is valid for additive and
   multiplicative structures alike because each line gets its own coefficients. The best
   ``candidates`` shapes per parameter are kept, not only the best one. Where the data
   leave the space, the ranking looks beyond it (``beyond_space``): negative exponents for
   a call path that clearly falls along a parameter on some line (strong scaling), larger
   exponents where the space's steepest shape ranks first and fits closely, and for a
   call path that falls on some lines and rises on others the best falling and rising
   pair of shapes, which stage B may put in different terms (``n^2/p + log2(p)``).
3. **Structures.** Term families (which parameters multiply, which add; see
   :mod:`perfcast.modeling.space`) are enumerated over the significant parameters and
   screened on all points with each parameter's best shape; the best ``refine_structures``
   families are then screened with the combinations of the kept candidate shapes (at most
   ``combinations`` per family).
   Screening is an in-sample fit scored by generalised cross-validation (``RSS / (1 -
   t/n)^2``), which needs only the Gram matrix of each call path's column dictionary.
4. **Selection.** Among the hypotheses screened within ``parsimony`` standard errors of the
   noise of the best, the one with the fewest terms goes first (the one-standard-error
   rule). It, or the ``finalists`` first, and the constant model are validated by exact
   leave-one-out cross-validation (SMAPE by default, RSS optional); the lowest cost wins.
   Measured on synthetic truths (see ``benchmarks/``), screening scores pick the right
   exponent more often than leave-one-out SMAPE (which weighs the corner points' high
   leverage heavily), so one finalist is the default and leave-one-out only guards against
   a model worse than the constant.

Repetitions are aggregated per point, by default by Huber's M-estimate with a scale pooled
over the call path's points, which also gives the noise level that ``parsimony`` uses
(:mod:`perfcast.modeling.robust`).

Every model carries its fit's uncertainty (:class:`~perfcast.modeling.pmnf.Uncertainty`:
the selected terms' scaled covariance and the repetitions' noise), from which
:mod:`perfcast.modeling.intervals` derives prediction intervals anywhere.

Every model carries warnings where it should not be read as a scaling law
(:mod:`perfcast.modeling.model_warnings`): a poor fit, too few values of a parameter (with
the values to add), too few repetitions, and where a call path exists only at some points.

The work is split by job: the options and their prose
(:mod:`perfcast.modeling.modeler_options`), the experiment reshaped into call paths x
points x repetitions (:mod:`perfcast.modeling.repetitions`), the robust centres and noise
(:mod:`perfcast.modeling.robust`), the search (the parameters and their shapes in
:mod:`perfcast.modeling.shapes`, then :mod:`perfcast.modeling.search`, with its
hypotheses in :mod:`perfcast.modeling.hypotheses`) and the warnings' wording
(:mod:`perfcast.modeling.model_warnings`); this module puts them together.

All fits are stacked NumPy solves across hypotheses and call paths
(:mod:`perfcast.modeling.fitting`); there is no per-hypothesis Python loop.

Priors (:class:`~perfcast.modeling.prior.Prior`) restrict steps 1-3: the parameters that may
appear, the products that may be formed, or a fixed term structure whose coefficients alone
are fitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.points import format_value
from perfcast.modeling.blas import serial_blas
from perfcast.modeling.modeler_options import ModelerOptions
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.options import document_options
from perfcast.modeling.pmnf import Model
from perfcast.modeling.prior import Prior
from perfcast.modeling.repetitions import CallPathGroup, call_path_groups, experiment_grid
from perfcast.modeling.robust import aggregate, robust_noise
from perfcast.modeling.search import GroupSearch


@document_options
@dataclass(eq=False)
class PMNFModeler(ModelerOptions):
    """Finds a PMNF model per (call path, metric) of an :class:`Experiment`.

    A modeler in the sense of :mod:`perfcast.modeling`: its options below are its
    constructor's parameters (the search space positional, the rest by keyword), checked
    when given and kept as given; ``fit(experiment, priors)`` returns a :class:`ModelSet`
    and leaves the modeler unchanged, so one modeler fits many experiments.
    """

    # -- public API --------------------------------------------------------------------------

    @serial_blas
    def fit(self, experiment: Experiment, priors: Mapping[str, Prior] | None = None) -> ModelSet:
        """Model every (call path, metric) of ``experiment``; ``priors`` by call path."""
        experiment.validate()
        priors = dict(priors or {})
        for callpath, prior in priors.items():
            prior.check(experiment.parameters, f"call path {callpath!r}")
        self._check_parameters(experiment)
        models = ModelSet(experiment.parameters)
        for group in self._groups(experiment, priors):
            for model in self._fit_group(group, experiment.parameters):
                models.add(model)
        return models

    # -- input checks ------------------------------------------------------------------------

    def _check_parameters(self, experiment: Experiment) -> None:
        where = f" in {experiment.source}" if experiment.source else ""
        if not experiment.parameters:
            raise InputError(f"the experiment{where} has no parameters to model")
        for name, measured in zip(
            experiment.parameters, experiment.columns.coordinates, strict=True
        ):
            values = np.unique(measured)
            if len(values) < self.min_points:
                raise InputError(
                    f"parameter {name!r}{where} has {len(values)} distinct value(s) "
                    f"({', '.join(map(format_value, values))}); modeling needs at least "
                    f"{self.min_points} (5 or more recommended): measure more values of it"
                )
            if self.space.needs_positive_values and values.min() <= 0:
                raise InputError(
                    f"parameter {name!r}{where} takes the value {format_value(values.min())}, "
                    "but logarithms, fractional and negative exponents need positive values: "
                    "shift the "
                    "parameter (e.g. x+1) or restrict the search to non-negative integer "
                    "exponents without logs"
                )

    # -- grouping ----------------------------------------------------------------------------

    def _groups(
        self, experiment: Experiment, priors: Mapping[str, Prior]
    ) -> Iterable[CallPathGroup]:
        """The experiment's call paths with their aggregated values, grouped by the points
        they were measured at and their prior (:mod:`perfcast.modeling.repetitions`)."""
        keys, grid = experiment_grid(experiment)
        noise = robust_noise(grid.values)
        values = aggregate(grid.values, noise, self.aggregation, self.median_estimator)
        return call_path_groups(keys, grid, values, noise, priors, experiment.parameters)

    # -- the search --------------------------------------------------------------------------

    def _fit_group(self, group: CallPathGroup, parameters: Sequence[str]) -> list[Model]:
        search = GroupSearch(self, group, parameters)
        if group.prior is not None and group.prior.structure is not None:
            return search.fixed(group.prior.structure)
        return search.run()
