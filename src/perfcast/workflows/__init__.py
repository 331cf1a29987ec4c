"""Workflows: one request, one result, per job of the command line.

The CLI parses and prints; what it prints is computed here, where a library user calls the
same function and gets the same answer (:func:`perfcast.workflows.model.model_campaign`).
Defaults that combine stages (priors on wherever the data has them) are decided here, once.
"""
