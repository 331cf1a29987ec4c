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

Hosts are named ``node-<i>`` (``site-<k>-node-<i>`` for two clusters); :meth:`hosts` lists
one entry per core, node by node, which is how ``smpirun``'s host file places ranks.
Quantities are SI numbers (bytes/s, s, flop/s), written out with SimGrid's units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from perfcast.errors import InputError

TOPOLOGIES = ("flat", "fat-tree", "two-clusters")

MAX_NODES = 1_000_000
"""More hosts than SimGrid simulates in useful time on one machine (a 1,024-node cluster
replays a small program in about a second; SimGrid's own examples stop near a million)."""


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
        return (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            f"<!-- perfcast platform describe: {self._summary()} -->\n"
            '<platform version="4.1">\n'
            f"{body}"
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
        backbone = self.backbone_bandwidth or 10 * self.bandwidth
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
        cluster = self._cluster(f"{self.name}-cluster", "node-", self.nodes)
        return f'  <zone id={quoteattr(self.name)} routing="Full">\n{cluster}  </zone>\n'

    def _fat_tree(self) -> str:
        leaf = max(d for d in range(1, math.isqrt(self.nodes) + 1) if self.nodes % d == 0)
        switches = self.nodes // leaf
        uplinks = min(2, switches)
        parameters = f"2;{leaf},{switches};1,{uplinks};1,1"
        extra = f' topology="FAT_TREE" topo_parameters={quoteattr(parameters)}'
        cluster = self._cluster(f"{self.name}-cluster", "node-", self.nodes, extra)
        return f'  <zone id={quoteattr(self.name)} routing="Full">\n{cluster}  </zone>\n'

    def _two_clusters(self) -> str:
        first = (self.nodes + 1) // 2
        bandwidth = self.inter_bandwidth or self.bandwidth / 10
        latency = self.latency * 100 if self.inter_latency is None else self.inter_latency
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
        return (
            f'  <zone id={quoteattr(self.name)} routing="Full">\n'
            f"{''.join(sites)}{link}{route}  </zone>\n"
        )

    def _summary(self) -> str:
        text = (
            f"{self.name}: {self.nodes} node(s) x {self.cores} core(s) of {self.speed:g} flop/s, "
            f"{self.topology}, links {self.bandwidth:g} B/s and {self.latency:g} s"
        )
        return text.replace("--", "- -")  # an XML comment may not hold "--"
