"""Findings: what a stage after the fit says about a fitted model, as a record of its own.

A fitted :class:`~perfcast.modeling.pmnf.Model` is a fact: the function, its fit statistics,
the prior it was fitted under and the fit's own warnings (too few repetitions, a poor fit).
What later stages conclude about it -- a prior that conflicts with the measurements, a
dependency the code cannot have, counts that vary between repetitions -- is a
:class:`Finding` beside the model, naming the stage that produced it. So a report can say
which stage said what, and running a stage twice adds nothing: two equal findings are one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError

STAGES = ("fit", "taint", "effort", "static", "priors", "conflict", "regime")
"""Who can say something about a model: the modeler itself, each prior source, the
composition of the priors, and the rule that settles a prior's conflict with the
measurements (:mod:`perfcast.modeling.prior_conflicts`)."""


@dataclass(frozen=True)
class Finding:
    """One statement of one stage about the model(s) of a call path.

    Attributes:
        stage: one of :data:`STAGES`.
        callpath: the call path it concerns.
        metric: the metric it concerns; ``None``: every metric of the call path.
        kind: a short machine-readable tag (``"conflict"``, ``"contention"``, ...), stable
            for filtering, while ``message`` is for people.
        message: the full text, as the report prints it.
        data: optional structured details (never compared: two findings with the same
            text are the same finding).
    """

    stage: str
    callpath: str
    metric: str | None
    kind: str
    message: str
    data: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown finding stage {self.stage!r}; one of {STAGES}")

    def concerns(self, callpath: str, metric: str) -> bool:
        return self.callpath == callpath and self.metric in (None, metric)

    def text(self) -> str:
        """The message with its stage, as reports print it (``[taint] depends on p ...``)."""
        return f"[{self.stage}] {self.message}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "stage": self.stage,
            "callpath": self.callpath,
            "metric": self.metric,
            "kind": self.kind,
            "message": self.message,
        }
        if self.data is not None:
            data["data"] = dict(self.data)
        return data

    @classmethod
    def from_json(cls, data: object, where: str, path: str | Path | None = None) -> Finding:
        """One finding of a model file; ``where`` names it in errors (``findings[3]``)."""

        def fail(what: str) -> InputError:
            return InputError(f"{where} {what}", path=path)

        if not isinstance(data, Mapping):
            raise fail("must be a JSON object")
        for key in ("stage", "callpath", "kind", "message"):
            if not isinstance(data.get(key), str):
                raise fail(f"needs a string {key!r}")
        if data["stage"] not in STAGES:
            raise fail(f"has stage {data['stage']!r}, not one of {', '.join(STAGES)}")
        metric = data.get("metric")
        if metric is not None and not isinstance(metric, str):
            raise fail("needs a string or null 'metric'")
        extra = data.get("data")
        if extra is not None and not isinstance(extra, Mapping):
            raise fail("has a 'data' that is not a JSON object")
        return cls(data["stage"], data["callpath"], metric, data["kind"], data["message"], extra)


@dataclass(frozen=True)
class Note:
    """One statement for the user about using a model set (not about one fit, which is a
    :class:`Finding`): where its runs came from, how far a prediction reaches beyond them,
    a value no measured quantity can take. The ``check`` that made it lets a library user
    act on one kind without parsing the text, which is for people.

    Attributes:
        check: a short machine-readable tag naming the check (``"negative"``,
            ``"callee-above-caller"``, ``"shared-cores"``, ...).
        text: the sentence as ``perfcast predict`` prints it after ``note:``.
        models: the (call path, metric) pairs it concerns, where it names some; empty for a
            note on the whole set or on the points.
    """

    check: str
    text: str
    models: tuple[tuple[str, str], ...] = ()


def unique(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """``findings`` in order, each once: a stage run twice says nothing new."""
    return tuple(dict.fromkeys(findings))


__all__ = ["STAGES", "Finding", "Note", "unique"]
