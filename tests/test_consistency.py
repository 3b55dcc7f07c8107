"""Cross-method consistency and baseline quality, on the seed study's own numbers."""
from __future__ import annotations

import pytest
import yaml

from mpiregress.model import baselines
from mpiregress.model.results import pt2pt, pt2pt_key
from mpiregress.verdict import cross_method as consistency


def result(method, value, placement="same_numa", metric="bandwidth", system="iris", partition="batch", samples=()):
    return pt2pt(system, partition, method, placement, metric, value, samples=list(samples))


SEED_IRIS_SAME_NUMA = [result("eessi", 4925.64), result("source", 4910.72), result("easybuild", 17483.4)]


def test_the_seed_case_flags_both_methods_behind_easybuild_with_both_values():
    findings = consistency.check(consistency.method_values(SEED_IRIS_SAME_NUMA))
    assert [(f.method, f.best_method) for f in findings] == [("source", "easybuild"), ("eessi", "easybuild")]
    eessi = findings[1]
    assert eessi.gap > 0.7
    sentence = eessi.sentence()
    assert "4926 MB/s" in sentence and "17483 MB/s" in sentence and "behind easybuild" in sentence


def test_methods_that_agree_within_the_noise_are_not_flagged():
    agreeing = [result("eessi", 14830.5), result("easybuild", 13956.9), result("source", 14545.6)]
    assert consistency.check(consistency.method_values(agreeing)) == []


def test_latency_is_behind_when_higher():
    lat = [result("eessi", 6.72, metric="latency"), result("source", 2.05, metric="latency")]
    [finding] = consistency.check(consistency.method_values(lat))
    assert finding.method == "eessi" and finding.best_method == "source"


def test_measured_noise_widens_the_threshold():
    pair = [result("eessi", 10157.2, placement="cross_socket"), result("easybuild", 13801.8, placement="cross_socket")]
    values = consistency.method_values(pair)
    assert len(consistency.check(values)) == 1                        # 26 % gap, default 5 % noise
    noisy = {pt2pt_key("iris", "batch", m, "cross_socket", "bandwidth"): 0.08 for m in ("eessi", "easybuild")}
    assert consistency.check(values, noise=noisy) == []                # 8 % run-to-run noise: 34 % allowed


def test_a_system_that_says_its_run_noise_is_judged_by_it_where_no_history_says():
    """The local VM's run_noise (15 %, systems/local.yaml): the 45 % its load put between two builds of one
    OpenMPI is not a finding there, a build 3x behind still is; a cluster keeps the 5 % default."""
    loaded = [result("source", 9162, system="local"), result("easybuild", 5030, system="local")]
    assert consistency.check(consistency.method_values(loaded)) == []
    broken = [result("source", 9162, system="local"), result("easybuild", 2900, system="local")]
    [finding] = consistency.check(consistency.method_values(broken))
    assert finding.method == "easybuild" and round(finding.threshold, 2) == 0.64
    on_iris = [result("source", 9162), result("easybuild", 5030)]
    assert [f.threshold for f in consistency.check(consistency.method_values(on_iris))] == [
        pytest.approx(3 * 2 ** 0.5 * 0.05)]


def test_different_placements_and_partitions_are_never_compared():
    mixed = [result("eessi", 4925.64), result("easybuild", 17483.4, placement="cross_socket"),
             result("source", 17000.0, partition="broadwell")]
    assert consistency.check(consistency.method_values(mixed)) == []


def test_samples_count_through_their_median():
    values = consistency.method_values([result("eessi", 1.0, samples=(17000.0, 17100.0, 1.0))])
    assert values[pt2pt_key("iris", "batch", "eessi", "same_numa", "bandwidth").without()]["eessi"] == 17000.0


def _book(refs: dict) -> baselines.Baselines:
    data = {"schema": baselines.SCHEMA, "system": "iris", "toolchain": "2023b",
            "provenance": {"study": {"description": "hand-set", "runs": 1, "collected": "2025-05-21"}},
            "references": {"batch": refs}}
    return baselines.parse(yaml.safe_load(yaml.safe_dump(data)), "<test>")


def test_a_band_far_below_what_another_build_achieves_is_too_lenient():
    book = _book({"source": {"same_numa": {"bandwidth": {"value": 4700, "tolerance": 0.2, "unit": "MB/s",
                                                         "provenance": "study"}}},
                  "easybuild": {"same_numa": {"bandwidth": {"value": 17000, "tolerance": 0.05, "unit": "MB/s",
                                                            "provenance": "study"}}}})
    findings = consistency.baseline_gaps([book], consistency.method_values(SEED_IRIS_SAME_NUMA))
    assert [(f.kind, f.method) for f in findings] == [("lenient", "source")]
    assert "admits values down to 3760 MB/s" in findings[0].sentence()


