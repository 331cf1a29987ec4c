"""Measurements: the Experiment table, the call tree, and one reader/writer per format.

The exports are imported on first use (:mod:`perfcast.lazy`): the Experiment needs pandas,
while the call-path helpers and metric names in this package serve commands that do not.
"""

from typing import TYPE_CHECKING

from perfcast.lazy import lazy_exports

if TYPE_CHECKING:
    from perfcast.experiment.calltree import CallNode, CallTree
    from perfcast.experiment.experiment import Experiment, Metric
    from perfcast.experiment.io import read_experiment, write_experiment

__all__ = ["CallNode", "CallTree", "Experiment", "Metric", "read_experiment", "write_experiment"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CallNode": "perfcast.experiment.calltree",
        "CallTree": "perfcast.experiment.calltree",
        "Experiment": "perfcast.experiment.experiment",
        "Metric": "perfcast.experiment.experiment",
        "read_experiment": "perfcast.experiment.io",
        "write_experiment": "perfcast.experiment.io",
    },
)
