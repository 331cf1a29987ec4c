"""Measurements: the Experiment table, the call tree, and one reader/writer per format."""

from perfcast.experiment.calltree import CallNode, CallTree
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.io import read_experiment, write_experiment

__all__ = ["CallNode", "CallTree", "Experiment", "Metric", "read_experiment", "write_experiment"]
