"""Modeler options, each declared once.

An option is a dataclass field of a modeler (or of :class:`~perfcast.modeling.SearchSpace`)
made by :func:`option`: its default, what it means and why the default (:attr:`Option.doc`),
which values it takes, and, where the command line offers it, its flag (:class:`Flag`).
Everything else is derived from that one declaration, so nothing can drift apart:

* the constructor (the dataclass's ``__init__``) and its checks (:meth:`Options._validate`):
  a value an option does not take is an :class:`OptionError` naming the option, whether it
  came from Python or from a flag;
* ``get_params``/``set_params``/``with_params`` (:class:`Estimator`);
* the ``Args:`` section of the class docstring (:func:`document_options`);
* the argparse flags with their help and defaults (:func:`add_flags`) and the modeler the
  parsed flags configure (:func:`from_arguments`), so ``perfcast model`` refuses exactly
  what the library refuses, naming the flag instead of the parameter.

This is Extra-P's option registry (one declaration becomes a CLI flag) in dataclass form;
dataclasses rather than pydantic because the checks are few and start-up matters.
"""

from __future__ import annotations

import argparse
import numbers
import textwrap
from collections.abc import Callable, Collection, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, TypeVar

from perfcast.errors import InputError

OPTION = "{option}"
"""Where an :class:`OptionError`'s message names the option."""

_NO_CONST = object()

T = TypeVar("T", bound="Options")


class OptionError(InputError):
    """A value an option does not take.

    Attributes:
        option: the option's parameter name; ``space__exponents`` for an option of a nested
            object (the spelling of :meth:`Options.with_params`).
        problem: the message with :data:`OPTION` where the option is named, so the command
            line can name the flag instead (:meth:`spelled`).
    """

    def __init__(self, option: str, problem: str):
        self.option = option
        self.problem = problem
        super().__init__(problem.replace(OPTION, option))

    def spelled(self, label: str) -> InputError:
        """The same error naming the option as ``label`` (e.g. its command-line flag)."""
        return InputError(self.problem.replace(OPTION, label))

    def nested(self, parent: str) -> OptionError:
        """The same error for the option of the object that option ``parent`` holds."""
        return OptionError(f"{parent}__{self.option}", self.problem)


@dataclass(frozen=True)
class Flag:
    """How an option appears on the command line.

    Attributes:
        spelling: the flag, e.g. ``--aggregate`` for ``aggregation``.
        help: the help text; ``{default}`` is replaced by the option's default.
        type: argparse's conversion of the text (``int``, ``float``); ``None`` keeps the
            text for the option's :attr:`Option.parse`, or passes it on as a string.
        const: for a switch without a value: what giving it sets the option to
            (``--unweighted`` sets ``weighting`` to ``"none"``).
    """

    spelling: str
    help: str | None = None
    type: Callable[[str], Any] | None = None
    const: Any = _NO_CONST


@dataclass(frozen=True)
class Option:
    """What values an option takes, what it means, and its flag.

    Attributes:
        doc: the option's entry in the class docstring: what it does and why the default.
        kind: the type of a value (default: the default's type; ``int`` refuses floats and
            bools, ``float`` takes any real number but a bool).
        choices: the only values allowed.
        minimum: the smallest value allowed; ``below``: the bound values must stay under.
        optional: ``None`` is allowed (it means what :attr:`doc` says).
        check: a further check of a (valid-typed) value: ``None`` or the problem, with
            :data:`OPTION` where the option is named.
        parse: the value from its command-line text (``"0,1/2,1"``); a ``ValueError``
            says what is wrong with the text.
        flag: the command-line flag, if any.
    """

    doc: str
    kind: type | None = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    below: float | None = None
    optional: bool = False
    check: Callable[[Any], str | None] | None = None
    parse: Callable[[str], Any] | None = None
    flag: Flag | None = None

    def problem(self, value: Any, kind: type | None) -> str | None:
        """What is wrong with ``value`` for this option (of type ``kind`` unless
        :attr:`kind` says otherwise), or ``None``."""
        if value is None and self.optional:
            return None
        if self.choices is not None:
            if value not in self.choices:
                listed = ", ".join(map(str, self.choices))
                return f"unknown {OPTION} {value!r}; choose one of {listed}"
            return None
        kind = self.kind or kind
        if kind is not None and not _is_kind(value, kind):
            return f"{OPTION} must be {_kind_name(kind)}, not {value!r}"
        lowest = float("-inf") if self.minimum is None else self.minimum
        if self.below is not None and not lowest <= value < self.below:
            return f"{OPTION} must be from {lowest:g} to below {self.below:g}, not {value}"
        if self.minimum is not None and not value >= self.minimum:
            return f"{OPTION} must be at least {self.minimum:g}, not {value}"
        return None if self.check is None else self.check(value)


