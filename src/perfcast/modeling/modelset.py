"""A set of models, one per (call path, metric): what `perfcast model` writes and
`perfcast predict` reads."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from perfcast.errors import InputError
from perfcast.modeling.pmnf import ArrayLike, Model

FORMAT_VERSION = 1


class ModelSet:
    """Models over the same parameters, addressable by (call path, metric)."""

    def __init__(self, parameters: Sequence[str], models: Sequence[Model] = ()):
        self.parameters = list(parameters)
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
        return {
            "perfcast_models": FORMAT_VERSION,
            "parameters": self.parameters,
            "models": [m.to_json() for m in self],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelSet:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise InputError(
                "no such model file; create one with `perfcast model FILE -o models.json`",
                path=path,
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno) from None
        if not isinstance(data, dict) or "perfcast_models" not in data:
            raise InputError("not a perfcast model file (no 'perfcast_models' key)", path=path)
        try:
            models = [Model.from_json(m) for m in data["models"]]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise InputError(f"malformed model entry ({exc})", path=path) from None
        return cls(data["parameters"], models)