def test_a_latency_limit_is_a_ceiling_said_up_to():
    """Issue 18: 'the baseline (6.74 us) admits values down to 7.751 us' said of a latency (lower is better)."""
    book = _book({"eessi": {"same_numa": {"latency": {"value": 6.74, "tolerance": 0.15, "unit": "us",
                                                      "provenance": "study"}}}})
    measured = [result(m, v, metric="latency") for m, v in (("eessi", 6.72), ("easybuild", 3.6))]
    [finding] = consistency.baseline_gaps([book], consistency.method_values(measured))
    assert "the eessi baseline (6.74 us) admits values up to 7.751 us, 115% worse than easybuild" \
        in finding.sentence()


def test_a_band_no_build_meets_is_stale_not_every_build_broken():
    book = _book({"eessi": {"same_numa": {"latency": {"value": 0.5, "tolerance": 0.1, "unit": "us",
                                                      "provenance": "study"}}}})
    aion_like = [result(m, v, metric="latency") for m, v in (("eessi", 0.57), ("easybuild", 0.59), ("source", 0.59))]
    [finding] = consistency.baseline_gaps([book], consistency.method_values(aion_like))
    assert finding.kind == "strict" and "stale" in finding.sentence()


def test_a_stack_difference_is_named_in_the_finding():
    """The Spack build of a real Spack 0.23 concretization (UCX 1.16 without the InfiniBand
    transports) is behind EasyBuild: the finding says why the stacks differ."""
    import json
    from pathlib import Path

    from mpiregress.builds.spack import manifest_from_spec
    from mpiregress.model import toolchain
    from mpiregress.model.manifest import Manifest

    tc = toolchain.load(toolchain.default_path())
    data = json.loads((Path(__file__).parent / "data" / "spack_osu_spec_v4_broadwell.json").read_text())
    spack = manifest_from_spec(data, "/opt/spack/osu", tc)
    eb_stack = {name: {"version": str(c["version"])} for name, c in tc.stack.items()}
    easybuild = Manifest(method="easybuild", toolchain="2023b", osu_version="7.2", target="broadwell",
                         prefix="/x", bin_dir="/x", stack=eb_stack)
    stacks = consistency.stack_differences([spack, easybuild], tc)
    assert stacks == {"spack": "spack: UCX 1.16.0 (toolchain: 1.15.0); UCX 1.16.0 without rc, ud, dc, mlx5_dv; "
                               "PMIx 5.0.3 (toolchain: 4.2.6); hwloc 2.11.1 (toolchain: 2.9.2); no libfabric; no UCC"}
    values = consistency.method_values([result("easybuild", 12000.0), result("spack", 3000.0)])
    finding, = consistency.check(values, stacks=stacks)
    assert finding.method == "spack" and finding.best_method == "easybuild"
    assert finding.sentence().endswith("; the builds' MPI stacks differ: " + stacks["spack"])
    same, = consistency.check(values)
    assert "stacks differ" not in same.sentence()


def _iris_both(values_by_partition):
    return [result(m, v, partition=p) for p, values in values_by_partition.items() for m, v in values]


def test_one_finding_per_fact_the_partitions_that_share_it_are_named_once():
    """The seed study's Iris values stand for both partitions: one finding each, not a copy per partition."""
    seed = [("eessi", 4925.64), ("source", 4910.72), ("easybuild", 17483.4)]
    found = consistency.check(consistency.method_values(_iris_both({"broadwell": seed, "skylake": seed})))
    assert len(found) == 4
    grouped = consistency.group(found)
    assert [(f.method, f.partition) for f in grouped] == [("source", "broadwell, skylake"),
                                                          ("eessi", "broadwell, skylake")]
    assert isinstance(grouped[1], consistency.GroupedFinding) and grouped[1].partitions == ("broadwell", "skylake")
    assert grouped[1].sentence() == ("iris/broadwell, skylake same_numa bandwidth: eessi 4926 MB/s is 72% behind "
                                     "easybuild 17483 MB/s (noise allows 21%)")
    # The same fact with other numbers per partition: the worst stands, each partition's figures follow.
    other = consistency.check(consistency.method_values(_iris_both({
        "broadwell": seed, "skylake": [("eessi", 6000.0), ("source", 16000.0), ("easybuild", 17000.0)]})))
    (eessi,) = [f for f in consistency.group(other) if f.method == "eessi"]
    assert eessi.sentence().startswith("iris/broadwell, skylake same_numa bandwidth: eessi 4926 MB/s is 72% behind")
    assert eessi.sentence().endswith("(the worst partition's figures; broadwell: eessi 4926 vs easybuild 17483 "
                                     "MB/s, 72%; skylake: eessi 6000 vs easybuild 17000 MB/s, 65%)")
    # A fact on one partition only stays as it was; findings of other systems are never merged.
    assert [f.partition for f in consistency.group(other) if f.method == "source"] == ["broadwell"]
    aion = consistency.check(consistency.method_values([result(m, v, system="aion") for m, v in seed]))
    assert len(consistency.group(found[:1] + aion[:1])) == 2