def option(
    default: Any = MISSING,
    *,
    default_factory: Callable[[], Any] | None = None,
    **declaration: Any,
) -> Any:
    """A dataclass field that is an option: ``default`` (or ``default_factory``) and the
    :class:`Option` made of ``declaration``."""
    metadata = {"option": Option(**declaration)}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


def _kind_name(kind: type) -> str:
    return {int: "an integer", float: "a number", bool: "True or False", str: "a string"}.get(
        kind, f"a {kind.__name__}"
    )


def _default(declared: Field[Any]) -> Any:
    if declared.default is not MISSING:
        return declared.default
    assert declared.default_factory is not MISSING, f"option {declared.name} has no default"
    return declared.default_factory()


def declared_options(cls: type) -> Iterator[tuple[Field[Any], Option]]:
    """Every option of the dataclass ``cls``, in declaration order."""
    for declared in fields(cls):
        if "option" in declared.metadata:
            yield declared, declared.metadata["option"]


class Options:
    """Base of a dataclass whose fields are options: checked on construction, read by
    :meth:`get_params`, changed in a checked copy by :meth:`with_params`.

    A subclass checks options together (a limit on one that depends on another) in
    :meth:`_check_together`, raising :class:`OptionError`.
    """

    def __post_init__(self) -> None:
        self._validate()

    def _validate(self) -> None:
        for declared, declaration in declared_options(type(self)):
            kind = declaration.kind
            if kind is None and declared.default is not MISSING and declared.default is not None:
                kind = type(declared.default)
            elif kind is None and isinstance(declared.default_factory, type):
                kind = declared.default_factory
            problem = declaration.problem(getattr(self, declared.name), kind)
            if problem is not None:
                raise OptionError(declared.name, problem)
        self._check_together()

    def _check_together(self) -> None:
        """Checks that involve more than one option (none by default)."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The options as given to the constructor, by name; with ``deep``, also the options
        of option values that have options themselves, as ``name__option`` (scikit-learn's
        convention: ``space__exponents``)."""
        params: dict[str, Any] = {}
        for declared, _ in declared_options(type(self)):
            value = getattr(self, declared.name)
            params[declared.name] = value
            if deep and isinstance(value, Options):
                for name, inner in value.get_params(deep=True).items():
                    params[f"{declared.name}__{name}"] = inner
        return params

    def with_params(self: T, **changes: Any) -> T:
        """A copy configured like this one except for ``changes`` (option names; an option
        of a nested object as ``name__option``, which changes a copy of that object)."""
        names = {declared.name for declared, _ in declared_options(type(self))}
        direct = {k: v for k, v in changes.items() if "__" not in k}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in changes.items():
            if "__" in key:
                outer, inner = key.split("__", 1)
                nested.setdefault(outer, {})[inner] = value
        unknown = sorted((set(direct) | set(nested)) - names)
        if unknown:
            raise InputError(
                f"{type(self).__name__} has no option {', '.join(map(repr, unknown))}; "
                f"its options: {', '.join(sorted(names))}"
            )
        params = {**self.get_params(deep=False), **direct}
        for outer, inner_changes in nested.items():
            holder = params[outer]
            if not isinstance(holder, Options):
                raise InputError(f"option {outer!r} has no options of its own to set")
            try:
                params[outer] = holder.with_params(**inner_changes)
            except OptionError as exc:
                raise exc.nested(outer) from None
        return type(self)(**params)


class Estimator(Options):
    """A modeler, configured the scikit-learn way (see :mod:`perfcast.modeling`): its
    parameters are its options, kept as given; :meth:`set_params` reconfigures it."""

    def set_params(self: T, **params: Any) -> T:
        """Change options in place (checked first: an invalid value changes nothing);
        returns the modeler."""
        updated = self.with_params(**params)
        for declared, _ in declared_options(type(self)):
            setattr(self, declared.name, getattr(updated, declared.name))
        return self


