"""Empirical PMNF modeling: hypothesis space, batched fitting, selection, priors.

The exports are imported on first use (:mod:`perfcast.lazy`): reading a model file
(``perfcast predict``) needs :mod:`.modelset`, not the fitting stack behind the modeler.

Every modeler (:class:`PMNFModeler`, and on top of it
:class:`~perfcast.effort.counts.CountModeler` and :class:`~perfcast.effort.EffortModeler`)
is configured the same way, after scikit-learn's estimators:

* its options are the constructor's parameters, each declared once (:mod:`.options`:
  default, allowed values, docstring entry, command-line flag), checked when given (an
  :class:`~perfcast.modeling.options.OptionError` names the option) and kept unchanged
  as attributes of the same name;
* ``get_params(deep=True)`` lists exactly those options (with ``deep``, nested ones too:
  ``space__exponents``); ``set_params(**options)`` checks, changes and returns the
  modeler; ``with_params(**options)`` returns a changed copy;
* ``fit(experiment, priors)`` returns the models, a :class:`ModelSet`, not the modeler:
  a modeler keeps no fitted state, so one modeler fits many experiments. Counts take no
  priors (``CountModeler.fit(experiment)``: priors are made from them). The effort
  modeler has no ``fit`` of its own: it derives the priors and fits coefficients under
  them for the priors stage (:func:`perfcast.priors.fit_with_priors`), which models with
  every source the same way.

They are not scikit-learn estimators: ``fit`` takes an
:class:`~perfcast.experiment.Experiment`, not arrays ``X, y``, and scikit-learn's
``clone``, pipelines and searches are neither used nor supported.
"""

from typing import TYPE_CHECKING

from perfcast.lazy import lazy_exports

if TYPE_CHECKING:
    from perfcast.modeling.modeler import PMNFModeler
    from perfcast.modeling.modelset import ModelSet
    from perfcast.modeling.pmnf import Factor, FitStatistics, Model, Term
    from perfcast.modeling.prior import Prior
    from perfcast.modeling.space import SearchSpace

__all__ = [
    "Factor",
    "FitStatistics",
    "Model",
    "ModelSet",
    "PMNFModeler",
    "Prior",
    "SearchSpace",
    "Term",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Factor": "perfcast.modeling.pmnf",
        "FitStatistics": "perfcast.modeling.pmnf",
        "Model": "perfcast.modeling.pmnf",
        "ModelSet": "perfcast.modeling.modelset",
        "PMNFModeler": "perfcast.modeling.modeler",
        "Prior": "perfcast.modeling.prior",
        "SearchSpace": "perfcast.modeling.space",
        "Term": "perfcast.modeling.pmnf",
    },
)
