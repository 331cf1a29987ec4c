"""Call paths as people name them: short function names and ``--callpath`` patterns.

Instrumented C++ programs name each frame of a call path by its full signature, return
type and parameter list included (``void CalcForceForNodes(Domain&)``), and template-heavy
code makes a frame hundreds of characters long. People think of a function by its name, so
the summary shows frames shortened to the qualified name (templates folded to ``<...>``),
and ``--callpath`` accepts that name or a glob besides the exact call path.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR, join_callpath, split_callpath

FOLDED_TEMPLATE = "<...>"
ELLIPSIS = "..."
GLOB_CHARACTERS = frozenset("*?[")

_TRAILING_QUALIFIER = re.compile(r"\s*(?:\bconst\b|\bvolatile\b|\bnoexcept\b|&&|&)\s*$")
_OPERATOR = re.compile(r"\boperator\b")


def function_name(frame: str, *, fold: bool = True) -> str:
    """The qualified name of a frame's function: ``ns::Grid<...>::update`` from
    ``void ns::Grid<double, 3>::update(double const*, int) const`` (with ``fold=False``
    ``ns::Grid<double, 3>::update``: the template arguments tell instantiations apart); a
    frame that is no signature (``main``, ``MPI_Allreduce``) comes back unchanged."""
    folded = _fold_templates if fold else _compact_templates
    text = frame.strip()
    while True:  # cv/ref qualifiers of member functions follow the parameter list
        stripped = _TRAILING_QUALIFIER.sub("", text)
        if stripped == text:
            break
        text = stripped
    if text.endswith(")"):
        opening = _matching_open_paren(text)
        if opening > 0:
            text = text[:opening].rstrip()
    operator = list(_OPERATOR.finditer(text))
    if operator:  # "operator<<" and "operator->" hold brackets that open no template
        start = operator[-1].start()
        head, tail = text[:start], text[start:]
        # "Grid<...>::operator()" keeps its class, "std::ostream& operator<<" drops its type
        scope = "" if head[-1:].isspace() else _without_return_type(folded(head))
        return scope + tail
    return _without_return_type(folded(text))


def _compact_templates(text: str) -> str:
    """``text`` with the spaces inside template arguments removed
    (``std::vector<int,std::allocator<int>>``): the return type is then whatever precedes
    the last space, as in the folded spelling."""
    out = []
    depth = 0
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif char.isspace() and depth:
            continue
        out.append(char)
    return "".join(out)


def _matching_open_paren(text: str) -> int:
    """Index of the ``(`` that the final ``)`` closes, or -1 if unbalanced."""
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == ")":
            depth += 1
        elif text[index] == "(":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _fold_templates(text: str) -> str:
    """Every outermost ``<...>`` argument list replaced by :data:`FOLDED_TEMPLATE`."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == "<":
            if depth == 0:
                out.append(FOLDED_TEMPLATE)
            depth += 1
        elif char == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _without_return_type(text: str) -> str:
    """The last word outside parentheses: ``static double* ns::f`` -> ``ns::f``, while
    ``(anonymous namespace)::f`` keeps its parenthesised space."""
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == " " and depth == 0:
            start = index + 1
    return text[start:].lstrip("*&") or text


def short_callpath(callpath: str, width: int = 100, *, fold: bool = True) -> str:
    """``callpath`` with every frame shortened to its function name (``fold``: template
    arguments folded) and, if still longer than ``width``, the middle frames elided: the
    root and the innermost frames tell where the time goes; the full path stays in
    ``--full``."""
    frames = _collapse_recursion(
        [function_name(frame, fold=fold) for frame in split_callpath(callpath)]
    )
    text = join_callpath(frames)
    if len(text) <= width or len(frames) <= 2:
        return text
    kept = [frames[-1]]
    for frame in reversed(frames[1:-1]):
        candidate = [frame, *kept]
        if len(join_callpath([frames[0], ELLIPSIS, *candidate])) > width:
            break
        kept = candidate
    if len(kept) == len(frames) - 1:
        return text
    return join_callpath([frames[0], ELLIPSIS, *kept])


def _collapse_recursion(frames: Sequence[str]) -> list[str]:
    """Runs of one function calling itself as one frame with the depth, ``f x7``: deep
    recursion (``std::_Rb_tree::_M_erase``) otherwise elides the frames that differ, so
    two depths would read the same and a name could not tell them apart."""
    collapsed: list[str] = []
    depths: list[int] = []
    for frame in frames:
        if collapsed and collapsed[-1] == frame:
            depths[-1] += 1
        else:
            collapsed.append(frame)
            depths.append(1)
    return [
        f"{frame} x{depth}" if depth > 1 else frame
        for frame, depth in zip(collapsed, depths, strict=True)
    ]