def test_agree_only_when_two_methods_measured_the_same_thing():
    two = consistency.method_values([result("eessi", 14830.5), result("easybuild", 13956.9)])
    assert consistency.agreement(two) == ("The build methods that ran (easybuild, eessi) agree within the noise on "
                                          "the 1 measurement(s) two or more of them made — a gap >= 21% would "
                                          "have been flagged.")
    one = consistency.method_values([result("source", 14830.5), result("source", 3.1, metric="latency")])
    assert consistency.agreement(one) == "Only one build method ran (source): there is nothing to compare it with."
    apart = consistency.method_values([result("source", 1.0), result("eessi", 1.0, placement="cross_node")])
    assert "never measured the same thing" in consistency.agreement(apart)
    assert consistency.agreement({}) == "No build method measured anything: there is nothing to compare."


# --- issue 30: the check states its power and never flags a gap on one sample per build --------------

README_MAIN_JOB = [result("source", 14.56, placement="cross_node", metric="latency", system="local"),
                   result("easybuild", 26.01, placement="cross_node", metric="latency", system="local")]


def test_a_gap_on_one_sample_per_build_is_evidence_with_what_would_decide_it_never_a_flag():
    """The README main job on a quiet machine: 79 % on one sample each was "needs a look"."""
    from mpiregress.verdict import compose

    found = consistency.check(consistency.method_values(README_MAIN_JOB),
                              samples=consistency.method_samples(README_MAIN_JOB))
    [short] = found
    assert short.kind == "short" and short.samples == 1
    assert short.sentence() == ("local/batch cross_node latency: easybuild 26.01 us is 79% behind source 14.56 us on "
                                "one sample per build: not judged, 3 per build are needed (mpiregress run --repeat 3), "
                                "and with them a gap >= 64% is flagged")
    verdict = compose.of_run(README_MAIN_JOB)
    assert verdict.state == "pass"
    gap, said = verdict.of(compose.EVIDENCE)
    assert gap.judge == said.judge == "cross-method" and gap.sentence == short.sentence()
    # The verdict says what the check could and could not see.
    assert said.sentence == ("compared easybuild, source had fewer than 3 samples per build on 1 measurement(s) two "
                             "or more of them made: not judged there (mpiregress run --repeat 3 judges them).")
    # Three samples per build, the same gap: judged, and flagged with its samples.
    repeated = [result("source", 14.56, placement="cross_node", metric="latency", system="local",
                       samples=(14.5, 14.56, 14.7)),
                result("easybuild", 26.01, placement="cross_node", metric="latency", system="local",
                       samples=(25.8, 26.01, 26.3))]
    [behind] = consistency.check(consistency.method_values(repeated), samples=consistency.method_samples(repeated))
    assert behind.kind == "behind" and "(noise allows 64%, 3 samples per build)" in behind.sentence()
    assert compose.of_run(repeated).state == "needs a look"
    alike = [result(m, v, placement="cross_node", metric="latency", system="local", samples=(v, v * 1.01, v * 0.99))
             for m, v in (("source", 14.56), ("easybuild", 14.9))]
    [power] = compose.of_run(alike).of(compose.EVIDENCE)
    assert power.sentence == ("compared easybuild, source on 1 measurement(s) with enough samples: a gap >= 64% would "
                              "have been flagged.")


def test_this_runs_own_spread_widens_the_threshold_when_larger():
    wide = [result("source", 100.0, placement="cross_node", metric="latency", system="local",
                   samples=(60.0, 100.0, 140.0)),
            result("easybuild", 190.0, placement="cross_node", metric="latency", system="local",
                   samples=(150.0, 190.0, 230.0))]
    values, samples = consistency.method_values(wide), consistency.method_samples(wide)
    assert consistency.check(values) != []                      # 90 % against the system's 64 %
    assert consistency.check(values, samples=samples) == []     # this run's own spread allows more
    assert "would have been flagged" in consistency.agreement(values, samples)


