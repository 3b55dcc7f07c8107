"""One verdict per pipeline event, composed from every judgement, and the one exit code it gives.

The judges (:mod:`.band`, :mod:`.history_gate`, :mod:`mpiregress.verdict.ab.paired`, the confirmation of
:mod:`mpiregress.verdict.ab.confirm`, :mod:`.cross_method`) each say what they see about a series. Which of
them *gates* depends on the event (``gating.yaml``, :mod:`.policy`): a toolchain MR is judged by its
paired A/B run, the weekly schedule by the history confirmed by a re-measurement, a standalone run by
its baselines. Everything else they say is kept as evidence, and what deserves a person without
failing the pipeline (a method behind the others, a stale baseline, an improvement, a noisy node, a
series still inconclusive after its last pair) makes the state **needs a look**.

Every surface (exit code, summary.md, the HTML badge, JUnit, the MR note) renders the
:class:`PipelineVerdict` made here; :func:`exit_code` is the only place a verdict becomes a code.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from mpiregress import errors
from mpiregress.families.links.series import BENCHMARK as LINKTEST
from mpiregress.families.noise.records import BENCHMARK as FWQ
from mpiregress.model.results import Result
from mpiregress.model.series import SeriesKey
from mpiregress.model.systems import get as get_system
from mpiregress.verdict import cross_method, policy
from mpiregress.verdict.ab.paired import PairedConfig
from mpiregress.verdict.band import band_power
from mpiregress.verdict.cross_method import Finding as CrossFinding
from mpiregress.verdict.history_gate import Verdict
from mpiregress.verdict.noise import floor_of
from mpiregress.verdict.power import JUDGE_KEYS, Power, Target, from_conditions, target_for, targets_of

if TYPE_CHECKING:   # the A/B package imports the history gate: no cycle at run time
    from mpiregress.verdict.ab.confirm import Confirmation
    from mpiregress.verdict.ab.paired import PairedVerdict

# Pipeline states, worst first: the first state any finding has is the verdict's.
STATES: tuple[str, ...] = ("error", "regression", "infrastructure", "needs a look", "pass", "not available")
# Findings that are shown but never decide the state.
EVIDENCE = "evidence"

_EXIT_CODES: Mapping[str, int] = {
    "pass": errors.OK, "needs a look": errors.NEEDS_A_LOOK, "regression": errors.REGRESSION,
    "error": errors.ERROR, "infrastructure": errors.INFRASTRUCTURE, "not available": errors.SKIPPED}


@dataclass(frozen=True)
class Finding:
    """One thing a judge said that the verdict shows: a gating regression, an error, something to look at,
    or evidence that did not gate (with why it did not)."""

    state: str                    # one of STATES but "pass"/"not available", or EVIDENCE
    judge: str                    # paired A/B | history gate | baseline band | link matrix | confirmation | ...
    subject: str                  # the series (or the group of series) it is about
    sentence: str                 # what was seen, with the numbers
    cause: str = ""               # the likely cause, from evidence only ('' when nothing points anywhere)
    key: Optional[SeriesKey] = None
    effect: Optional[float] = None       # relative, positive = worse
    low: Optional[float] = None          # interval of the effect (paired A/B)
    high: Optional[float] = None


@dataclass
class Evidence:
    """Everything the judges said about one pipeline event's measurements."""

    results: Sequence[Result] = ()                       # measured, judged against their baselines (band)
    history: Optional[Sequence[Verdict]] = None          # the history gate, when it ran
    paired: Optional[Sequence["PairedVerdict"]] = None   # the paired A/B verdicts, when A/B ran
    confirmations: Optional[Sequence["Confirmation"]] = None   # re-measurements of history regressions
    cross: Sequence[CrossFinding] = ()                   # methods behind the best on one placement
    cross_before: Optional[Sequence[CrossFinding]] = None   # the same check on the latest accepted history
    baseline_findings: Sequence[CrossFinding] = ()       # lenient or stale baseline bands
    cross_power: str = ""     # what cross-method could have seen where it passed (cross_method.power), evidence
    causes: Mapping[SeriesKey, str] = field(default_factory=dict)
    problems: Sequence[str] = ()                         # the run's own errors, one sentence each
    infrastructure: Sequence[str] = ()                   # Slurm or the network stopped checks
    changed_methods: frozenset[str] = frozenset()        # methods whose build definition the MR changes
    # Systems whose baselines file the MR changes (None: not known, every system counts as changed).
    changed_baselines: Optional[frozenset[str]] = None
    # Per system, per judge, the effect a run must be able to see (None: each system file's ``power:``).
    targets: Optional[Mapping[str, Mapping[str, Target]]] = None


