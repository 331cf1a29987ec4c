"""A set of models, one per (call path, metric): what `perfcast model` writes and
`perfcast predict` reads.

Beside the models the set holds the findings of the stages after the fit
(:mod:`perfcast.modeling.findings`). In the model file they are the optional ``"findings"``
list, each with its stage; a file without it (written before findings existed, when later
stages appended their warnings to the models) loads with those warnings on its models.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfcast.errors import InputError
from perfcast.inputs import JsonChecker, read_json
from perfcast.modeling import provenance as _provenance
from perfcast.modeling.findings import Finding, unique
from perfcast.modeling.pmnf import ArrayLike, Model
from perfcast.modeling.provenance import Provenance
from perfcast.outputs import OutputKind, PathLike, json_with, write_output

if TYPE_CHECKING:
    import pandas as pd

FORMAT_VERSION = 1
MODEL_FILE = OutputKind("a perfcast model file", json_with('"perfcast_models"'))


FINDINGS_KEY = "findings"


_WRITE_ONE = "write one with `perfcast model FILE -o models.json`"


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cycle collector off while a model file is built or read. Both make millions
    of small dictionaries, lists and Fractions, none in a cycle (reference counting frees
    them), and each thousand of them started a collection that walked the whole heap: at
    100,000 call paths with their rival shapes, writing took 22 s with it and 7 s without,
    reading 17 s and 10 s (``benchmarks/scale.py``'s model file)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class ModelSet:
    """Models over the same parameters, addressable by (call path, metric), and the
    findings of the stages that judged them.

    The models are immutable facts; a stage that replaces models or adds findings returns
    a new set (:meth:`with_models`, :meth:`with_findings`, :meth:`with_provenance`).
    :meth:`add` is for the code that builds a set, before anyone else sees it."""

    def __init__(
        self,
        parameters: Sequence[str],
        models: Iterable[Model] = (),
        provenance: Provenance | None = None,
        findings: Iterable[Finding] = (),
    ):
        self.parameters = list(parameters)
        self.provenance = provenance
        """What is known of the measurements behind the models (None: nothing)."""
        self.findings = unique(findings)
        """What the stages after the fit said about the models, each once, in order."""
        self._index: dict[tuple[str, str | None], list[int]] | None = None
        self._models: dict[tuple[str, str], Model] = {}
        for model in models:
            self.add(model)

    def add(self, model: Model) -> None:
        self._models[(model.callpath, model.metric)] = model

    def with_models(self, models: Iterable[Model]) -> ModelSet:
        """A new set with ``models`` in place of those of the same (call path, metric)."""
        replaced = dict(self._models)
        replaced.update(((m.callpath, m.metric), m) for m in models)
        return ModelSet(self.parameters, replaced.values(), self.provenance, self.findings)

    def with_findings(self, findings: Iterable[Finding]) -> ModelSet:
        """A new set with ``findings`` added; those it already holds are not repeated."""
        return ModelSet(
            self.parameters, self._models.values(), self.provenance, (*self.findings, *findings)
        )

    def with_provenance(self, provenance: Provenance | None) -> ModelSet:
        """A new set whose models rest on measurements ``provenance`` describes."""
        return ModelSet(self.parameters, self._models.values(), provenance, self.findings)

    def findings_by_model(self) -> dict[tuple[str, str], list[Finding]]:
        """(call path, metric) -> the findings that concern that model (a finding without
        a metric concerns every model of its call path), in their order; one pass."""
        return {key: found for key in self._models if (found := self.findings_of(key))}

    def findings_of(self, key: tuple[str, str]) -> list[Finding]:
        """The findings on the (call path, metric) model, in their order: those naming its
        metric and those on its whole call path, from an index built once per set."""
        if self._index is None:
            index: dict[tuple[str, str | None], list[int]] = {}
            for position, finding in enumerate(self.findings):
                index.setdefault((finding.callpath, finding.metric), []).append(position)
            self._index = index
        positions = self._index.get(key, []) + self._index.get((key[0], None), [])
        return [self.findings[i] for i in sorted(positions)]

    def notes(self, key: tuple[str, str]) -> list[str]:
        """The (call path, metric) model's own warnings, then every finding on it with its
        stage: all a reader must know before trusting the model."""
        return [*self._models[key].warnings, *(f.text() for f in self.findings_of(key))]

    def __getitem__(self, key: tuple[str, str]) -> Model:
        return self._models[key]

    def get(self, key: tuple[str, str], default: Model | None = None) -> Model | None:
        return self._models.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._models

    def __iter__(self) -> Iterator[Model]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(m.metric for m in self))

    def predict(self, point: Mapping[str, ArrayLike]) -> dict[tuple[str, str], np.ndarray]:
        """Every model evaluated at ``point`` (scalars or equal-length arrays)."""
        missing = [p for p in self.parameters if p not in point]
        if missing:
            raise InputError(
                f"prediction needs a value for every parameter; missing {missing} "
                f"(give them as {' '.join(p + '=VALUE' for p in missing)})"
            )
        return {key: model.evaluate(point) for key, model in self._models.items()}

    # -- tables and notebooks (perfcast.modeling.views) --------------------------------------

    def to_dataframe(
        self,
        target: Mapping[str, float] | None = None,
        values: Mapping[str, Sequence[float]] | None = None,
    ) -> pd.DataFrame:
        """One row per model: call path, metric, formula, fit statistics, notes, and with
        a ``target`` the value there, its prediction interval, the growth and why it cannot
        be read there (:func:`perfcast.modeling.views.model_table`; ``values``: each
        parameter's measured values, where known)."""
        from perfcast.modeling.views import model_table

        return model_table(self, target, values)

    def _repr_html_(self) -> str:
        from perfcast.modeling.views import model_set_html

        return model_set_html(self)

    # -- JSON ------------------------------------------------------------------------------

    def to_json(self) -> dict:
        data = {
            "perfcast_models": FORMAT_VERSION,
            "parameters": self.parameters,
            "models": [m.to_json() for m in self],
        }
        if self.findings:
            data[FINDINGS_KEY] = [f.to_json() for f in self.findings]
        if self.provenance is not None:
            data[_provenance.KEY] = self.provenance.to_json()
        return data

    @_collection_paused()
    def to_text(self) -> str:
        """The model file's JSON, indented, with each model (and finding) on one line: the
        file reads and diffs model by model, and it is written by Python's C encoder, which
        runs only without indentation (fully indented, 1,000 models took a third as long to
        write as to fit)."""
        members = []
        for key, value in self.to_json().items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                records = ",\n".join(f"    {json.dumps(record)}" for record in value)
                members.append(f"  {json.dumps(key)}: [\n{records}\n  ]")
            else:  # indented two more: JSON strings hold no raw newline to shift
                nested = json.dumps(value, indent=2).replace("\n", "\n  ")
                members.append(f"  {json.dumps(key)}: {nested}")
        return "{\n" + ",\n".join(members) + "\n}"

    def save(self, path: str | Path, inputs: Sequence[PathLike] = ()) -> str:
        """Write the JSON atomically; never over one of ``inputs`` or a file that is not
        an earlier model file (:func:`perfcast.outputs.write_output`). Returns the text
        written (:meth:`to_text`), for a caller that also prints it."""
        text = self.to_text()
        write_output(path, text + "\n", MODEL_FILE, inputs)
        return text

    @classmethod
    @_collection_paused()
    def load(cls, path: str | Path) -> ModelSet:
        data = read_json(Path(path), "model file", _WRITE_ONE)
        if not isinstance(data, dict) or "perfcast_models" not in data:
            raise InputError("not a perfcast model file (no 'perfcast_models' key)", path=path)
        _check_model_file(data, path)
        try:
            models = [Model.from_json(m) for m in data["models"]]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise InputError(f"malformed model entry ({exc})", path=path) from None
        provenance = None
        if _provenance.KEY in data:
            provenance = Provenance.from_json(data[_provenance.KEY], path)
        raw = data.get(FINDINGS_KEY, [])
        if not isinstance(raw, list):
            raise InputError(f"{FINDINGS_KEY!r} must be a list", path=path)
        findings = [
            Finding.from_json(entry, f"{FINDINGS_KEY}[{index}]", path)
            for index, entry in enumerate(raw)
        ]
        return cls(data["parameters"], models, provenance, findings)


MAX_EXPONENT = 64
"""The largest exponent (polynomial or logarithmic) a model file may give a factor: Extra-P's
largest is 3 and perfcast's search goes a few steps beyond; 64 leaves room for any model
written by hand, while larger ones overflow a double at the first parameter value above 2^16."""


def _check_model_file(data: dict, path: str | Path) -> None:
    """Refuse a model file whose content the models cannot be built from or evaluated with,
    naming the key at fault (``models[2].terms[0].coefficient``), so that ``perfcast predict``
    never fails in the middle of evaluating it."""
    _ModelFileCheck(path).file(data)


class _ModelFileCheck(JsonChecker):
    def __init__(self, path: str | Path):
        super().__init__(path, "write the file again with `perfcast model FILE -o FILE`")

    def number(self, value: object, where: str, *, finite: bool = True) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, "a number")
        try:
            as_float = float(value)
        except OverflowError:  # a JSON integer beyond 1.8e308
            raise self.fail(where, "a number within floating-point range") from None
        if finite and not math.isfinite(as_float):
            raise self.fail(where, f"a finite number, not {value}")

    def file(self, data: dict) -> None:
        parameters = self.required(data, "parameters", "the model file")
        if (
            not isinstance(parameters, list)
            or not all(isinstance(p, str) and p.strip() and p.isprintable() for p in parameters)
            or len(set(parameters)) != len(parameters)
        ):
            raise self.fail("parameters", "a list of distinct parameter names, each one line")
        models = self.required(data, "models", "the model file")
        if not isinstance(models, list):
            raise self.fail("models", "a list")
        for index, model in enumerate(models):
            self.model(model, f"models[{index}]", parameters)

    def model(self, value: object, where: str, parameters: list[str]) -> None:
        model = self.table(value, where)
        for key in ("callpath", "metric"):
            self.text(self.required(model, key, where), f"{where}.{key}")
        self.number(self.required(model, "constant", where), f"{where}.constant")
        if model.get("prior") is not None and not isinstance(model["prior"], str):
            raise self.fail(f"{where}.prior", "a string or null")
        self.texts(model.get("warnings", []), f"{where}.warnings")
        statistics = self.table(model.get("statistics", {}), f"{where}.statistics")
        for key in ("rss", "smape", "adjusted_r2", "cv_error", "points"):
            if key in statistics:  # nan: not computed (too few points)
                self.number(statistics[key], f"{where}.statistics.{key}", finite=False)
        terms = model.get("terms", [])
        if not isinstance(terms, list):
            raise self.fail(f"{where}.terms", "a list")
        for index, term in enumerate(terms):
            self.term(term, f"{where}.terms[{index}]", parameters)
        if model.get("uncertainty") is not None:  # absent or null: no interval (nan)
            self.uncertainty(
                model["uncertainty"], f"{where}.uncertainty", len(terms) + 1, parameters
            )

    def uncertainty(
        self, value: object, where: str, coefficients: int, parameters: list[str]
    ) -> None:
        """What :class:`~perfcast.modeling.pmnf.Uncertainty` needs: a positive scale per
        coefficient, a symmetric covariance matrix of that size with a non-negative
        diagonal, degrees of freedom above zero for both estimates, a non-negative noise,
        and alternatives that are models' constants and terms."""
        record = self.table(value, where)
        scales = self.required(record, "scales", where)
        if not isinstance(scales, list) or len(scales) != coefficients:
            raise self.fail(
                f"{where}.scales", f"a list of {coefficients} numbers (one per coefficient)"
            )
        for index, scale in enumerate(scales):
            self.number(scale, f"{where}.scales[{index}]")
            if scale <= 0:
                raise self.fail(f"{where}.scales[{index}]", "a positive number")
        matrix = self.required(record, "covariance", where)
        square = f"a {coefficients}x{coefficients} list of lists of numbers"
        if not isinstance(matrix, list) or len(matrix) != coefficients:
            raise self.fail(f"{where}.covariance", square)
        for i, row in enumerate(matrix):
            if not isinstance(row, list) or len(row) != coefficients:
                raise self.fail(f"{where}.covariance", square)
            for j, entry in enumerate(row):
                self.number(entry, f"{where}.covariance[{i}][{j}]")
        for i in range(coefficients):
            if matrix[i][i] < 0:
                raise self.fail(f"{where}.covariance[{i}][{i}]", "a variance, not negative")
            for j in range(i):  # perfcast writes it exactly symmetric; rounding by hand aside
                tolerance = 1e-9 * math.sqrt(abs(matrix[i][i] * matrix[j][j]))
                if abs(matrix[i][j] - matrix[j][i]) > tolerance:
                    raise self.fail(f"{where}.covariance", "a symmetric matrix")
        for key in ("dof", "noise_dof"):
            dof = self.required(record, key, where)
            self.number(dof, f"{where}.{key}")
            if dof <= 0:
                raise self.fail(f"{where}.{key}", "a positive number of degrees of freedom")
        noise = self.required(record, "noise", where)
        self.number(noise, f"{where}.noise")
        if noise < 0:
            raise self.fail(f"{where}.noise", "a relative standard deviation, not negative")
        alternatives = record.get("alternatives", [])
        if not isinstance(alternatives, list):
            raise self.fail(f"{where}.alternatives", "a list")
        for index, alternative in enumerate(alternatives):
            entry = self.table(alternative, f"{where}.alternatives[{index}]")
            at = f"{where}.alternatives[{index}]"
            self.number(self.required(entry, "constant", at), f"{at}.constant")
            terms = self.required(entry, "terms", at)
            if not isinstance(terms, list):
                raise self.fail(f"{at}.terms", "a list")
            for number, term in enumerate(terms):
                self.term(term, f"{at}.terms[{number}]", parameters)

    def term(self, value: object, where: str, parameters: list[str]) -> None:
        term = self.table(value, where)
        self.number(term.get("coefficient"), f"{where}.coefficient")
        factors = term.get("factors")
        if not isinstance(factors, list) or not factors:
            raise self.fail(f"{where}.factors", "a non-empty list")
        for index, factor in enumerate(factors):
            self.factor(factor, f"{where}.factors[{index}]", parameters)

    def factor(self, value: object, where: str, parameters: list[str]) -> None:
        factor = self.table(value, where)
        if factor.get("parameter") not in parameters:
            raise self.fail(f"{where}.parameter", f"one of the file's parameters {parameters}")
        exponent = factor.get("exponent")
        try:
            if isinstance(exponent, bool) or not isinstance(exponent, str | int | float):
                raise TypeError(exponent)
            value = Fraction(exponent)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            raise self.fail(f"{where}.exponent", "a fraction such as 3/2 or 0.5") from None
        if abs(value) > MAX_EXPONENT:
            raise self.fail(f"{where}.exponent", f"at most {MAX_EXPONENT} in magnitude")
        log_exponent = factor.get("log_exponent", 0)
        if (
            isinstance(log_exponent, bool)
            or not isinstance(log_exponent, int)
            or not 0 <= log_exponent <= MAX_EXPONENT
        ):
            raise self.fail(f"{where}.log_exponent", f"a whole number from 0 to {MAX_EXPONENT}")
