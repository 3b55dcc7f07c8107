"""The `local` system: a real Slurm on this host, started and stopped by the project.

One munged (as the munge user, with its own key and socket), one slurmctld and N
slurmd nodes all live under one state folder (default ``var/local-cluster``): config,
keys, spool, logs and pid files. How the nodes are made is data, the ``cluster:``
section of systems/local.yaml (``nodes``, ``network``):

- ``namespaces``: each node in its own network and UTS namespace (``netns``), with its
  own hostname (node1 ... nodeN) and address on a bridge, its own slurmd; slurmctld
  answers on the bridge's host address, munged's socket is a file all namespaces
  reach. OpenMPI then pairs ranks by hostname as on a cluster: shared memory inside a
  node, TCP over the veths between nodes; and a link's faults are real (``netns``).
- ``one-host``: every slurmd on this host's network and hostname (``slurmd -N nodeI``,
  ``NodeAddr=127.0.0.1``); for hosts where namespaces cannot be made.
 Daemons
and clients find the config through ``SLURM_CONF``; nothing goes to /etc. Ports
are picked free at each cold start, so the test suite's cluster and a
developer's cluster can run side by side. Daemons are stopped by the PIDs in
their pid files, never by name.
"""
from __future__ import annotations

import fcntl
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import jinja2

from mpiregress import paths
from mpiregress.cluster import locks, netns, proctrack
from mpiregress.errors import InfrastructureError, InputError, NotAvailableError
from mpiregress.model import systems
from mpiregress.model.microarch import host_target

# The one-host layout's nodes (the default when systems/local.yaml says nothing).
NODES: tuple[str, ...] = ("node1", "node2")
NETWORKS = ("namespaces", "one-host")
MAX_NODES = 16
PARTITION = "batch"
TEMPLATE_DIR = paths.REPO_ROOT / "ci" / "local-cluster"
START_HINT = "for the local system run 'mpiregress cluster start'"
SETUP_HINT = ("run the project's setup script, which installs them "
              "(apt-get install slurm-wlm munge openmpi-bin libopenmpi-dev hwloc)")
# Node states in which the cluster can take work (sinfo %T, suffixes like '*' stripped).
# "planned": the backfill scheduler has set the node aside for a pending job (Slurm >= 22.05); it
# lingers a moment after a job ends, and a cluster restarted for it would lose that job.
USABLE_STATES = {"idle", "mixed", "allocated", "completing", "planned"}
# Executables the local cluster needs, with the Debian package that ships them.
REQUIRED_TOOLS = {
    "munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd",
    "scontrol": "slurm-client", "sinfo": "slurm-client", "squeue": "slurm-client",
    "scancel": "slurm-client",
}
# A unix socket path longer than this cannot be bound (sun_path is 108 bytes).
MAX_SOCKET_PATH = 100
# Held (flock) by a run for as long as it uses the cluster: start never restarts a cluster
# under a run, and a second run on the same state folder is refused.
IN_USE_LOCK = "in-use.lock"


def _cluster_section(system: str = "local") -> dict[str, Any]:
    """The ``cluster:`` section of systems/<system>.yaml ({} without it)."""

    try:
        return systems.get(system).data.get("cluster") or {}
    except InputError:
        return {}


def layout_settings(system: str = "local") -> tuple[int, str]:
    """(nodes, network) of the ``cluster:`` section of systems/<system>.yaml (2, one-host without it);
    ``mpiregress cluster`` manages the local system's, a run the cluster of the system it runs on."""
    data = _cluster_section(system)
    return _checked_layout(data.get("nodes", len(NODES)), data.get("network", "one-host"))


def one_host_env(system: str = "local") -> dict[str, str]:
    """What every step spanning nodes of the one-host layout needs (``cluster.one_host_env``)."""
    env = _cluster_section(system).get("one_host_env") or {}
    if not isinstance(env, dict):
        raise InputError(f"cluster.one_host_env of systems/{system}.yaml must map names to values, not {env!r}")
    return {str(k): str(v) for k, v in env.items()}


