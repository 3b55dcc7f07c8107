"""OpenMPI 4.1 coll/tuned dynamic rules files: written from a best-algorithm map, read back the way OpenMPI does.

The format is what ``ompi_coll_tuned_read_rules_config_file`` (ompi/mca/coll/tuned/
coll_tuned_dynamic_file.c, v4.1.0-v4.1.8; 4.1.8 also accepts an optional
``rule-file-version-N`` header, not written here) reads as a stream of integers
(``fscanf("%li")``, so no leading zeros: 010 would be octal; ``#`` starts a comment
to the end of the line)::

    <number of collectives>
    <collective id (COLLTYPE)>  <number of communicator sizes>
      <comm size>  <number of message-size rules>
        <msg size> <algorithm> <fan-in/out> <segment size>     (first msg size must be 0)

OpenMPI picks the rule set of the largest listed communicator size <= the
communicator's size (the first set when all are larger), then the rule with the
largest message size <= the call's message size. Algorithm 0 means "OpenMPI's fixed
decision". A bad file is silently ignored by OpenMPI (its messages are debug-build
only), so this module refuses to write anything the reader would reject.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from mpiregress.errors import InputError
from mpiregress.families.coll.algorithms import DEFAULT, TunedAlgorithms
from mpiregress.families.coll.sweep import Cell, format_size


@dataclass(frozen=True)
class MsgRule:
    msgsize: int
    algorithm: int
    faninout: int
    segsize: int


@dataclass(frozen=True)
class CommRule:
    comm_size: int
    msg_rules: tuple[MsgRule, ...]


Rules = dict[int, tuple[CommRule, ...]]   # collective id -> comm-size rule sets, ascending


def build(cells: Sequence[Cell], tuned: TunedAlgorithms, segsize: Optional[int] = None) -> Rules:
    """Rules that choose, at every measured point, the cell's choice (best beyond the noise, else default).

    ``cells`` must be of one distribution: a rules file keys on communicator size
    only. Above the largest measured communicator size and message size the rules
    fall back to OpenMPI's fixed decision (algorithm 0): nothing was measured there.
    ``segsize`` is the segment size the sweep forced (None: the data's default).
    """
    if not cells:
        raise InputError("no best-algorithm cells to write a rules file from (the sweep measured nothing to compare)")
    distributions = {c.point.distribution for c in cells}
    if len(distributions) > 1:
        raise InputError(f"a rules file keys on communicator size only; the cells mix distributions "
                         f"{', '.join(sorted(distributions))}: pass one")
    seg = tuned.default_segsize if segsize is None else segsize
    by_coll: dict[str, dict[int, dict[int, str]]] = {}
    nodes_of: dict[tuple[str, int], int] = {}
    for c in cells:
        key = (c.point.collective, c.point.nprocs)
        if nodes_of.setdefault(key, c.point.nodes) != c.point.nodes:
            raise InputError(f"{c.point.collective} was measured with {c.point.nprocs} ranks on both "
                             f"{nodes_of[key]} and {c.point.nodes} nodes; a rules file keys on communicator "
                             "size only: pass the cells of one node count")
        by_coll.setdefault(c.point.collective, {}).setdefault(c.point.nprocs, {})[c.point.size] = c.choice
    rules: Rules = {}
    for name, per_comm in sorted(by_coll.items(), key=lambda item: tuned.collective(item[0]).rules_id):
        coll = tuned.collective(name)
        comm_rules = []
        for nprocs in sorted(per_comm):
            msg_rules: list[MsgRule] = []
            sizes = sorted(per_comm[nprocs])
            for index, size in enumerate(sizes):
                choice = per_comm[nprocs][size]
                if choice == DEFAULT:
                    rule = MsgRule(0, 0, 0, 0)
                else:
                    alg = coll.by_name(choice)
                    rule = MsgRule(0, alg.id, coll.faninout, seg if alg.segments else 0)
                # The first rule covers everything below the first measured size too.
                msgsize = 0 if index == 0 else coll.rule_msgsize(size, nprocs)
                rule = MsgRule(msgsize, rule.algorithm, rule.faninout, rule.segsize)
                if msg_rules and (msg_rules[-1].algorithm, msg_rules[-1].faninout, msg_rules[-1].segsize) == \
                        (rule.algorithm, rule.faninout, rule.segsize):
                    continue
                msg_rules.append(rule)
            beyond = coll.rule_msgsize(sizes[-1], nprocs) + 1
            if msg_rules[-1].algorithm != 0:
                msg_rules.append(MsgRule(beyond, 0, 0, 0))
            comm_rules.append(CommRule(nprocs, tuple(msg_rules)))
        # Larger communicators than measured: the fixed decision (one rule, algorithm 0).
        comm_rules.append(CommRule(max(per_comm) + 1, (MsgRule(0, 0, 0, 0),)))
        rules[coll.rules_id] = tuple(comm_rules)
    return rules


def render(rules: Rules, tuned: TunedAlgorithms, header: Sequence[str] = ()) -> str:
    """The rules as the text OpenMPI 4.1 reads, with comments naming collectives and algorithms."""
    names = {c.rules_id: c for c in tuned.collectives.values()}
    lines = [f"# {line}" for line in header]
    lines.append(f"{len(rules)}  # number of collectives")
    for coll_id, comm_rules in sorted(rules.items()):
        coll = names[coll_id]
        lines.append(f"{coll_id}  # collective id: {coll.name}")
        lines.append(f"{len(comm_rules)}  # number of communicator sizes")
        for comm in comm_rules:
            lines.append(f"{comm.comm_size}  # communicator size")
            lines.append(f"{len(comm.msg_rules)}  # number of message sizes")
            for rule in comm.msg_rules:
                alg = "default (fixed decision)" if rule.algorithm == 0 else coll.by_id(rule.algorithm).name
                lines.append(f"{rule.msgsize} {rule.algorithm} {rule.faninout} {rule.segsize}  "
                             f"# from {format_size(rule.msgsize) if rule.msgsize else '0 B'}: {alg}")
    return "\n".join(lines) + "\n"


def _c_long(token: str) -> int:
    """``token`` as C's ``%li`` reads it: 0x.. hexadecimal, 0.. octal, decimal otherwise."""
    sign = -1 if token.startswith("-") else 1
    body = token.lstrip("+-")
    if body.lower().startswith("0x"):
        return sign * int(body[2:], 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body[1:], 8)
    return sign * int(body, 10)


def _integers(text: str) -> list[int]:
    """The integer stream OpenMPI's reader sees ('#' comments dropped).

    OpenMPI skips a token it cannot read as a number character by character, which
    shifts every following field; such a file is refused here instead.
    """
    values = []
    for line in text.splitlines():
        for token in line.split("#", 1)[0].split():
            try:
                values.append(_c_long(token))
            except ValueError:
                raise InputError(f"rules file token {token!r} is not an integer (OpenMPI would skip it and "
                                 "misread every field after it)") from None
    return values


def parse(text: str, n_collectives: int = 22) -> Rules:
    """Read a rules file with the checks OpenMPI 4.1's reader makes; InputError where it would give up.

    ``n_collectives`` is COLLCOUNT (22 in 4.1). Beyond OpenMPI's own checks, comm
    sizes and message sizes must ascend: OpenMPI does not check this but its lookup
    assumes it, so a file violating it would choose wrong rules silently.
    """
    stream = _integers(text)
    pos = 0

    def take(what: str) -> int:
        nonlocal pos
        if pos >= len(stream):
            raise InputError(f"rules file ends before {what} (OpenMPI would ignore the whole file)")
        value = stream[pos]
        pos += 1
        if value < 0:
            raise InputError(f"rules file: {what} is negative ({value})")
        return value

    rules: Rules = {}
    count = take("the number of collectives")
    if count > n_collectives:
        raise InputError(f"rules file names {count} collectives, OpenMPI has {n_collectives}")
    for _ in range(count):
        coll_id = take("a collective id")
        if coll_id >= n_collectives:
            raise InputError(f"rules file: collective id {coll_id} is not below {n_collectives}")
        comm_rules: list[CommRule] = []
        for _ in range(take(f"the communicator count of collective {coll_id}")):
            comm_size = take(f"a communicator size of collective {coll_id}")
            msg_rules: list[MsgRule] = []
            for index in range(take(f"the message-size count of collective {coll_id}, comm size {comm_size}")):
                rule = MsgRule(*(take(f"{field} of collective {coll_id}, comm size {comm_size}")
                                 for field in ("a message size", "an algorithm", "a fan-in/out", "a segment size")))
                if index == 0 and rule.msgsize != 0:
                    raise InputError(f"rules file: collective {coll_id}, comm size {comm_size}: the first message "
                                     f"size must be 0, not {rule.msgsize}")
                if msg_rules and rule.msgsize <= msg_rules[-1].msgsize:
                    raise InputError(f"rules file: collective {coll_id}, comm size {comm_size}: message sizes "
                                     "must ascend")
                msg_rules.append(rule)
            if comm_rules and comm_size <= comm_rules[-1].comm_size:
                raise InputError(f"rules file: collective {coll_id}: communicator sizes must ascend")
            comm_rules.append(CommRule(comm_size, tuple(msg_rules)))
        rules[coll_id] = tuple(comm_rules)
    return rules


def select(rules: Rules, coll_id: int, comm_size: int, msgsize: int) -> int:
    """The algorithm OpenMPI 4.1 takes from ``rules`` (0: its fixed decision), by its own lookup."""
    comm_rules = rules.get(coll_id)
    if not comm_rules:
        return 0
    chosen = comm_rules[0]
    for comm in comm_rules:
        if comm.comm_size > comm_size:
            break
        chosen = comm
    if not chosen.msg_rules:
        return 0
    best = chosen.msg_rules[0]
    for rule in chosen.msg_rules:
        if rule.msgsize > msgsize:
            break
        best = rule
    return best.algorithm
