"""A set of models, one per (call path, metric): what `perfcast model` writes and
`perfcast predict` reads."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from perfcast.errors import InputError
from perfcast.modeling import provenance as _provenance
from perfcast.modeling.pmnf import ArrayLike, Model
from perfcast.modeling.provenance import Provenance
from perfcast.outputs import OutputKind, PathLike, json_with, write_output

FORMAT_VERSION = 1
MODEL_FILE = OutputKind("a perfcast model file", json_with('"perfcast_models"'))


class ModelSet:
    """Models over the same parameters, addressable by (call path, metric)."""

    def __init__(
        self,
        parameters: Sequence[str],
        models: Sequence[Model] = (),
        provenance: Provenance | None = None,
    ):
        self.parameters = list(parameters)
        self.provenance = provenance
        """What is known of the measurements behind the models (None: nothing)."""
        self._models: dict[tuple[str, str], Model] = {}
        for model in models:
            self.add(model)

    def add(self, model: Model) -> None:
        self._models[(model.callpath, model.metric)] = model

    def __getitem__(self, key: tuple[str, str]) -> Model:
        return self._models[key]

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

    # -- JSON ------------------------------------------------------------------------------

    def to_json(self) -> dict:
        data = {
            "perfcast_models": FORMAT_VERSION,
            "parameters": self.parameters,
            "models": [m.to_json() for m in self],
        }
        if self.provenance is not None:
            data[_provenance.KEY] = self.provenance.to_json()
        return data

    def save(self, path: str | Path, inputs: Sequence[PathLike] = ()) -> None:
        """Write the JSON atomically; never over one of ``inputs`` or a file that is not
        an earlier model file (:func:`perfcast.outputs.write_output`)."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n", MODEL_FILE, inputs)

    @classmethod
    def load(cls, path: str | Path) -> ModelSet:
        try:
            data = json.loads(Path(path).read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise InputError(
                "no such model file; create one with `perfcast model FILE -o models.json`",
                path=path,
            ) from None
        except OSError as exc:
            raise InputError(f"cannot read the model file: {exc.strerror}", path=path) from None
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not a model file: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                f"offset {exc.start}); write one with `perfcast model FILE -o models.json`",
                path=path,
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno) from None
        except ValueError as exc:  # an integer of more than 4300 digits
            reason = str(exc).split(";")[0]  # not Python's advice on raising the limit
            raise InputError(f"not a model file: {reason}", path=path) from None
        except RecursionError:
            raise InputError("not a model file: JSON nested too deeply", path=path) from None
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
        return cls(data["parameters"], models, provenance)


MAX_EXPONENT = 64
"""The largest exponent (polynomial or logarithmic) a model file may give a factor: Extra-P's
largest is 3 and perfcast's search goes a few steps beyond; 64 leaves room for any model
written by hand, while larger ones overflow a double at the first parameter value above 2^16."""


def _check_model_file(data: dict, path: str | Path) -> None:
    """Refuse a model file whose content the models cannot be built from or evaluated with,
    naming the key at fault (``models[2].terms[0].coefficient``), so that ``perfcast predict``
    never fails in the middle of evaluating it."""
    _ModelFileCheck(path).file(data)


class _ModelFileCheck:
    def __init__(self, path: str | Path):
        self.path = path

    def fail(self, where: str, what: str) -> InputError:
        return InputError(
            f"{where} must be {what}; write the file again with `perfcast model FILE -o FILE`",
            path=self.path,
        )

    def field(self, table: dict, key: str, where: str) -> object:
        if key not in table:
            raise InputError(f"{where} has no {key!r}", path=self.path)
        return table[key]

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
        parameters = self.field(data, "parameters", "the model file")
        if (
            not isinstance(parameters, list)
            or not all(isinstance(p, str) and p.strip() and p.isprintable() for p in parameters)
            or len(set(parameters)) != len(parameters)
        ):
            raise self.fail("parameters", "a list of distinct parameter names, each one line")
        models = self.field(data, "models", "the model file")
        if not isinstance(models, list):
            raise self.fail("models", "a list")
        for index, model in enumerate(models):
            self.model(model, f"models[{index}]", parameters)

    def model(self, model: object, where: str, parameters: list[str]) -> None:
        if not isinstance(model, dict):
            raise self.fail(where, "a JSON object")
        for key in ("callpath", "metric"):
            if not isinstance(self.field(model, key, where), str):
                raise self.fail(f"{where}.{key}", "a string")
        self.number(self.field(model, "constant", where), f"{where}.constant")
        if model.get("prior") is not None and not isinstance(model["prior"], str):
            raise self.fail(f"{where}.prior", "a string or null")
        warnings = model.get("warnings", [])
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise self.fail(f"{where}.warnings", "a list of strings")
        statistics = model.get("statistics", {})
        if not isinstance(statistics, dict):
            raise self.fail(f"{where}.statistics", "a JSON object")
        for key in ("rss", "smape", "adjusted_r2", "cv_error", "points"):
            if key in statistics:  # nan: not computed (too few points)
                self.number(statistics[key], f"{where}.statistics.{key}", finite=False)
        terms = model.get("terms", [])
        if not isinstance(terms, list):
            raise self.fail(f"{where}.terms", "a list")
        for index, term in enumerate(terms):
            self.term(term, f"{where}.terms[{index}]", parameters)

    def term(self, term: object, where: str, parameters: list[str]) -> None:
        if not isinstance(term, dict):
            raise self.fail(where, "a JSON object")
        self.number(term.get("coefficient"), f"{where}.coefficient")
        factors = term.get("factors")
        if not isinstance(factors, list) or not factors:
            raise self.fail(f"{where}.factors", "a non-empty list")
        for index, factor in enumerate(factors):
            self.factor(factor, f"{where}.factors[{index}]", parameters)

    def factor(self, factor: object, where: str, parameters: list[str]) -> None:
        if not isinstance(factor, dict):
            raise self.fail(where, "a JSON object")
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