def _task_prolog(multinode_env: dict[str, str]) -> str:
    """A TaskProlog exporting ``multinode_env`` to every task of a step that spans more than one node."""
    lines = [f"echo export {k}={shlex.quote(v)}" for k, v in multinode_env.items()]
    return ("#!/bin/sh\n# The one-host layout: every node has this host's hostname, and OpenMPI would pair\n"
            "# ranks of different nodes through shared memory (cluster.one_host_env, systems/local.yaml).\n"
            'if [ "${SLURM_STEP_NUM_NODES:-1}" -gt 1 ]; then\n'
            + "".join(f"  {line}\n" for line in lines) + "fi\n")


def _checked_layout(nodes: Any, network: Any) -> tuple[int, str]:
    if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise InputError(f"the local cluster's node count must be 1 to {MAX_NODES}, not {nodes!r}")
    if network not in NETWORKS:
        raise InputError(f"the local cluster's network must be one of {', '.join(NETWORKS)}, not {network!r}")
    return nodes, str(network)


@systems.section_check("cluster")
def _check_section(block: Any, path: Path, key: str) -> None:
    """A ``cluster:`` section is what ``mpiregress cluster start`` reads: a mapping of a node count and a network."""
    if not isinstance(block, dict):
        raise ValueError("must be a mapping (nodes, network) of the Slurm the project starts itself")
    try:
        # Only the keys given are checked here (an absent one takes `cluster start`'s default).
        _checked_layout(block.get("nodes", 1), block.get("network", NETWORKS[0]))
    except InputError as err:
        raise ValueError(str(err).replace("the local cluster's ", "")) from None


def default_state_dir() -> Path:
    """Where the local cluster keeps its files: ``$MPIREGRESS_LOCAL_CLUSTER_DIR``, else
    ``<state_dir>/local-cluster``."""
    explicit = os.environ.get("MPIREGRESS_LOCAL_CLUSTER_DIR")
    return Path(explicit).resolve() if explicit else paths.state_dir() / "local-cluster"


def slurm_reachable(env: Optional[dict] = None, timeout: float = 10) -> tuple[bool, str]:
    """Ask ``scontrol ping`` whether a slurmctld answers.

    ``env`` entries override the current environment (pass ``client_env()`` for
    the local cluster). Returns (True, what scontrol said) or (False, one
    sentence saying why Slurm is not reachable); never raises.
    """
    full_env = {**os.environ, **(env or {})}
    conf = full_env.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        # scontrol would retry for 60 s before saying so.
        return False, f"Slurm is not reachable: its configuration SLURM_CONF={conf} does not exist; {START_HINT}"
    try:
        proc = subprocess.run(["scontrol", "ping"], env=full_env, capture_output=True,
                              text=True, timeout=timeout)
    except FileNotFoundError:
        return False, (f"Slurm is not reachable: scontrol is not installed (package slurm-client); "
                       f"{SETUP_HINT}, then {START_HINT}")
    except subprocess.TimeoutExpired as err:
        said = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
        said = " ".join(said.split())
        return False, (f"Slurm is not reachable: scontrol ping did not answer within {timeout:g} s"
                       f"{f' (it said {said!r})' if said else ''}; {START_HINT}")
    # Keep what matters: not the '** RESTORE SLURMCTLD DAEMON TO SERVICE **' banner, and
    # of a chain of errors the last two (the cause and the verdict).
    lines = [ln.strip() for ln in (proc.stdout + "\n" + proc.stderr).splitlines()
             if ln.strip() and not ln.strip().startswith("*")]
    said = "; ".join(lines[-2:])
    if proc.returncode == 0 and " is UP" in said:
        return True, said
    return False, f"Slurm is not reachable: scontrol ping says '{said or 'nothing'}'; {START_HINT}"


