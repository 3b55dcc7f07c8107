"""The local cluster's network: each node in its own network and UTS namespace, on one bridge, with real faults.

Node ``nodeI`` lives in the network namespace ``mpr-<tag>-nodeI``: its ``eth0`` is one end
of a veth pair whose other end (``mpr-<tag>-I`` on the host) is a port of the bridge
``mpr-<tag>-br``; the bridge holds the host's address on the cluster's /24, where
slurmctld answers. Every name carries the ``mpr-`` prefix and a tag derived from the
cluster's state folder, so clusters of several checkouts on one host never share a
name, and ``down`` removes exactly what ``up`` made. No route leaves these namespaces
and the bridge: nothing is forwarded anywhere else.

Faults are the kernel's own: a token bucket (``tbf``) on both ends of a node's veth
limits its rate; an ``htb`` class with an address filter limits one link between two
nodes; a veth set down cuts a node off. ``netem`` (a fixed added delay) needs a kernel
module this machine kind does not have.
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mpiregress.errors import InfrastructureError, InputError

PREFIX = "mpr-"
NETNS_DIR = Path("/run/netns")
# Link-local-free private range for the clusters' /24s: 10.222.<n>.0/24.
SECOND_OCTET = 222
RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$", re.IGNORECASE)


def _run(argv: list[str], what: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one ip/tc command; an InfrastructureError says what failed in one sentence."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InfrastructureError(f"cannot {what}: {err}") from None
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise InfrastructureError(f"cannot {what}: {' '.join(argv)} said: {said[-1] if said else done.returncode}")
    return done


def unavailable() -> Optional[str]:
    """Why namespaces cannot be made here (one sentence), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "tc", "nsenter", "unshare") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not installed (iproute2, util-linux)"
    probe = f"{PREFIX}probe-{os.getpid()}"
    done = _run(["ip", "netns", "add", probe], "probe", check=False)
    if done.returncode != 0:
        said = (done.stderr or "").strip() or "ip netns add failed"
        return f"this host refuses to create a network namespace ({said})"
    _run(["ip", "netns", "del", probe], "remove the probe namespace", check=False)
    return None


def tag_of(state_dir: Path) -> str:
    """Four hex digits naming one cluster's interfaces (an interface name holds 15 characters)."""
    return hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:4]


