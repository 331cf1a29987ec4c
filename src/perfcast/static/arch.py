"""Architecture description: instruction categories and machine parameters (YAML).

The file shipped beside this module describes x86-64; users pass their own with
``--arch`` to split categories differently or describe another machine. Categories are
tried in file order and the first match wins; an instruction no category claims lands in
``other`` so that totals always add up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from perfcast.errors import InputError
from perfcast.inputs import read_text
from perfcast.lazy import optional_module

DEFAULT_ARCHITECTURE = Path(__file__).with_name("x86_64.yaml")
OTHER = "other"


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    floating_point: bool
    mnemonics: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]

    def matches(self, mnemonic: str) -> bool:
        return mnemonic in self.mnemonics or any(p.search(mnemonic) for p in self.patterns)


@dataclass
class Architecture:
    name: str
    machine: dict[str, float | int | str]
    categories: list[Category]
    _cache: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def category_names(self) -> list[str]:
        return [c.name for c in self.categories] + [OTHER]

    @property
    def floating_point(self) -> frozenset[str]:
        return frozenset(c.name for c in self.categories if c.floating_point)

    def categorize(self, mnemonic: str) -> str:
        """Category of an instruction; prefixes (``rep``, ``lock``, ``bnd``) are ignored."""
        words = mnemonic.split()
        key = (
            words[-1]
            if words and words[0] in ("lock", "bnd", "notrack", "rep", "repe", "repne")
            else mnemonic
        )
        if mnemonic.startswith("rep") and len(words) > 1:
            key = mnemonic
        if key not in self._cache:
            self._cache[key] = next((c.name for c in self.categories if c.matches(key)), OTHER)
        return self._cache[key]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "machine": dict(self.machine),
            "categories": {c.name: c.description for c in self.categories},
            "floating_point": sorted(self.floating_point),
        }


@cache
def load_architecture(path: str | Path = DEFAULT_ARCHITECTURE) -> Architecture:
    """Read and validate an architecture description file."""
    path = Path(path)
    hint = "start from the shipped x86_64.yaml"
    text = read_text(path, "architecture file", hint)
    yaml = optional_module("yaml", "reading architecture files needs PyYAML")
    try:
        aliased = next(
            (t for t in yaml.scan(text) if isinstance(t, yaml.AliasToken | yaml.AnchorToken)),
            None,
        )
        if aliased is not None:
            # nine nested anchors of nine aliases each are a billion entries in 535 bytes
            raise InputError(
                "uses YAML anchors or aliases (& and *), which an architecture file does not "
                f"need and which can expand without bound; write each entry out ({hint})",
                path=path,
                line=aliased.start_mark.line + 1,
            )
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"is not valid YAML ({exc})", path=path) from exc
    if not isinstance(data, dict) or not isinstance(data.get("categories"), list):
        raise InputError("needs a `categories:` list (see the shipped x86_64.yaml)", path=path)
    categories = []
    for index, entry in enumerate(data["categories"]):
        if not isinstance(entry, dict) or "name" not in entry:
            raise InputError(f"category #{index + 1} needs a name", path=path)
        try:
            patterns = tuple(re.compile(p) for p in entry.get("patterns", []))
        except re.error as exc:
            raise InputError(f"category {entry['name']}: bad pattern ({exc})", path=path) from exc
        categories.append(
            Category(
                name=str(entry["name"]),
                description=str(entry.get("description", "")),
                floating_point=bool(entry.get("floating_point", False)),
                mnemonics=frozenset(str(m) for m in entry.get("mnemonics", [])),
                patterns=patterns,
            )
        )
    names = [c.name for c in categories]
    if len(set(names)) != len(names) or OTHER in names:
        raise InputError(f"category names must be unique and not {OTHER!r}", path=path)
    return Architecture(
        str(data.get("name", path.stem)), dict(data.get("machine") or {}), categories
    )
