"""SimGrid platforms described from a few numbers: the machines a prediction is made for.

A performance engineer knows a target machine by its node count, cores per node, the speed
of a core and its network's latency and bandwidth, and by the shape of the network; SimGrid
wants an XML platform. :class:`PlatformSpec` is the first, :meth:`PlatformSpec.to_xml` the
second. Three topologies cover the paper's questions (what if the cluster were larger, the
network a fat tree, the job split over two sites):

- ``flat``: one SimGrid ``<cluster>``: every node has a private link of ``bandwidth`` and
  ``latency`` to a backbone of ``backbone_bandwidth``.
- ``fat-tree``: the same nodes under a two-level fat tree (SimGrid's ``FAT_TREE`` cluster):
  nodes per leaf switch is the largest divisor of the node count not above its square root,
  each leaf switch with two uplinks, so traffic between leaves shares switch links.
- ``two-clusters``: two flat clusters of half the nodes each, joined by one link of
  ``inter_bandwidth`` and ``inter_latency`` (a job split over two sites).

A platform may carry SimGrid configuration (``<config>``): ``perfcast platform calibrate``
(:mod:`.calibrate`) writes this machine as a flat cluster of one-core nodes whose SMPI
factors travel in the file.

Hosts are named ``node-<i>`` (``site-<k>-node-<i>`` for two clusters); :meth:`hosts` lists
one entry per core, node by node, which is how ``smpirun``'s host file places ranks.
Quantities are SI numbers (bytes/s, s, flop/s), written out with SimGrid's units.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import quoteattr

from perfcast.errors import InputError
from perfcast.inputs import read_text

TOPOLOGIES = ("flat", "fat-tree", "two-clusters")

MAX_NODES = 1_000_000
"""More hosts than SimGrid simulates in useful time on one machine (a 1,024-node cluster
replays a small program in about a second; SimGrid's own examples stop near a million)."""

MAX_RANKS = 1 << 20
"""Most cores a platform may have in all, one rank each: the host file and the trace have a
line and a file per rank, and SMPI runs every rank in one process, so a platform beyond
about a million ranks costs more memory and hours than any prediction here is worth (and a
``core="100000000000"`` or a ``radical="0-99999999999"`` would exhaust memory before
anything ran)."""


@dataclass(frozen=True)
class PlatformSpec:
    """A target machine.

    Attributes:
        name: the platform's name (the XML zone's id).
        nodes: compute nodes.
        cores: cores per node (ranks per node).
        speed: flop/s of one core, as SimGrid simulates compute ("1Gf" = 1e9).
        bandwidth: bytes/s of a node's link.
        latency: seconds of a node's link.
        backbone_bandwidth: bytes/s of the switch all nodes share (default 10x
            ``bandwidth``: a non-blocking switch for a few concurrent transfers).
        topology: one of :data:`TOPOLOGIES`.
        inter_bandwidth, inter_latency: the link between the two clusters of
            ``two-clusters`` (default a tenth of ``bandwidth`` and 100x ``latency``).
        config: SimGrid configuration the file carries (``<config>``: ``smpi/bw-factor``
            and ``smpi/lat-factor`` of a calibrated machine), as (key, value) pairs.
        properties: (key, value) pairs recorded on the zone (``<prop>``), such as the
            compute reference rate of a calibrated machine; SimGrid ignores them.
        origin: what wrote the platform, for the comment at its top.
    """

    name: str
    nodes: int
    cores: int = 1
    speed: float = 1e9
    bandwidth: float = 1.25e9
    latency: float = 1e-6
    backbone_bandwidth: float | None = None
    topology: str = "flat"
    inter_bandwidth: float | None = None
    inter_latency: float | None = None
    config: tuple[tuple[str, str], ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    origin: str = "perfcast platform describe"

    def __post_init__(self) -> None:
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise InputError(f"platform name {self.name!r}: use letters, digits, - and _")
        if self.topology not in TOPOLOGIES:
            raise InputError(f"topology {self.topology!r}: choose one of {', '.join(TOPOLOGIES)}")
        for field, value, low in (("nodes", self.nodes, 1), ("cores", self.cores, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{field} must be a whole number from {low}, not {value!r}")
        if self.nodes > MAX_NODES:
            raise InputError(f"nodes {self.nodes}: at most {MAX_NODES:,} can be simulated")
        if self.nodes * self.cores > MAX_RANKS:
            raise InputError(
                f"{self.nodes:,} nodes x {self.cores:,} cores is {self.nodes * self.cores:,} "
                f"ranks: at most {MAX_RANKS:,} can be simulated (one rank per core)"
            )
        if self.topology == "two-clusters" and self.nodes < 2:
            raise InputError("two-clusters needs at least 2 nodes, one per cluster")
        for field, number in (
            ("speed", self.speed),
            ("bandwidth", self.bandwidth),
            ("latency", self.latency),
            ("backbone_bandwidth", self.backbone_bandwidth),
            ("inter_bandwidth", self.inter_bandwidth),
            ("inter_latency", self.inter_latency),
        ):
            if number is None:
                continue
            positive = number > 0 or (number == 0 and field.endswith("latency"))
            if not (isinstance(number, int | float) and math.isfinite(number) and positive):
                raise InputError(f"{field} must be a positive finite number, not {number!r}")
        # the defaults derived from the numbers given must be numbers too (--bandwidth 1e308
        # wrote bb_bw="infBps", --bandwidth 5e-324 an inter-site link of "0.0Bps")
        derived = [("backbone_bandwidth", self.backbone, f"10 x bandwidth {self.bandwidth!r}")]
        if self.topology == "two-clusters":
            derived += [
                ("inter_bandwidth", self.site_bandwidth, f"bandwidth {self.bandwidth!r} / 10"),
                ("inter_latency", self.site_latency, f"100 x latency {self.latency!r}"),
            ]
        for field, number, default in derived:
            positive = number > 0 or (number == 0 and field.endswith("latency"))
            if not (math.isfinite(number) and positive):
                option = field.replace("_", "-")
                raise InputError(
                    f"{field} defaults to {default}, which is {number!r}: give it "
                    f"(--{option}) as a positive finite number"
                )

    @property
    def backbone(self) -> float:
        """bytes/s of the switch: ``backbone_bandwidth``, or 10x ``bandwidth``."""
        return self.backbone_bandwidth or 10 * self.bandwidth

    @property
    def site_bandwidth(self) -> float:
        """bytes/s of the two-clusters link: ``inter_bandwidth``, or a tenth of ``bandwidth``."""
        return self.inter_bandwidth or self.bandwidth / 10

    @property
    def site_latency(self) -> float:
        """seconds of the two-clusters link: ``inter_latency``, or 100x ``latency``."""
        return self.latency * 100 if self.inter_latency is None else self.inter_latency

    def hosts(self) -> list[str]:
        """One host name per core, node by node: a host file placing rank i on core i."""
        return [name for name in self._node_names() for _ in range(self.cores)]

    def to_xml(self) -> str:
        """The SimGrid platform (DTD version 4.1)."""
        body = {
            "flat": self._flat,
            "fat-tree": self._fat_tree,
            "two-clusters": self._two_clusters,
        }[self.topology]()
        config = "".join(_prop(key, value, "    ") for key, value in self.config)
        properties = "".join(_prop(key, value, "    ") for key, value in self.properties)
        return (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            f"<!-- {self.origin}: {self._summary()} -->\n"
            '<platform version="4.1">\n'
            + (f"  <config>\n{config}  </config>\n" if config else "")
            + f'  <zone id={quoteattr(self.name)} routing="Full">\n'
            f"{properties}{body}"
            "  </zone>\n"
            "</platform>\n"
        )

    # -- topologies --------------------------------------------------------------------

    def _node_names(self) -> list[str]:
        if self.topology != "two-clusters":
            return [f"node-{i}" for i in range(self.nodes)]
        first = (self.nodes + 1) // 2
        return [f"site-0-node-{i}" for i in range(first)] + [
            f"site-1-node-{i}" for i in range(self.nodes - first)
        ]

    def _cluster(self, ident: str, prefix: str, count: int, extra: str = "") -> str:
        backbone = self.backbone
        attributes = {
            "id": ident,
            "prefix": prefix,
            "suffix": "",
            "radical": f"0-{count - 1}",
            "core": str(self.cores),
            "speed": f"{self.speed!r}f",
            "bw": f"{self.bandwidth!r}Bps",
            "lat": f"{self.latency!r}s",
            "bb_bw": f"{backbone!r}Bps",
            "bb_lat": "0s",
        }
        text = " ".join(f"{key}={quoteattr(value)}" for key, value in attributes.items())
        return f"    <cluster {text}{extra}/>\n"

    def _flat(self) -> str:
        return self._cluster(f"{self.name}-cluster", "node-", self.nodes)

    def _fat_tree(self) -> str:
        leaf = max(d for d in range(1, math.isqrt(self.nodes) + 1) if self.nodes % d == 0)
        switches = self.nodes // leaf
        uplinks = min(2, switches)
        parameters = f"2;{leaf},{switches};1,{uplinks};1,1"
        extra = f' topology="FAT_TREE" topo_parameters={quoteattr(parameters)}'
        return self._cluster(f"{self.name}-cluster", "node-", self.nodes, extra)

    def _two_clusters(self) -> str:
        first = (self.nodes + 1) // 2
        bandwidth, latency = self.site_bandwidth, self.site_latency
        sites = [
            self._cluster("site-0", "site-0-node-", first),
            self._cluster("site-1", "site-1-node-", self.nodes - first),
        ]
        link = f'    <link id="inter-site" bandwidth="{bandwidth!r}Bps" latency="{latency!r}s"/>\n'
        route = (
            '    <zoneRoute src="site-0" dst="site-1" gw_src="site-0-node-site-0_router" '
            'gw_dst="site-1-node-site-1_router">\n'
            '      <link_ctn id="inter-site"/>\n'
            "    </zoneRoute>\n"
        )
        return f"{''.join(sites)}{link}{route}"

    def _summary(self) -> str:
        text = (
            f"{self.name}: {self.nodes} node(s) x {self.cores} core(s) of {self.speed:g} flop/s, "
            f"{self.topology}, links {self.bandwidth:g} B/s and {self.latency:g} s"
        )
        return text.replace("--", "- -")  # an XML comment may not hold "--"


def _prop(key: str, value: str, indent: str) -> str:
    return f"{indent}<prop id={quoteattr(key)} value={quoteattr(value)}/>\n"


FACTOR_KEYS = ("smpi/bw-factor", "smpi/lat-factor")
"""SMPI's piecewise corrections of a link's bandwidth and latency by message size."""

NEUTRAL_FACTORS: tuple[str, ...] = tuple(f"--cfg={key}:0:1" for key in FACTOR_KEYS)
"""SimGrid's spelling of "factor 1 from message size 0 on" (``smpi/bw-factor:1`` crashes):
without them SMPI applies factors fitted to some other network, and a described platform
would not mean its numbers. A platform file whose ``<config>`` sets a factor keeps it:
SimGrid lets the command line win over the file ("already defined by user")."""

_FACTOR_SEGMENT = re.compile(r"^[0-9]+:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")

REFERENCE_SPEED = 1e9
"""flop/s that stands for "one core of the machine a trace was recorded on".

A traced run writes each compute block as ``seconds x REFERENCE_SPEED`` flops, so a
platform whose cores have speed ``k x REFERENCE_SPEED`` runs that block ``k`` times faster
than the traced machine did. ``perfcast platform describe --speed`` is in flop/s on this
scale (1e9 = as fast as this machine)."""


@dataclass(frozen=True)
class PlatformFile:
    """A SimGrid platform file as a replay needs it: where it is, what it is called, the
    host of every core (rank i runs on ``hosts[i]``), each host's speed, and the SMPI
    options the replay passes on the command line.

    Read from any SimGrid XML (``<host>`` and ``<cluster>`` elements), whether perfcast
    wrote it or not; see :func:`read_platform`.
    """

    path: Path
    name: str
    hosts: tuple[str, ...]
    speeds: Mapping[str, float]
    smpi_options: tuple[str, ...] = NEUTRAL_FACTORS


_SPEED = re.compile(r"^\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([kMGTPE]?)f(?:lops)?\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def _speed(text: str, path: Path, element: str) -> float:
    """flop/s of a SimGrid speed ("1Gf", "2.5e9f", "100Mflops"); the first of a list."""
    found = _SPEED.match(text.split(",")[0])
    if found is None:
        raise InputError(f"{element}: speed {text!r} is not a SimGrid speed such as 1Gf", path=path)
    return float(found.group(1)) * _PREFIX[found.group(2)]


def _radical(text: str, path: Path, cluster: str) -> list[int]:
    """The numbers of a cluster's ``radical`` ("0-7", "0-3,8,10-11"), at most
    :data:`MAX_RANKS` of them."""
    ranges = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise InputError(f"cluster {cluster!r}: radical {text!r} is not like 0-7", path=path)
        ranges.append(range(int(low), int(high or low) + 1))
    if sum(len(r) for r in ranges) > MAX_RANKS:
        raise InputError(
            f"cluster {cluster!r}: radical {text[:40]!r} names more than {MAX_RANKS:,} hosts, "
            "more ranks than can be simulated",
            path=path,
        )
    return [number for numbers in ranges for number in numbers]


def read_platform(path: Path) -> PlatformFile:
    """The hosts, speeds and SMPI options of the SimGrid platform file ``path``.

    Hosts are listed in document order, one entry per core (a ``core="4"`` host takes
    four consecutive ranks), which is how a host file places ranks. The SMPI options are
    the neutral factors, less those the file's ``<config>`` sets. Errors name the file
    and the element.
    """
    text = read_text(
        path,
        "SimGrid platform",
        "write one with perfcast platform describe or perfcast platform calibrate",
    )
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        line = error.position[0]
        raise InputError(
            f"not a SimGrid platform (XML error: {error})", path=path, line=line
        ) from None
    if root.tag != "platform":
        raise InputError(f"not a SimGrid platform: the root element is <{root.tag}>", path=path)
    hosts: list[str] = []
    speeds: dict[str, float] = {}

    def add(name: str, cores: int) -> None:
        _check_host_name(name, path)
        if len(hosts) + cores > MAX_RANKS:
            raise InputError(
                f"the platform has more than {MAX_RANKS:,} cores (at host {name[:40]!r}): more "
                "ranks than can be simulated",
                path=path,
            )
        hosts.extend([name] * cores)

    for element in root.iter():
        if element.tag == "host":
            name = element.get("id", "")
            speeds[name] = _speed(element.get("speed", ""), path, f"host {name!r}")
            add(name, _cores(element, path, f"host {name!r}"))
        elif element.tag == "cluster":
            ident = element.get("id", "")
            speed = _speed(element.get("speed", ""), path, f"cluster {ident!r}")
            cores = _cores(element, path, f"cluster {ident!r}")
            prefix, suffix = element.get("prefix", ""), element.get("suffix", "")
            for number in _radical(element.get("radical", ""), path, ident):
                name = f"{prefix}{number}{suffix}"
                speeds[name] = speed
                add(name, cores)
    if not hosts:
        raise InputError("the platform has no hosts (no <host> or <cluster> element)", path=path)
    zone = root.find("zone")
    name = zone.get("id", path.stem) if zone is not None else path.stem
    return PlatformFile(
        path=path,
        name=name,
        hosts=tuple(hosts),
        speeds=speeds,
        smpi_options=_smpi_options(root, path),
    )


def _smpi_options(root: ElementTree.Element, path: Path) -> tuple[str, ...]:
    """The neutral factor options for the factors the file's ``<config>`` does not set.

    A factor the file sets (``perfcast platform calibrate`` writes both) is checked here,
    since SimGrid aborts on a malformed one with a failed assertion, and left to SimGrid
    to read from the file: a neutral one on the command line would replace it."""
    configured: set[str] = set()
    for config in root.iter("config"):
        for prop in config.iter("prop"):
            key = prop.get("id", "")
            if key not in FACTOR_KEYS:
                continue
            value = prop.get("value", "")
            for segment in value.split(";"):
                size, _, factor = segment.partition(":")
                # a latency may be scaled to 0, a bandwidth may not (SimGrid asserts)
                lowest = 0.0 if key == "smpi/lat-factor" else math.ulp(0.0)
                if not _FACTOR_SEGMENT.match(segment) or not lowest <= float(factor) < math.inf:
                    raise InputError(
                        f"<config> {key} {value!r}: write SIZE:FACTOR;SIZE:FACTOR;... with "
                        f"whole sizes and finite factors, positive for a bandwidth (the "
                        f"segment {segment!r} is not)",
                        path=path,
                    )
                if int(size) >= 2**31:
                    raise InputError(
                        f"<config> {key}: size {size} is beyond SimGrid's limit 2^31-1",
                        path=path,
                    )
            configured.add(key)
    return tuple(
        option
        for key, option in zip(FACTOR_KEYS, NEUTRAL_FACTORS, strict=True)
        if key not in configured
    )


def _cores(element: ElementTree.Element, path: Path, what: str) -> int:
    text = element.get("core", "1")
    if not text.isdigit() or not 1 <= int(text) <= MAX_RANKS:
        raise InputError(
            f"{what}: core {text[:40]!r} must be a whole number from 1 to {MAX_RANKS:,}",
            path=path,
        )
    return int(text)


HOST_NAME = re.compile(r"[^\s:]+")
"""A host name a host file can carry: smpirun reads ``name:N`` as N slots on ``name`` (a
host ``a:100000000`` became a hundred million lines) and splits at white space."""


def _check_host_name(name: str, path: Path) -> None:
    if not HOST_NAME.fullmatch(name):
        raise InputError(
            f"host {name[:60]!r}: a host name must be non-empty, without white space or ':' "
            "(smpirun's host file reads NAME:N as N slots)",
            path=path,
        )