def display_names(callpaths: Iterable[str], width: int = 100) -> dict[str, str]:
    """Each call path's :func:`short_callpath`. Where two of ``callpaths`` would read the
    same, they keep their template arguments (``std::vector<int>::resize`` beside
    ``std::vector<double>::resize``); where even those are the same (overloads of one
    name), their full spelling."""
    names = {c: short_callpath(c, width) for c in callpaths}
    for callpath in _clashing(names):
        names[callpath] = short_callpath(callpath, width, fold=False)
    for callpath in _clashing(names):
        names[callpath] = callpath
    return names


def _clashing(names: Mapping[str, str]) -> list[str]:
    """The call paths whose names another one shares."""
    counts = Counter(names.values())
    return [callpath for callpath, name in names.items() if counts[name] > 1]


def name_list(
    callpaths: Iterable[str],
    *,
    tags: Mapping[str, Sequence[str]] | None = None,
    shown: int = 6,
    width: int = 100,
) -> str:
    """A one-line list of call paths (or functions) for a note: short names, each with its
    ``tags`` (``CommSend [cpu_time]``), the first ``shown`` of them, the rest counted. A
    note listing dozens of full C++ signatures runs to thousands of characters nobody
    reads; ``--full`` and the files keep them."""
    names = display_names(list(dict.fromkeys(callpaths)), width)
    listed = [
        f"{name} [{', '.join(tags[callpath])}]" if tags and tags.get(callpath) else name
        for callpath, name in names.items()
    ]
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return ", ".join(listed[:shown]) + more


def _is_glob(pattern: str) -> bool:
    return any(char in GLOB_CHARACTERS for char in pattern)


def _frame_matches(pattern: str, frame: str) -> bool:
    """A frame matches a glob by its full signature or its function name, and a plain
    name by the function name, qualified or not, with or without template arguments
    (``update`` and ``Grid<...>::update`` match ``void ns::Grid<int>::update(int)``)."""
    name = function_name(frame)
    if _is_glob(pattern):
        return fnmatch.fnmatchcase(frame, pattern) or fnmatch.fnmatchcase(name, pattern)
    bare = name.replace(FOLDED_TEMPLATE, "")
    return pattern in (frame, name, bare) or any(
        spelling.endswith("::" + pattern) for spelling in (name, bare)
    )


def _path_matches(pattern: str, callpath: str) -> bool:
    """A pattern with ``->`` is matched against the whole call path: frame by frame (each
    as :func:`_frame_matches`), or as one glob over the path spelled in full, in function
    names or in function names without template arguments (``main->*`` spans frames);
    without ``->``, against the innermost frame."""
    frames = split_callpath(callpath)
    if SEPARATOR not in pattern:
        return _frame_matches(pattern.strip(), frames[-1])
    wanted = split_callpath(pattern)
    if len(wanted) == len(frames) and all(map(_frame_matches, wanted, frames)):
        return True
    if not _is_glob(pattern):
        return False
    names = [function_name(f) for f in frames]
    spellings = (
        callpath,
        join_callpath(names),
        join_callpath(n.replace(FOLDED_TEMPLATE, "") for n in names),
    )
    normal = join_callpath(wanted)
    return any(fnmatch.fnmatchcase(spelling, normal) for spelling in spellings)


def select_callpaths(
    patterns: Sequence[str], callpaths: Iterable[str], source: str | None = None
) -> list[str]:
    """The call paths ``patterns`` name, in measurement order. Each pattern is an exact call
    path, a function name (matching the innermost frame: ``CalcForceForNodes``), or a glob
    (``*CalcForce*``; with ``->`` matched against the whole path). A pattern that matches
    nothing is an InputError that suggests the closest function names."""
    known = list(dict.fromkeys(callpaths))
    exact = set(known)
    chosen: set[str] = set()
    for pattern in patterns:
        normal = join_callpath(split_callpath(pattern))
        if normal in exact:
            chosen.add(normal)
            continue
        matched = [c for c in known if _path_matches(pattern, c)]
        if not matched:
            raise InputError(_no_match_message(pattern, known), path=source)
        chosen.update(matched)
    return [c for c in known if c in chosen]


def _no_match_message(pattern: str, callpaths: Sequence[str]) -> str:
    names = list(
        dict.fromkeys(
            function_name(split_callpath(c)[-1]).replace(FOLDED_TEMPLATE, "") for c in callpaths
        )
    )
    close = difflib.get_close_matches(pattern.strip("*?"), names, n=5, cutoff=0.5)
    hint = f"; close function names: {', '.join(close)}" if close else ""
    return (
        f"--callpath {pattern!r} matches no call path of the {len(callpaths):,} measured; give "
        "a call path, the name of its innermost function (e.g. CalcForceForNodes) or a "
        f"glob (e.g. '*Force*'; with '->' it is matched against the whole path){hint}"
    )