def test_the_pass_states_its_power_and_what_it_could_not_judge():
    one = consistency.method_values(README_MAIN_JOB[:1] + [
        result("easybuild", 15.0, placement="cross_node", metric="latency", system="local")])
    said = consistency.agreement(one, consistency.method_samples(README_MAIN_JOB[:1] + [
        result("easybuild", 15.0, placement="cross_node", metric="latency", system="local")]))
    assert said == ("The build methods that ran (easybuild, source) had fewer than 3 samples per build on 1 "
                    "measurement(s) two or more of them made: not judged there (mpiregress run --repeat 3 judges "
                    "them).")


def test_two_identical_stacks_are_no_difference_only_real_differences_are_named():
    """"easybuild: hwloc 2.9.0 (toolchain: 2.9.2); source: hwloc 2.9.0 (toolchain: 2.9.2)" named two identical
    stacks as a difference."""
    stacks = {"easybuild": "easybuild: hwloc 2.9.0 (toolchain: 2.9.2)", "source": "source: hwloc 2.9.0 (toolchain: 2.9.2)"}
    values = consistency.method_values([result("source", 9000.0, system="local"),
                                        result("easybuild", 2000.0, system="local")])
    [finding] = consistency.check(values, stacks=stacks)
    assert "stacks differ" not in finding.sentence()
    stacks["easybuild"] = "easybuild: hwloc 2.9.0 (toolchain: 2.9.2); UCX 1.14.0 without verbs"
    [finding] = consistency.check(values, stacks=stacks)
    assert finding.sentence().endswith("; the builds' MPI stacks differ: easybuild: UCX 1.14.0 without verbs")


# --- issue 33: a method with no baseline yet is compared, not an error that hides it ------------------

def _no_baseline(r):
    r.status, r.reason = "error", "no baseline for it: measured but not judged"
    r.conditions["baseline"] = "none"
    return r


def test_a_method_with_no_baseline_yet_is_held_against_the_others_with_a_proposed_baseline():
    from mpiregress.verdict import compose

    found = [result("source", 9100.0, system="local"), _no_baseline(result("spack", 9000.0, system="local"))]
    assert consistency.adopt_unbaselined(found) == 1
    spack = found[1]
    assert spack.status == "pass" and spack.conditions["verdict"] == "no baseline yet"
    assert spack.conditions["proposed_baseline"] == 9000.0
    assert spack.reason == ("no baseline yet — here is how it compares with the others: spack 9000 MB/s, source "
                            "9100 MB/s: 1% behind source, within the noise on 1 sample(s) per build: not judged, 3 "
                            "per build are needed (mpiregress run --repeat 3), and with them a gap >= 64% is "
                            "flagged; proposed baseline 9000 MB/s (mpiregress baseline propose)")
    verdict = compose.of_run(found)
    assert verdict.state == "pass"
    assert [(f.state, f.judge, f.subject) for f in verdict.findings] == [
        (compose.EVIDENCE, "cross-method", found[1].key().name()), (compose.EVIDENCE, "cross-method", "the build methods")]
    # Far behind the others on one sample: shown with what a repeat would decide, not flagged (issue 30) ...
    slow = [result("source", 9100.0, system="local"), _no_baseline(result("spack", 1000.0, system="local"))]
    consistency.adopt_unbaselined(slow)
    assert compose.of_run(slow).state == "pass"
    assert "beyond the noise on 1 sample(s) per build: not judged, 3 per build are needed" in slow[1].reason
    assert [f.subject for f in compose.of_run(slow).of(compose.EVIDENCE)] == [slow[1].key().name(),
                                                                               "the build methods"]
    # ... and on three samples per build it needs a look, said once.
    slow3 = [result("source", 9100.0, system="local", samples=(9000.0, 9100.0, 9200.0)),
             _no_baseline(result("spack", 1000.0, system="local", samples=(990.0, 1000.0, 1010.0)))]
    consistency.adopt_unbaselined(slow3)
    verdict = compose.of_run(slow3)
    assert verdict.state == "needs a look" and len(verdict.of("needs a look")) == 1
    # Nothing judged measured that series: it stays the error it was.
    alone = [_no_baseline(result("spack", 9000.0, system="local"))]
    assert consistency.adopt_unbaselined(alone) == 0 and alone[0].status == "error"
