"""Workflows: one request, one result, per job of the command line.

A command with a workflow parses and prints; what it prints is computed here, where a
library user calls the same function and gets the same answer:
:func:`perfcast.workflows.model.model_campaign`,
:func:`perfcast.workflows.report.report_inputs`,
:func:`perfcast.workflows.simulate.simulate_traces`,
:func:`perfcast.workflows.predict.predict`,
:func:`perfcast.workflows.design.suggest_runs` and
:func:`perfcast.workflows.design.measure_until`. Defaults that combine stages (priors on
wherever the data has them) are decided here, once.
"""