@dataclass
class PipelineVerdict:
    """The one verdict of a pipeline event: its state, and every finding behind it."""

    event: str
    gating: tuple[str, ...]
    findings: list[Finding]
    series: list[SeriesKey]       # every series measured (a value, or a paired verdict)
    judged: int                   # series the gating judges looked at
    said: dict[SeriesKey, str] = field(default_factory=dict)   # the gating judge's sentence per series, pass too
    # What the judge that gates each series could have seen there (verdict.power): every surface shows it.
    power: dict[SeriesKey, Power] = field(default_factory=dict)

    @property
    def measured(self) -> int:
        return len(self.series)

    @property
    def state(self) -> str:
        present = {f.state for f in self.findings}
        for state in STATES[:4]:
            if state in present:
                return state
        return "pass" if self.measured else "not available"

    def of(self, state: str) -> list[Finding]:
        """The findings in ``state`` (or EVIDENCE), in the order they were found."""
        return [f for f in self.findings if f.state == state]

    def counts(self) -> dict[str, int]:
        """How many findings in each state (evidence included), zero counts left out."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.state] = out.get(f.state, 0) + 1
        return out

    def to_dict(self) -> dict:
        """The verdict as data (verdict.json): the state, its exit code and every finding."""
        return {"event": self.event, "state": self.state, "exit_code": exit_code(self), "gating": list(self.gating),
                "measured": self.measured, "judged": self.judged,
                "findings": [{"state": f.state, "judge": f.judge, "subject": f.subject, "sentence": f.sentence,
                              "cause": f.cause, "effect": f.effect, "low": f.low, "high": f.high}
                             for f in self.findings],
                "power": {k.name(): p.to_dict() for k, p in sorted(self.power.items())}}


def exit_code(verdict: PipelineVerdict, measure_only: bool = False) -> int:
    """The exit code of ``verdict``: the only place a verdict becomes a code.

    ``measure_only`` (a pipeline's measurement job, whose verdict is made once by the verdict job):
    exit 0 when it measured, whatever the judges said; errors, infrastructure and "not available"
    keep their codes.
    """
    state = verdict.state
    if measure_only and state in ("regression", "needs a look"):
        return errors.OK
    return _EXIT_CODES[state]


def compose(event: str, ev: Evidence) -> PipelineVerdict:
    """The verdict of ``event`` from everything the judges said (:data:`Evidence`)."""
    rules = policy.load()[event]
    found: list[Finding] = []
    found += [Finding("error", "run", "the run", p) for p in ev.problems]
    found += [Finding("infrastructure", "run", "the run", p) for p in ev.infrastructure]
    paired = {v.key: v for v in ev.paired or ()}
    found += _band(ev, rules, paired)
    found += _history(ev, rules, paired)
    found += _paired(ev, rules)
    found += _cross(ev, rules)
    if ev.cross_power:
        found.append(Finding(EVIDENCE, "cross-method", "the build methods", ev.cross_power))
    found += _noise(ev)
    judged = len(paired) if "paired_ab" in rules.gates else \
        len(ev.history or ()) if "history_gate" in rules.gates else len(_measured_keys(ev.results))
    judged_keys = {k for k, v in paired.items() if v.verdict not in ("error", "skip")} | {
        v.key for v in ev.history or () if v.verdict not in ("error", "skip")}
    series = sorted(_measured_keys(ev.results) | judged_keys)
    power, passed = _power(ev, rules)
    found += _short(power, passed, paired)
    found = [_not_caused(f, rules) for f in found]
    said = _said(ev, rules)
    for key, p in power.items():
        if key in said and key in passed:      # what a pass could have seen; a failure shows what it saw
            said[key] += f" — {p.sentence()}"
    return PipelineVerdict(event=event, gating=rules.gates, findings=_unique(found), series=series, judged=judged,
                           said=said, power=power)


def _said(ev: Evidence, rules: policy.Rules) -> dict[SeriesKey, str]:
    """What the judge that gates each series said about it, a pass included (JUnit's and the report's text)."""
    out: dict[SeriesKey, str] = {}
    if "baseline_band" in rules.gates or "baseline_band_changed" in rules.gates:
        out.update({r.key(): f"baseline band: {r.status}" + (f": {r.reason}" if r.reason else "")
                    for r in ev.results if r.status in ("pass", "fail")})
    if "history_gate" in rules.gates or "paired_ab" in rules.gates:
        out.update({v.key: f"history gate: {v.verdict}: {v.reason}" for v in ev.history or ()})
    if "paired_ab" in rules.gates:
        out.update({v.key: f"paired A/B: {v.verdict}: {v.reason}" for v in ev.paired or ()})
    return out


# The kind of finding (gating.yaml ``look_at``) each judge's name stands for.
_KINDS = {"paired A/B": "paired_ab", "history gate": "history_gate", "baseline band": "baseline_band",
          "cross-method": "cross_method", "baselines": "baselines", "noise": "noise", "link matrix": "links",
          "confirmation": "history_gate"}


def _not_caused(f: Finding, rules: policy.Rules) -> Finding:
    """A finding to look at that the event's rules do not look at (``look_at``) is evidence: on a toolchain MR a
    gap main has too, a stale baseline or a noisy node is not what the MR changed."""
    if f.state != "needs a look" or rules.look_at is None:
        return f
    kind = _KINDS.get(f.judge, "paired_ab" if f.judge.endswith("(no A)") else f.judge)
    if f.judge == "cross-method" and "this MR changes the" in f.sentence:
        kind = "build_method"
    if f.sentence.startswith("not a pass") and "could not see" in f.sentence:
        kind = "power"
    if kind in rules.look_at:
        return f
    return replace(f, state=EVIDENCE, sentence=f"{f.sentence} — evidence for the weekly issue: not what this "
                   f"{rules.name.replace('_', ' ')} changed, so it does not make it yellow")


def _targets_of(system: str) -> Mapping[str, Target]:
    """A system file's ``power:`` targets ({} for a system without a file, e.g. a test's or a site's own)."""
    try:
        return targets_of(get_system(system))
    except errors.InputError:
        return {}


def _power(ev: Evidence, rules: policy.Rules) -> tuple[dict[SeriesKey, Power], set[SeriesKey]]:
    """(what the judge that gates each series could have seen, the series that judge passed).

    The same judge as :func:`_said` (the paired A/B over the history gate over the band); a judge that
    left its power on a result (``conditions["power"]``: the link matrix, the cross-method check) fills
    series no other gating judge did. Each power gets its system's target where the judge declared none.
    """
    out: dict[SeriesKey, Power] = {}
    passed: set[SeriesKey] = set()
    if "baseline_band" in rules.gates or "baseline_band_changed" in rules.gates:
        for r in ev.results:
            p = band_power(r)
            if p is not None:
                out[r.key()] = p
                if r.status == "pass" and r.conditions.get("verdict") != "noisy":
                    passed.add(r.key())
    if "history_gate" in rules.gates or "paired_ab" in rules.gates:
        for v in ev.history or ():
            if v.power is not None:
                out[v.key] = v.power
                if v.verdict == "pass":
                    passed.add(v.key)
    if "paired_ab" in rules.gates:
        for pv in ev.paired or ():
            if pv.power is not None:
                out[pv.key] = pv.power
                passed.discard(pv.key)
                if pv.verdict == "pass" or (pv.verdict == "inconclusive" and not _beyond_min_effect(pv)):
                    passed.add(pv.key)
    for r in ev.results:
        p = from_conditions(r.conditions)
        if p is not None and r.key() not in out:
            out[r.key()] = p
            if r.status == "pass":
                passed.add(r.key())
    cache: dict[str, Mapping[str, Target]] = {}
    for key, p in out.items():
        if p.target is None:
            if ev.targets is not None:
                targets = ev.targets.get(key.system, {})
            else:
                targets = cache.setdefault(key.system, _targets_of(key.system))
            target = target_for(targets.get(JUDGE_KEYS.get(p.judge, "")), key.metric, key.placement)
            if target is not None:
                out[key] = p.with_target(target)
    return out, passed


def _short(power: Mapping[SeriesKey, Power], passed: set[SeriesKey],
           paired: Mapping[SeriesKey, "PairedVerdict"]) -> list[Finding]:
    """A pass whose judge could not have seen its target is not a pass: "needs a look", saying what it could see."""
    out = []
    for key in sorted(passed):
        p = power.get(key)
        if p is None or not p.short:
            continue
        v = paired.get(key)
        pairs = f" after {v.pairs} of {v.max_pairs} pairs" if v is not None and v.basis == "paired" else ""
        out.append(Finding("needs a look", p.judge, key.name(), f"not a pass{pairs}: {p.short_sentence()}", key=key))
    return out


def _measured_keys(results: Iterable[Result]) -> set[SeriesKey]:
    return {r.key() for r in results if r.value is not None and r.status in ("pass", "fail")}


def _unique(found: list[Finding]) -> list[Finding]:
    """One finding per fact: the same sentence about the same subject from two inputs is said once, and a
    series in error is one error (its check's failure and the gate's "the check failed" are one fact)."""
    seen: set[tuple] = set()
    out = []
    for f in found:
        marks = [(f.state, f.subject, f.sentence)] + ([("error", f.key)] if f.state == "error" and f.key else [])
        if not any(m in seen for m in marks):
            seen.update(marks)
            out.append(f)
    return out


def _band(ev: Evidence, rules: policy.Rules, paired: Mapping[SeriesKey, "PairedVerdict"]) -> list[Finding]:
    """The baseline band's fails and the run's check errors."""
    out = []
    for r in ev.results:
        key = r.key()
        if r.status == "error" and r.conditions.get("infrastructure"):
            if key not in paired:         # an A/B series' lost pairs are its paired verdict's
                out.append(Finding("infrastructure", "check", key.name(), r.reason, key=key))
        elif r.status == "error" and key not in paired:     # an A/B series' error is its paired verdict's
            out.append(Finding("error", "check", key.name(), r.reason or "the check failed", key=key))
        if r.conditions.get("verdict") == "noisy":
            # A link series is "noisy" when its run could not see the system's targets (links.analysis).
            out.append(Finding("needs a look", "link matrix" if r.benchmark == LINKTEST else "noise", key.name(),
                               r.reason, key=key))
        if r.conditions.get("verdict") == cross_method.NO_BASELINE:
            # Not an error: held against the other methods instead (docs/pipeline.md, "A new build method");
            # it needs a look when behind them, said once (by the cross-method finding where there is one).
            flagged = any(f.kind == "behind" and f.method == r.method and (f.system, f.partition, f.benchmark,
                          f.parameters, f.metric) == key.without() for f in ev.cross)
            state = "needs a look" if r.conditions.get("behind") and not flagged else EVIDENCE
            out.append(Finding(state, "cross-method", key.name(), r.reason, key=key))
        if r.status != "fail":
            continue
        if r.benchmark == LINKTEST:
            # The link matrix failed this series itself (a bad node or link against the typical pair of the
            # same run, confirmed on re-test): no baseline is involved, and what it names is hardware.
            judge, gates = "link matrix", "links" in rules.gates
        else:
            judge = "baseline band"
            gates = "baseline_band" in rules.gates or ("baseline_band_changed" in rules.gates
                                                        and _changed(key, ev, rules))
        cause = ev.causes.get(key, "")
        if gates:
            out.append(Finding("regression", judge, key.name(), r.reason, cause=cause, key=key))
        else:
            out.append(Finding(EVIDENCE, judge, key.name(), r.reason + _why_not_gating(judge, key, rules, paired),
                               key=key))
    return out


def _noise(ev: Evidence) -> list[Finding]:
    """What the noise family's FWQ runs found, per partition and layout: a periodic event it names on a core
    or a host deserves a person (a daemon, a timer); the rest of its findings (each node's efficiency and
    lost time, stalls without a period, the kernel tick) are evidence, shown with the verdict."""
    out: list[Finding] = []
    for r in ev.results:
        if r.benchmark != FWQ or r.metric != "efficiency" or r.value is None:
            continue
        subject = f"{r.system}/{r.partition} noise, {r.parameters.get('layout')} ({r.method})"
        events = [str(s) for s in r.conditions.get("events") or ()]
        out += [Finding("needs a look", "noise", subject, s) for s in events]
        out += [Finding("needs a look", "noise", subject, s) for s in _below_floor(r)]
        out += [Finding(EVIDENCE, "noise", subject, str(s)) for s in r.conditions.get("findings") or ()
                if str(s) not in events and not str(s).startswith("kernel cross-check")]
    return out


def _below_floor(r: Result) -> list[str]:
    """A node that kept less of its cores than the system's noise floor, where no band judged its efficiency
    (a band, where a site sets one, says it itself): a job there loses that time whatever the cause. One rank
    alone has efficiency 1 by definition and says nothing."""
    floor = floor_of(r.system)
    cores = r.conditions.get("cores") or ()
    if r.reference is not None or r.value is None or len(cores) < 2 or r.value >= floor.efficiency:
        return []
    return [f"{r.parameters.get('node')}: efficiency {r.value:.3f} over {len(cores)} cores, below the noise floor "
            f"{floor.efficiency:.2f} ({floor.source} noise_floor): a job there loses {1 - r.value:.0%} of its time "
            f"to whatever else runs on the node"]


def _changed(key: SeriesKey, ev: Evidence, rules: policy.Rules) -> bool:
    """Whether the MR changes the baselines file of ``key``'s system. Not known: under an A/B event the pairs
    decide (a toolchain MR need not touch baselines); a baselines MR changes them all."""
    if ev.changed_baselines is not None:
        return key.system in ev.changed_baselines
    return "paired_ab" not in rules.gates


def _history(ev: Evidence, rules: policy.Rules, paired: Mapping[SeriesKey, "PairedVerdict"]) -> list[Finding]:
    """The history gate: gating (confirmed where the event asks for it) or evidence."""
    out: list[Finding] = []
    confirmed = {c.key: c for c in ev.confirmations or ()}
    for v in ev.history or ():
        # Under an A/B event, a series with no A is the history's to judge (confirmed before it fails).
        gates = "history_gate" in rules.gates or ("paired_ab" in rules.gates and v.key not in paired)
        cause = ev.causes.get(v.key, "")
        common: dict[str, Any] = dict(judge="history gate", subject=v.name(), key=v.key, effect=v.effect)
        if not gates:
            if v.verdict == "regression":
                out.append(Finding(EVIDENCE, sentence=v.reason + _why_not_gating("history gate", v.key, rules,
                                                                                   paired), **common))
            continue
        if v.verdict == "regression":
            out.append(_confirmed(v.reason, cause, confirmed.get(v.key), rules, common))
        elif v.verdict == "error":
            out.append(Finding("error", sentence=v.reason, **common))
        elif v.verdict in ("noisy", "improvement"):
            out.append(Finding("needs a look", sentence=v.reason, cause=cause, **common))
    return out


def _confirmed(reason: str, cause: str, confirmation: Optional["Confirmation"], rules: policy.Rules,
               common: dict) -> Finding:
    """A history regression under an event that confirms before failing."""
    if not rules.confirm_history:
        return Finding("regression", sentence=reason, cause=cause, **common)
    if confirmation is None:
        return Finding("needs a look", sentence=f"{reason}; not confirmed: no re-measurement was made, so it does "
                       f"not fail the pipeline", cause=cause, **common)
    if confirmation.outcome == "error":
        return Finding("error", sentence=f"{reason}; {confirmation.sentence}", **common)
    if confirmation.gates:
        return Finding("regression", sentence=f"{reason}; {confirmation.sentence}", cause=cause, **common)
    return Finding("needs a look", sentence=f"transient: {confirmation.sentence}", cause=cause, **common)


def _paired(ev: Evidence, rules: policy.Rules) -> list[Finding]:
    """The paired A/B verdicts: gating for a toolchain MR, and where they contradict the other judges."""
    out: list[Finding] = []
    if ev.paired is None:
        return out
    confirmed = {c.key: c for c in ev.confirmations or ()}
    gates = "paired_ab" in rules.gates
    # Slurm, not the build, stopped these series' pairs (a lost node): worth a retry, not an error.
    lost = {r.key(): r.reason for r in ev.results if r.status == "error" and r.conditions.get("infrastructure")}
    for v in ev.paired:
        cause = ev.causes.get(v.key, "")
        judge = "paired A/B" if v.basis == "paired" else f"{v.basis} (no A)"
        common: dict[str, Any] = dict(judge=judge, subject=v.name(), key=v.key, effect=v.effect, low=v.low,
                                      high=v.high)
        if not gates:
            if v.verdict == "regression":
                out.append(Finding(EVIDENCE, sentence=v.reason, **common))
            continue
        if v.verdict == "error" and v.key in lost:
            out.append(Finding("infrastructure", sentence=f"{v.reason}; {lost[v.key]}", **common))
        elif v.verdict == "error":
            out.append(Finding("error", sentence=v.reason, **common))
        elif v.verdict == "regression" and v.basis != "paired":
            # No A to pair with: the history judged B, and history gates only once confirmed.
            out.append(_confirmed(v.reason, cause, confirmed.get(v.key), rules, common))
        elif v.verdict == "regression":
            out.append(Finding("regression", sentence=v.reason, cause=cause, **common))
        elif v.verdict == "inconclusive" and not _beyond_min_effect(v):
            # Too noisy to certify, but its estimate is within the minimum effect: said, not flagged.
            out.append(Finding(EVIDENCE, sentence=f"inconclusive within the minimum effect: {v.reason}", **common))
        elif v.verdict in ("inconclusive", "improvement") and _within_target(v):
            # Its interval leaves no room, on its side, for a change as large as the system must see.
            assert v.power is not None and v.power.target is not None
            out.append(Finding(EVIDENCE, sentence=f"{v.verdict}, but its interval excludes a change of the "
                               f"{v.power.amount(v.power.target)} target: {v.reason}", **common))
        elif v.verdict in ("inconclusive", "improvement", "noisy"):
            out.append(Finding("needs a look", sentence=f"{v.verdict}: {v.reason}", cause=cause, **common))
    return out


def _within_target(v: "PairedVerdict") -> bool:
    """The series' interval ends short of its power target on the verdict's side (the worst end of an
    inconclusive series, the best end of an improvement): whatever it is, it is not a change this system
    must see."""
    p = v.power
    if p is None or p.target is None or p.scale != "relative":
        return False
    if v.verdict == "improvement":
        return v.low is not None and -v.low < p.target
    return v.high is not None and v.high < p.target


def _beyond_min_effect(v: "PairedVerdict") -> bool:
    """An A/B estimate worse than the minimum effect that matters (or one not known)."""

    return v.effect is None or v.effect > PairedConfig().min_effect.get(v.metric, 0.03)


def _cross(ev: Evidence, rules: policy.Rules) -> list[Finding]:
    """Methods behind the others (gating when the MR changed that method's build), baselines to revisit."""
    out = []
    for f in ev.cross:
        subject = f"{f.system}/{f.partition} {f.label} {f.metric} ({f.method})"
        if f.kind == "short":       # a gap on too few samples to judge: shown, never flagged
            adopted = any(r.method == f.method and r.conditions.get("verdict") == cross_method.NO_BASELINE and
                          r.key().without() == (f.system, f.partition, f.benchmark, f.parameters, f.metric)
                          for r in ev.results)
            if not adopted:        # a method with no baseline yet says it in its own sentence (_band)
                out.append(Finding(EVIDENCE, "cross-method", subject, f.sentence()))
            continue
        already = ev.cross_before is not None and any(
            (b.method, b.system, b.partition, b.benchmark, b.parameters, b.metric) ==
            (f.method, f.system, f.partition, f.benchmark, f.parameters, f.metric) for b in ev.cross_before)
        if "build_method" in rules.gates and f.method in ev.changed_methods and not already:
            cause = f"build (method {f.method})" + (f": {f.stack}" if f.stack else "")
            before = ("no history says whether it was behind before" if ev.cross_before is None
                      else "the latest accepted run had it in line")
            out.append(Finding("regression", "cross-method", subject, f"{f.sentence()}; this MR changes the "
                               f"{f.method} build definition, and {before}", cause=cause))
        elif "build_method" in rules.gates and f.method in ev.changed_methods:
            out.append(Finding("needs a look", "cross-method", subject,
                               f"{f.sentence()}; already behind in the latest accepted run, before this MR"))
        else:
            out.append(Finding("needs a look", "cross-method", subject, f.sentence()))
    out += [Finding("needs a look", "baselines", f"{f.system}/{f.partition} {f.label} {f.metric} ({f.method})",
                    f.sentence()) for f in ev.baseline_findings]
    return out


def _why_not_gating(judge: str, key: SeriesKey, rules: policy.Rules,
                    paired: Mapping[SeriesKey, "PairedVerdict"]) -> str:
    """Why a judge's regression did not fail this event, and what the gating judge said instead."""
    v = paired.get(key)
    if v is not None and v.basis == "paired":
        said = "also a regression" if v.verdict == "regression" else v.verdict
        if v.verdict in ("pass", "improvement"):
            return (f" — evidence only: A/B on the same nodes says {said} "
                    f"({'' if v.effect is None else f'{v.effect:+.1%}, '}{v.pairs} pairs), so the drift is common "
                    f"to A and B: the system or the day, not this change")
        return f" — evidence only: A/B on the same nodes says {said}"
    return f" — evidence only: for a {rules.name.replace('_', ' ')} the {' and '.join(rules.gates)} gate(s)"


def of_run(results: Sequence[Result], problems: Sequence[str] = (), event: str = "run",
           causes: Optional[Mapping[SeriesKey, str]] = None) -> PipelineVerdict:
    """The verdict of one run's band-judged results (and its problems), with the cross-method check;
    ``causes``: the likely cause of each failing series from the run's own evidence (ab.evidence.run_causes)."""
    values, samples = cross_method.method_values(results), cross_method.method_samples(results)
    return compose(event, Evidence(results=results, problems=problems, causes=dict(causes or {}),
                                   cross=cross_method.group(cross_method.check(values, samples=samples)),
                                   cross_power=cross_method.power(values, samples)))


def of_history(verdicts: Sequence[Verdict], event: str = "history") -> PipelineVerdict:
    """The verdict of the history gate's series verdicts alone."""
    return compose(event, Evidence(history=verdicts))


def of_paired(verdicts: Sequence["PairedVerdict"], event: str = "toolchain_mr") -> PipelineVerdict:
    """The verdict of an A/B run's paired verdicts alone."""
    return compose(event, Evidence(paired=verdicts))


def exit_code_of_run(results: Sequence[Result], problems: Sequence[str] = (), event: str = "run") -> int:
    """:func:`exit_code` of :func:`of_run`."""
    return exit_code(of_run(results, problems, event))


def exit_code_of_history(verdicts: Sequence[Verdict], event: str = "history") -> int:
    """:func:`exit_code` of :func:`of_history`."""
    return exit_code(of_history(verdicts, event))


def exit_code_of_paired(verdicts: Sequence["PairedVerdict"], event: str = "toolchain_mr") -> int:
    """:func:`exit_code` of :func:`of_paired`."""
    return exit_code(of_paired(verdicts, event))
