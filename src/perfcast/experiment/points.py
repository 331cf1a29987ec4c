"""One point of parameter values, written ``p=4096,size=30``: the one spelling of a point.

``perfcast model --at`` (the summary's target) and ``perfcast taint --point`` (the taint
run's point) both take a single point, so both parse it here: the comma separates the
point's coordinates. ``perfcast predict`` is different: its ``p=64,128`` lists several
values of one parameter, one per point (:func:`perfcast.cli.predict.parse_value_lists`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from perfcast.appspec import EXACT, format_value
from perfcast.errors import InputError


def parse_point(text: str, flag: str, parameters: Sequence[str] | None = None) -> dict[str, float]:
    """``p=4096,size=30`` -> ``{"p": 4096, "size": 30}``; parameters it leaves out stay absent.

    An InputError names ``flag`` and the text when an item is not ``NAME=NUMBER``, a value
    is not finite, a name is given twice or, if ``parameters`` are given, is not one of them.
    Integral values up to 2^53 come back as ``int`` so that a value written into a command
    reads ``4``.
    """
    point: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        name = name.strip()
        if not equals or not name or (parameters is not None and name not in parameters):
            raise InputError(_not_an_assignment(text, flag, item, parameters))
        if name in point:
            raise InputError(f"{flag} {text!r}: {name!r} is given twice")
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"{flag} {text!r}: {value.strip()!r} is not a number") from None
        if not math.isfinite(number):
            raise InputError(f"{flag} {text!r}: {name} = {value.strip()} is not a finite number")
        # whole numbers beyond 2^53 stay floats: as Python ints they are not NumPy numbers
        # (a target of 1e20 reached np.log10 as an object and stopped report with a TypeError)
        point[name] = int(number) if number.is_integer() and abs(number) <= EXACT else number
    return point


def format_point(
    point: Mapping[str, float] | Iterable[tuple[str, float]], separator: str = ", "
) -> str:
    """``{"p": 2, "size": 16.0}`` -> ``p=2, size=16``: what :func:`parse_point` reads back.

    Every message, table and report that names a point spells it here, each value by
    :func:`~perfcast.appspec.format_value`, so one point reads the same in ``perfcast model``,
    ``predict``, ``design`` and ``report``. ``point`` may also be ``(name, value)`` pairs,
    e.g. ``zip(parameters, row)``; ``separator=","`` gives the compact form of table cells
    and run ids (``p=2,size=16``).
    """
    pairs = point.items() if isinstance(point, Mapping) else point
    return separator.join(f"{name}={format_value(value)}" for name, value in pairs)


def _not_an_assignment(text: str, flag: str, item: str, parameters: Sequence[str] | None) -> str:
    if parameters is None:
        return f"{flag} {text!r}: expected NAME=VALUE[,NAME=VALUE...], got {item!r}"
    if not parameters:
        return f"{flag} needs parameters, and the models have none"
    return (
        f"{flag} {text!r}: {item!r} is not NAME=VALUE over the parameters "
        f"{', '.join(parameters)} (e.g. {flag} {parameters[0]}=4096)"
    )


__all__ = ["format_point", "format_value", "parse_point"]