def document_options(cls: type[T]) -> type[T]:
    """Append the ``Args:`` section, made from the option declarations, to ``cls``'s
    docstring (the help text the source and ``help()`` show comes from one place)."""
    entries = []
    for declared, declaration in declared_options(cls):
        default = declared.default
        shown = f" Default ``{default!r}``." if isinstance(default, int | float | str) else ""
        text = textwrap.fill(
            f"{declared.name}: {declaration.doc}{shown}",
            width=88,
            initial_indent=" " * 8,
            subsequent_indent=" " * 12,
        )
        entries.append(text)
    cls.__doc__ = f"{(cls.__doc__ or '').rstrip()}\n\n    Args:\n" + "\n".join(entries) + "\n"
    return cls


def _flags(
    cls: type, prefix: str = "", *, nested: bool = True, only: Collection[str] | None = None
) -> Iterator[tuple[str, Any, Option, Flag]]:
    """(parameter path, default, declaration, flag) of every option of ``cls`` with a flag,
    or of the options named in ``only``, those of nested option objects (the search space)
    included unless ``nested`` is False, in declaration order."""
    for declared, declaration in declared_options(cls):
        if only is not None and declared.name not in only:
            continue
        default = _default(declared)
        if declaration.flag is not None:
            yield prefix + declared.name, default, declaration, declaration.flag
        if nested and isinstance(default, Options):
            yield from _flags(type(default), f"{prefix}{declared.name}__")


def _metavar(flag: Flag) -> str:
    """argparse's own placeholder for the flag (``--log-exponents`` -> ``LOG_EXPONENTS``),
    not one made of the parameter path it stores under."""
    return flag.spelling.lstrip("-").replace("-", "_").upper()


def add_flags(
    group: argparse._ActionsContainer,
    cls: type[Options],
    *,
    dest_prefix: str = "",
    nested: bool = True,
    only: Collection[str] | None = None,
) -> None:
    """Add the flags of ``cls``'s options to ``group``; each stores under its parameter
    path (``aggregation``, ``space__exponents``) for :func:`from_arguments`, after
    ``dest_prefix`` where two modelers' options share one parser (both have an
    ``aggregation``). ``nested=False`` leaves out the options of nested option objects
    (the effort modeler's time modeler has flags of its own); ``only`` names the options
    of a command that takes a few of them (``perfcast report`` the effort modeler's
    ``ranks``), so that a flag shared by two commands is still declared once."""
    for path, default, declaration, flag in _flags(cls, nested=nested, only=only):
        arguments: dict[str, Any] = {"dest": dest_prefix + path}
        if flag.help is not None:
            arguments["help"] = flag.help.replace("{default}", f"{default}")
        if flag.const is not _NO_CONST:
            arguments.update(action="store_const", const=flag.const, default=default)
        elif declaration.parse is not None:
            arguments.update(default=None, metavar=_metavar(flag))  # None: not given
        else:
            arguments.update(default=default, type=flag.type, choices=declaration.choices)
            if declaration.choices is None:
                arguments["metavar"] = _metavar(flag)
        group.add_argument(flag.spelling, **arguments)


def from_arguments(
    cls: type[T],
    namespace: argparse.Namespace,
    *,
    dest_prefix: str = "",
    nested: bool = True,
    only: Collection[str] | None = None,
    **fixed: Any,
) -> T:
    """``cls`` configured by its flags as parsed into ``namespace`` (by :func:`add_flags`,
    with the same ``dest_prefix``, ``nested`` and ``only``) and by ``fixed`` options; a
    value the option does not take is an :class:`InputError` naming the flag, raised
    before any input is read."""
    changes = dict(fixed)
    spellings = {}
    for path, _, declaration, flag in _flags(cls, nested=nested, only=only):
        spellings[path] = flag.spelling
        value = getattr(namespace, dest_prefix + path)
        if declaration.parse is not None:
            if value is None:
                continue
            try:
                value = declaration.parse(value)
            except ValueError as exc:
                raise InputError(f"{flag.spelling}: {exc}") from None
        changes[path] = value
    try:
        return cls().with_params(**changes)
    except OptionError as exc:
        raise exc.spelled(spellings.get(exc.option, exc.option)) from None