@dataclass(frozen=True)
class Network:
    """One cluster's bridge, namespaces and veths (names and addresses only; ``up``/``down`` act)."""

    tag: str
    nodes: tuple[str, ...]
    third_octet: int

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}-br"

    def namespace(self, node: str) -> str:
        return f"{PREFIX}{self.tag}-{node}"

    def veth(self, node: str) -> str:
        """The host's end of ``node``'s veth pair (the node's end is its ``eth0``)."""
        return f"{PREFIX}{self.tag}-{self.nodes.index(node) + 1}"

    @property
    def gateway(self) -> str:
        """The host's address on the bridge: where the nodes reach slurmctld."""
        return f"10.{SECOND_OCTET}.{self.third_octet}.1"

    def address(self, node: str) -> str:
        return f"10.{SECOND_OCTET}.{self.third_octet}.{10 + self.nodes.index(node) + 1}"

    def node(self, name: str) -> str:
        """``name`` if it is a node of this cluster; an InputError lists them otherwise."""
        if name not in self.nodes:
            raise InputError(f"no node {name!r} in this cluster (its nodes: {', '.join(self.nodes)})")
        return name

    def enter(self, node: str) -> list[str]:
        """argv prefix that runs a command inside ``node``: its network namespace and a UTS namespace of
        its own whose hostname is ``node``.

        nsenter, not ``ip netns exec``: the latter remounts /sys for the namespace, and slurmd
        then finds no cgroup file system.
        """
        return ["nsenter", f"--net={NETNS_DIR / self.namespace(node)}", "unshare", "--uts", "sh", "-c",
                f'hostname {node} && exec "$@"', "sh"]

    def exists(self) -> bool:
        """Is the bridge there (the network was brought up and not taken down)?"""
        return Path(f"/sys/class/net/{self.bridge}").exists()

    def up(self) -> None:
        """Bridge, namespaces, veth pairs, addresses; everything made is undone by :meth:`down` on failure."""
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"], f"create the bridge {self.bridge}")
            _run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge], "address the bridge")
            _run(["ip", "link", "set", self.bridge, "up"], "bring the bridge up")
            for node in self.nodes:
                ns = self.namespace(node)
                _run(["ip", "netns", "add", ns], f"create the network namespace of {node}")
                # IPv4 only: a link fault's filter matches the peer's IPv4 address, and OpenMPI would
                # also connect over the IPv6 link-local address every veth gets.
                _run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                      "net.ipv6.conf.default.disable_ipv6=1"], f"keep {node}'s network IPv4 only")
                _run(["ip", "link", "add", self.veth(node), "type", "veth", "peer", "name", "eth0", "netns", ns],
                     f"create the veth pair of {node}")
                _run(["ip", "link", "set", self.veth(node), "master", self.bridge, "up"],
                     f"attach {node}'s veth to the bridge")
                _run(["ip", "-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0"],
                     f"address {node}")
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"], f"bring {node}'s eth0 up")
                _run(["ip", "-n", ns, "link", "set", "lo", "up"], f"bring {node}'s loopback up")
        except InfrastructureError:
            self.down()
            raise

    def down(self) -> list[str]:
        """Remove the namespaces (their veth ends go with them), the host's veth ends and the bridge.

        Only this cluster's names; what is already gone is skipped. Returns what was removed.
        """
        removed = []
        for node in self.nodes:
            if (NETNS_DIR / self.namespace(node)).exists():
                _run(["ip", "netns", "del", self.namespace(node)], f"remove {node}'s namespace", check=False)
                removed.append(self.namespace(node))
            if Path(f"/sys/class/net/{self.veth(node)}").exists():
                _run(["ip", "link", "del", self.veth(node)], f"remove {node}'s veth", check=False)
        if self.exists():
            _run(["ip", "link", "del", self.bridge], "remove the bridge", check=False)
            removed.append(self.bridge)
        return removed

    # -- faults ---------------------------------------------------------------
    def limit_rate(self, node: str, rate: str, peer: Optional[str] = None) -> str:
        """Limit ``node``'s link to ``rate`` (tc units: 100mbit, 50MBps) both ways, or only its link to ``peer``.

        A whole node: a token bucket on the host's end of its veth (traffic to it) and on its
        eth0 (traffic from it). One link: on each end's eth0 an htb class at ``rate`` that a
        filter on the other end's address selects; the rest of the node's traffic is untouched.
        """
        self.node(node)
        if not RATE.match(rate):
            raise InputError(f"rate {rate!r} is not a tc rate such as 100mbit or 50mbps")
        if peer is None:
            bucket = ["tbf", "rate", rate, "burst", "64kb", "latency", "100ms"]
            _run(["tc", "qdisc", "replace", "dev", self.veth(node), "root", *bucket], f"limit {node}'s rate")
            _run(["ip", "netns", "exec", self.namespace(node), "tc", "qdisc", "replace", "dev", "eth0", "root",
                  *bucket], f"limit {node}'s rate")
            return f"{node} limited to {rate} both ways"
        self.node(peer)
        if peer == node:
            raise InputError("a link joins two different nodes")
        for a, b in ((node, peer), (peer, node)):
            tc = ["ip", "netns", "exec", self.namespace(a), "tc"]
            _run([*tc, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"],
                 f"shape {a}'s eth0")
            _run([*tc, "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate",
                  "100gbit"], f"shape {a}'s eth0")
            _run([*tc, "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", rate,
                  "ceil", rate], f"shape the link {a}--{b}")
            _run([*tc, "filter", "replace", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                  "match", "ip", "dst", f"{self.address(b)}/32", "flowid", "1:10"], f"shape the link {a}--{b}")
        return f"link {node}--{peer} limited to {rate} both ways"

    def set_link(self, node: str, up: bool) -> str:
        """Take ``node``'s link down (the host's end of its veth) or bring it back."""
        self.node(node)
        _run(["ip", "link", "set", self.veth(node), "up" if up else "down"],
             f"take {node}'s link {'up' if up else 'down'}")
        return f"{node}'s link {'up' if up else 'down'}"

    def clear(self) -> list[str]:
        """Every rate limit removed and every link up again; what was undone."""
        undone = []
        for node in self.nodes:
            if not (NETNS_DIR / self.namespace(node)).exists():
                continue
            for argv in (["tc", "qdisc", "del", "dev", self.veth(node), "root"],
                         ["ip", "netns", "exec", self.namespace(node), "tc", "qdisc", "del", "dev", "eth0", "root"]):
                if _run(argv, "clear a limit", check=False).returncode == 0:
                    undone.append(f"{node}: limit removed")
            if Path(f"/sys/class/net/{self.veth(node)}").exists() and \
                    "UP" not in _flags(self.veth(node)).split(","):
                _run(["ip", "link", "set", self.veth(node), "up"], f"bring {node}'s link up")
                undone.append(f"{node}: link up")
        return undone


def _flags(interface: str) -> str:
    """The administrative flags of an interface (``<BROADCAST,MULTICAST,UP,...>``)."""
    out = _run(["ip", "-o", "link", "show", interface], "read a link").stdout
    match = re.search(r"<([^>]*)>", out)
    return match.group(1) if match else ""


def pick_third_octet(tag: str) -> int:
    """A 10.222.<n>.0/24 no interface of this host uses, starting from the tag's own choice."""
    used = _run(["ip", "-4", "-o", "addr", "show"], "read the host's addresses").stdout
    start = int(tag, 16) % 250 + 1
    for step in range(250):
        n = (start + step - 1) % 250 + 1
        net = ipaddress.ip_network(f"10.{SECOND_OCTET}.{n}.0/24")
        if not any(ipaddress.ip_address(a) in net for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", used)):
            return n
    raise InfrastructureError(f"no free 10.{SECOND_OCTET}.x.0/24 left on this host for the cluster's bridge")