def host_topology() -> dict[str, int]:
    """CPUs, Sockets, CoresPerSocket and ThreadsPerCore of this host, from ``lscpu -p``.

    Slurm drains a node whose configured topology exceeds what slurmd detects,
    so the values must come from the machine, not from a guess.
    """
    try:
        out = subprocess.run(["lscpu", "-p=CPU,CORE,SOCKET,ONLINE"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise InfrastructureError(f"cannot read the host topology with lscpu: {err}") from None
    cpus, cores, sockets = 0, set(), set()
    for line in out.splitlines():
        if not line or line.startswith("#"):
            continue
        cpu, core, sock, online = line.split(",")
        if online.upper() != "Y":
            continue
        cpus += 1
        sockets.add(sock)
        cores.add((sock, core))
    if not cpus:
        raise InfrastructureError("lscpu reported no online CPU; cannot describe the local nodes")
    return {"cpus": cpus, "sockets": len(sockets), "cores_per_socket": len(cores) // len(sockets),
            "threads_per_core": cpus // len(cores)}


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody listens on now (held open together so they differ)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # slurmctld/slurmd bind the wildcard address, so test that, not only loopback.
            s.bind(("", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def _pid_alive(pid: int, executable: str) -> bool:
    """True when ``pid`` runs ``executable`` (a recycled PID of another program does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except (OSError, IndexError):
        return False
    return os.path.basename(argv0) == executable


def _children_map() -> dict[int, list[int]]:
    """Parent PID -> child PIDs of every process now, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill(victims: list[int], timeout: float = 10) -> list[int]:
    """SIGKILL ``victims`` by PID, in that order, and wait up to ``timeout`` s until they are gone."""
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(pid) for pid in victims):
        time.sleep(0.05)
    return victims


def _not_searchable_by(folder: Path, user: pwd.struct_passwd) -> Optional[Path]:
    """The first existing folder on the way to ``folder`` that ``user`` may not enter, or None."""
    for path in reversed([folder, *folder.parents]):
        try:
            st = path.stat()
        except OSError:
            break  # not created yet: we create it, world-searchable
        if st.st_uid == user.pw_uid:
            allowed = st.st_mode & 0o100
        elif st.st_gid == user.pw_gid:
            allowed = st.st_mode & 0o010
        else:
            allowed = st.st_mode & 0o001
        if not allowed:
            return path
    return None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path})"
    return f"last lines of {path}:\n" + "\n".join(text[-lines:])


class LocalCluster:
    """A Slurm on this host (munged, slurmctld, slurmd node1 ... nodeN) under ``state_dir``.

    ``nodes``/``network``: the layout of the next cold start (default: the ``cluster:`` section of
    systems/<system>.yaml).
    A cluster already started keeps the layout recorded in its state folder until stopped.
    """

    def __init__(self, state_dir: Optional[Path] = None, nodes: Optional[int] = None,
                 network: Optional[str] = None, system: str = "local") -> None:
        self.state_dir = Path(state_dir or default_state_dir()).resolve()
        self.etc = self.state_dir / "etc"
        self.slurm_conf = self.etc / "slurm.conf"
        self.munge_dir = self.state_dir / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.info_file = self.state_dir / "cluster.json"
        self.lock_file = self.state_dir / IN_USE_LOCK
        self.faults_file = self.state_dir / "faults.json"
        self._claim: Optional[int] = None
        self.system = system
        recorded = self._recorded_layout()
        if recorded and nodes is None and network is None:
            self.node_names, self.network_mode = recorded
        else:
            default_nodes, default_network = layout_settings(system) if nodes is None or network is None else (0, "")
            count, self.network_mode = _checked_layout(nodes if nodes is not None else default_nodes,
                                                       network if network is not None else default_network)
            self.node_names = tuple(f"node{i}" for i in range(1, count + 1))

    def _recorded_layout(self) -> Optional[tuple[tuple[str, ...], str]]:
        """The nodes and network of the cluster last started in this folder (None: never, or stopped)."""
        try:
            info = json.loads(self.info_file.read_text())
            return tuple(info["nodes"]), str(info["network"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def network(self) -> Optional[netns.Network]:
        """The namespaces, veths and bridge of this cluster (None in the one-host layout)."""
        if self.network_mode != "namespaces":
            return None
        try:
            octet = int(json.loads(self.info_file.read_text())["third_octet"])
        except (OSError, ValueError, KeyError, TypeError):
            octet = 0
        return netns.Network(netns.tag_of(self.state_dir), self.node_names, octet)

    # -- what is where ------------------------------------------------------
    def daemons(self) -> dict[str, dict]:
        """Each daemon: executable, pid file and log files, in start order."""
        run, log = self.state_dir / "run", self.state_dir / "log"
        table = {
            "munged": {"exe": "munged", "pid_file": self.munge_dir / "munged.pid",
                       "logs": [self.munge_dir / "munged.log", log / "munged.out"]},
            "slurmctld": {"exe": "slurmctld", "pid_file": run / "slurmctld.pid",
                          "logs": [log / "slurmctld.log", log / "slurmctld.out"]},
        }
        for node in self.node_names:
            table[f"slurmd-{node}"] = {"exe": "slurmd", "pid_file": run / f"slurmd-{node}.pid",
                                       "logs": [log / f"slurmd-{node}.log", log / f"slurmd-{node}.out"]}
        return table

    def client_env(self) -> dict[str, str]:
        """Environment entries that point Slurm clients (srun, sbatch, squeue, ReFrame) here."""
        return {"SLURM_CONF": str(self.slurm_conf)}

    def start_hint(self) -> str:
        """The command that starts this cluster, for messages."""
        if self.state_dir == default_state_dir().resolve():
            return START_HINT
        return f"{START_HINT[:-1]} --state-dir {self.state_dir}'"

    def _recorded_pid(self, name: str) -> Optional[int]:
        """The PID in daemon ``name``'s pid file, alive or not, or None."""
        try:
            return int(self.daemons()[name]["pid_file"].read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _pid(self, name: str) -> Optional[int]:
        """The live PID of daemon ``name`` from its pid file, or None."""
        pid = self._recorded_pid(name)
        return pid if pid is not None and _pid_alive(pid, self.daemons()[name]["exe"]) else None

    # -- who uses it ----------------------------------------------------------
    def claim(self, who: str) -> None:
        """Hold the cluster for one run (``who`` says which, for others' messages) until :meth:`release`.

        A second run on the same state folder is refused with one sentence naming the first.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._claim = locks.hold(self.lock_file, f"PID {os.getpid()}, {who}",
                                 lambda holder: f"the local cluster in {self.state_dir} is in use by another "
                                                f"mpiregress run ({holder}); wait for it to end")

    def release(self) -> None:
        """Let other runs (and start/stop) have the cluster again."""
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None

    def user(self) -> Optional[str]:
        """Which other run holds the cluster now (its PID and report folder), or None."""
        if self._claim is not None or not self.lock_file.exists():
            return None
        try:
            fd = os.open(self.lock_file, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None
        except OSError:
            return os.pread(fd, 300, 0).decode(errors="replace").strip() or "another process"
        finally:
            os.close(fd)

    # -- status -------------------------------------------------------------
    def nodes(self) -> dict[str, dict]:
        """Node name -> state, features and CPUs as sinfo reports them ({} when Slurm is down)."""
        try:
            proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%f|%c|%n|%o"], capture_output=True,
                                  text=True, timeout=10, env={**os.environ, **self.client_env()})
        except (OSError, subprocess.TimeoutExpired):
            return {}
        if proc.returncode != 0:
            return {}
        found = {}
        for line in proc.stdout.splitlines():
            name, state, features, cpus, hostname, addr = line.split("|")
            # "*": slurmctld has not heard from the node's slurmd since its last ping (also for a
            # moment after `scontrol update state=resume`, until the node answers the ping it triggers).
            found[name] = {"state": state.rstrip("*~#!%$@^-"), "responding": "*" not in state,
                           "features": features.split(","), "cpus": int(cpus), "hostname": hostname, "addr": addr}
        return found

    def status(self) -> dict:
        """Daemons (PID, alive), node states, ports and whether the cluster is up and usable."""
        daemons = {}
        for name, d in self.daemons().items():
            pid = self._recorded_pid(name)
            daemons[name] = {"pid": pid, "alive": self._pid(name) is not None, "pid_file": str(d["pid_file"])}
        if self.slurm_conf.exists():
            reachable, message = slurm_reachable(self.client_env(), timeout=5)
        else:
            reachable, message = False, (f"Slurm is not reachable: the local cluster in {self.state_dir} "
                                         f"was never started; {START_HINT}")
        message = message.replace(START_HINT, self.start_hint())
        nodes = self.nodes() if reachable else {}
        up = (reachable and all(d["alive"] for d in daemons.values())
              and all(nodes.get(n, {}).get("state") in USABLE_STATES for n in self.node_names))
        if reachable and not up:
            message = "the local cluster is only partly up: " + ", ".join(
                [f"{k} is not running" for k, v in daemons.items() if not v["alive"]]
                + [f"{n} is {nodes.get(n, {}).get('state', 'missing')}"
                   for n in self.node_names if nodes.get(n, {}).get("state") not in USABLE_STATES])
            message += f"; {self.start_hint()}"
        try:
            info = json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            info = {}
        return {"up": up, "message": message, "state_dir": str(self.state_dir),
                "slurm_conf": str(self.slurm_conf), "ports": info.get("ports", {}),
                "network": self.network_mode, "daemons": daemons, "nodes": nodes, "faults": self.faults()}

    # -- start --------------------------------------------------------------
    def start(self, timeout: float = 30) -> bool:
        """Start the cluster and wait until both nodes are idle.

        Idempotent: when the cluster is already up and healthy nothing is
        touched and False is returned; otherwise whatever is left of it is
        stopped, the config is rendered with fresh free ports, the daemons are
        started and True is returned. Raises InfrastructureError (with the tail
        of the relevant log) when something does not come up in ``timeout`` s.
        """
        self._check_prerequisites()
        status = self.status()
        if status["up"]:
            return False
        user = self.user()
        if user:
            raise InfrastructureError(f"the local cluster in {self.state_dir} is not healthy ({status['message']}) "
                                      f"but a run is using it ({user}); it is not restarted under that run")
        recorded = self._recorded_layout()
        if recorded and recorded != (self.node_names, self.network_mode):
            LocalCluster(self.state_dir).stop()   # the earlier layout's daemons and network
        self.stop()
        if self.network_mode == "namespaces":
            why = netns.unavailable()
            if why:
                raise InfrastructureError(f"cannot give the local cluster's nodes their own network: {why}; "
                                          f"set cluster.network: one-host in systems/local.yaml to run them "
                                          f"on this host's network")
        try:
            self._prepare()
            self._start_munged(timeout)
            self._start_daemon("slurmctld", ["slurmctld"], timeout)
            self._wait(lambda: slurm_reachable(self.client_env(), timeout=5)[0], timeout,
                       "slurmctld does not answer scontrol ping", "slurmctld")
            for node in self.node_names:
                self._start_slurmd(node, timeout)
            self._wait(lambda: all(self.nodes().get(n, {}).get("state") == "idle" for n in self.node_names),
                       timeout, f"nodes {', '.join(self.node_names)} did not become idle", "slurmctld")
        except BaseException:
            # Nothing half-made is left behind: daemons by PID, then the namespaces and bridge by name.
            self.stop(force=True)
            raise
        return True

    def _start_slurmd(self, node: str, timeout: float) -> None:
        """slurmd of ``node``: inside its namespaces under its own hostname, or ``slurmd -N`` on this host."""
        network = self.network
        argv = network.enter(node) + ["slurmd"] if network else ["slurmd", "-N", node]
        self._start_daemon(f"slurmd-{node}", argv, timeout)

    def _check_prerequisites(self) -> None:
        missing = [f"{tool} ({pkg})" for tool, pkg in REQUIRED_TOOLS.items() if not shutil.which(tool)]
        if missing:
            raise InfrastructureError(f"cannot start the local Slurm cluster: {', '.join(missing)} "
                                      f"not installed; {SETUP_HINT}")
        if os.geteuid() != 0:
            raise InfrastructureError("the local Slurm cluster must be started as root "
                                      "(slurmd and munged need to switch users)")
        try:
            pwd.getpwnam("munge")
        except KeyError:
            raise InfrastructureError(f"there is no 'munge' user on this host; {SETUP_HINT}") from None
        blocked = _not_searchable_by(self.state_dir.parent, pwd.getpwnam("munge"))
        if blocked:
            raise InfrastructureError(
                f"munged runs as the munge user and cannot reach {self.state_dir}: {blocked} is "
                f"closed to other users; choose a --state-dir whose parent folders others may enter "
                f"(e.g. under /tmp or the repository's var/)")
        if len(str(self.munge_socket)) > MAX_SOCKET_PATH:
            raise InfrastructureError(f"the state folder {self.state_dir} is too deep for a unix "
                                      f"socket path; choose a shorter --state-dir")

    def _prepare(self) -> None:
        """Fresh folders, a munge key and the rendered slurm.conf with free ports."""
        # A cold start is a fresh cluster: stale node states and job records from an
        # earlier run (with other ports) must not leak into this one.
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o755)  # munged (as munge) must pass through it to its folder
        for sub in ("spool", "run", "log", "tmp"):
            shutil.rmtree(self.state_dir / sub, ignore_errors=True)
        for sub in ("etc", "run", "log", "spool/slurmctld", *(f"spool/slurmd-{n}" for n in self.node_names),
                    *(f"tmp/node-{n}" for n in self.node_names)):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._prepare_munge()
        self.faults_file.unlink(missing_ok=True)
        topo = host_topology()
        ports = _free_ports(1 + len(self.node_names))
        hostname = socket.gethostname().split(".")[0]
        layout: dict[str, Any] = {"nodes": list(self.node_names), "network": self.network_mode}
        multinode_env: dict[str, str] = {}
        if self.network_mode == "namespaces":
            tag = netns.tag_of(self.state_dir)
            layout["third_octet"] = netns.pick_third_octet(tag)
            network = netns.Network(tag, self.node_names, layout["third_octet"])
            # Recorded before the first interface exists: stop() must find what up() makes.
            self.info_file.write_text(json.dumps(layout) + "\n")
            network.up()
            controller = network.gateway
            nodes = [{"name": n, "port": p, "hostname": n, "addr": network.address(n)}
                     for n, p in zip(self.node_names, ports[1:])]
        else:
            controller = "127.0.0.1"
            multinode_env = one_host_env(self.system)
            nodes = [{"name": n, "port": p, "hostname": hostname, "addr": "127.0.0.1"}
                     for n, p in zip(self.node_names, ports[1:])]
        task_prolog = ""
        if multinode_env:
            prolog = self.etc / "taskprolog.sh"
            prolog.write_text(_task_prolog(multinode_env))
            prolog.chmod(0o755)
            task_prolog = str(prolog)
        context = {
            "hostname": hostname,
            "controller_addr": controller,
            "slurmctld_port": ports[0],
            # Job ids stay distinct between clusters on one host (see the template).
            "first_job_id": ports[0] * proctrack.JOB_IDS_PER_CLUSTER,
            "proctrack": proctrack.proctrack_type(),
            "munge_socket": self.munge_socket,
            "task_prolog": task_prolog,
            "state": self.state_dir, "etc": self.etc,
            "nodes": nodes,
            "partition": PARTITION,
            # A node's features: its archspec target and the system it belongs to, as a site's nodes.
            "features": [host_target(), self.system],
            **topo,
        }
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                                 undefined=jinja2.StrictUndefined, trim_blocks=True,
                                 lstrip_blocks=True, keep_trailing_newline=True)
        self.slurm_conf.write_text(env.get_template("slurm.conf.j2").render(**context))
        (self.etc / "plugstack.conf").write_text("# no SPANK plugins on the local cluster\n")
        # mpi/pmix's settings (every fence through the ring: the file says why); read beside slurm.conf.
        shutil.copyfile(TEMPLATE_DIR / "mpi.conf", self.etc / "mpi.conf")
        (self.etc / "cgroup.conf").write_text(proctrack.cgroup_conf())
        self.info_file.write_text(json.dumps({
            **layout, "ports": {"slurmctld": ports[0], **{n: p for n, p in zip(self.node_names, ports[1:])}},
            "features": context["features"], "topology": topo}, indent=2) + "\n")

    def _prepare_munge(self) -> None:
        """munged refuses keys and folders that anyone but the munge user could change."""
        munge = pwd.getpwnam("munge")
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        os.chown(self.munge_dir, munge.pw_uid, munge.pw_gid)
        self.munge_dir.chmod(0o755)  # clients of any user must reach the socket
        # A fresh log per start: error detection must not trip on an earlier run's lines.
        (self.munge_dir / "munged.log").unlink(missing_ok=True)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            # A key is 1 KiB of random bytes (what mungekey writes); this cluster's own.
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(1024))
        os.chown(key, munge.pw_uid, munge.pw_gid)
        key.chmod(0o600)

    def _start_munged(self, timeout: float) -> None:
        d = self.munge_dir
        self.munge_socket.unlink(missing_ok=True)
        self._start_daemon("munged", [
            "munged", f"--socket={self.munge_socket}", f"--key-file={d / 'munge.key'}",
            f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
            f"--seed-file={d / 'munged.seed'}"], timeout, user="munge")
        self._wait(self.munge_socket.exists, timeout, "munged did not create its socket", "munged")

    def _start_daemon(self, name: str, argv: list[str], timeout: float, user: Optional[str] = None) -> None:
        """Run a self-daemonizing program and wait until its pid file names a live process."""
        out = self.daemons()[name]["logs"][-1]
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "ab") as log:
            # The program forks into the background and its first process exits; errors
            # before it opens its own log (bad config, port in use) land in `out`.
            kwargs: dict[str, Any] = {"user": user, "group": user, "extra_groups": []} if user else {}
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env={**os.environ, **self.client_env()}, cwd=self.state_dir,
                                    start_new_session=True, **kwargs)
            code: int | str
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = "a time-out"
        if code != 0:
            raise InfrastructureError(f"{name} failed to start (exit {code}); {self._log_tails(name)}")
        self._wait(lambda: self._pid(name) is not None, timeout, f"{name} did not stay up", name)

    def _wait(self, ready, timeout: float, what: str, daemon: str) -> None:
        """Poll ``ready`` until true; fail at ``timeout``, or at once when the daemon logged a fatal error."""
        deadline = time.monotonic() + timeout
        while not ready():
            fatal = self._fatal_line(daemon)
            if fatal:
                raise InfrastructureError(f"local Slurm cluster: {daemon} died ({fatal}); "
                                          f"{self._log_tails(daemon)}")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"local Slurm cluster: {what} within {timeout:g} s; "
                                          f"{self._log_tails(daemon)}")
            time.sleep(0.1)

    def _fatal_line(self, name: str) -> Optional[str]:
        """The last 'fatal:'/'Error:' line a daemon logged since this start, if any."""
        for path in self.daemons()[name]["logs"]:
            try:
                lines = path.read_text(errors="replace").splitlines()[-20:]
            except OSError:
                continue
            # slurm says "fatal: ...", munged says "Error: ..." before exiting.
            hits = [ln.strip() for ln in lines if "fatal:" in ln or " Error: " in ln]
            if hits:
                return hits[-1]
        return None

    def _log_tails(self, name: str) -> str:
        return "\n".join(_tail(p) for p in self.daemons()[name]["logs"]
                         if p.exists() and p.stat().st_size) or "no log was written"

    # -- stop ---------------------------------------------------------------
    def stop(self, timeout: float = 20, force: bool = False) -> list[int]:
        """Cancel the jobs, stop every daemon by the PID in its pid file, then every step daemon left.

        Returns the PIDs that were stopped. A daemon still alive after
        ``timeout`` s of SIGTERM gets SIGKILL. Step daemons (slurmstepd) of this
        cluster that outlived their slurmd or slurmctld, and every process under
        them, are killed by PID. Safe to call when nothing runs. Refused while a
        run uses the cluster, unless ``force``.
        """
        user = self.user()
        if user and not force:
            raise InfrastructureError(f"the local cluster in {self.state_dir} is in use by a run ({user}); "
                                      f"not stopped under it (use --force to stop it anyway)")
        if self._pid("slurmctld") is not None:
            self._cancel_jobs()
        first_job_id = self._first_job_id()
        stopped = []
        # Reverse start order: slurmd first, munged (which the others need) last.
        for name in reversed(list(self.daemons())):
            pid = self._stop_daemon(name, timeout)
            if pid is not None:
                stopped.append(pid)
        stopped += self._kill_step_daemons()
        if first_job_id is not None:
            stopped += _kill(proctrack.job_processes(first_job_id))
        network = self.network
        if network is not None:
            network.down()
        self.faults_file.unlink(missing_ok=True)
        # The layout is no longer in force: the next cluster here follows systems/local.yaml.
        self.info_file.unlink(missing_ok=True)
        return stopped

    def _first_job_id(self) -> Optional[int]:
        """This cluster's first job id (slurm.conf's FirstJobId), None when it was never started here."""
        try:
            return int(json.loads(self.info_file.read_text())["ports"]["slurmctld"]) * proctrack.JOB_IDS_PER_CLUSTER
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _stop_daemon(self, name: str, timeout: float) -> Optional[int]:
        """SIGTERM (then SIGKILL) daemon ``name`` by the PID in its pid file; the PID stopped, or None."""
        d = self.daemons()[name]
        pid = self._pid(name)
        if pid is not None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while _pid_alive(pid, d["exe"]) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if not _pid_alive(pid, d["exe"]):
                    break
            else:
                raise InfrastructureError(f"{name} (PID {pid}) survived SIGKILL; {self._log_tails(name)}")
        # The daemon is gone: its pid file must not name a PID a new process may get.
        d["pid_file"].unlink(missing_ok=True)
        return pid

    # -- faults (the namespaces layout) --------------------------------------
    def faults(self) -> list[str]:
        """The faults in force, as sentences, oldest first."""
        try:
            return [str(f) for f in json.loads(self.faults_file.read_text())]
        except (OSError, ValueError, TypeError):
            return []

    def _fault_network(self) -> netns.Network:
        network = self.network
        if network is None:
            raise NotAvailableError(f"the local cluster in {self.state_dir} runs its nodes on this host's network "
                                    f"(cluster.network: one-host), where a link cannot be faulted on its own")
        if not network.exists():
            raise InfrastructureError(f"the local cluster in {self.state_dir} is not running; {self.start_hint()}")
        return network

    def fault(self, kind: str, node: str, rate: Optional[str] = None, peer: Optional[str] = None) -> str:
        """Inject a real fault: ``rate`` (tbf/htb on the node's link or one link), ``down`` (its link),
        ``stop`` (its slurmd). Undone by :meth:`clear_faults` or :meth:`stop`. Returns a sentence."""
        network = self._fault_network()
        if kind == "rate":
            if not rate:
                raise InputError("a rate fault needs a rate such as 100mbit")
            said = network.limit_rate(node, rate, peer)
        elif kind == "down":
            said = network.set_link(node, up=False)
        elif kind == "stop":
            pid = self._stop_daemon(f"slurmd-{network.node(node)}", 20)
            said = f"{node}'s slurmd stopped" + (f" (PID {pid})" if pid else " (it was not running)")
        else:
            raise InputError(f"unknown fault {kind!r} (rate, down, stop)")
        self.faults_file.write_text(json.dumps(self.faults() + [said]) + "\n")
        return said

    def clear_faults(self, timeout: float = 30) -> list[str]:
        """Every limit removed, every link up, every stopped slurmd started again; what was undone."""
        network = self._fault_network()
        undone = network.clear()
        for node in self.node_names:
            if self._pid(f"slurmd-{node}") is None:
                self._start_slurmd(node, timeout)
                undone.append(f"{node}: slurmd started again")
        self.faults_file.unlink(missing_ok=True)
        return undone

    def step_daemons(self) -> list[int]:
        """PIDs of the slurmstepd processes of this cluster (their environment names its slurm.conf)."""
        found = []
        conf = f"SLURM_CONF={self.slurm_conf}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                if stat.split("(", 1)[1].rsplit(")", 1)[0] != "slurmstepd" or \
                        stat.rsplit(")", 1)[1].split()[0] == "Z":
                    continue
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except (OSError, IndexError):
                continue
            if conf in environ:
                found.append(int(entry))
        return found

    def _kill_step_daemons(self, timeout: float = 10) -> list[int]:
        """SIGKILL every step daemon of this cluster and every process under it, by PID; wait until gone."""
        stepds = self.step_daemons()
        if not stepds:
            return []
        children = _children_map()
        # Children first, so none is re-parented out of reach before it is signalled.
        return _kill([pid for stepd in stepds for pid in _descendants(stepd, children)] + stepds, timeout)

    def _cancel_jobs(self) -> None:
        """Cancel every job, and give the steps a moment to end, so no slurmstepd outlives slurmd."""
        env = {**os.environ, **self.client_env()}
        try:
            jobs = subprocess.run(["squeue", "-h", "-o", "%i", "-t", "PD,R,CG,S"], capture_output=True,
                                  text=True, timeout=10, env=env).stdout.split()
            if not jobs:
                return
            subprocess.run(["scancel", *jobs], capture_output=True, timeout=10, env=env)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h", "-o", "%i", "-t", "PD,R,CG,S"], capture_output=True, text=True,
                    timeout=10, env=env).stdout.strip():
                time.sleep(0.2)
        except (OSError, subprocess.TimeoutExpired):
            pass  # the daemons are stopped anyway
