"""Finding A for a toolchain MR (mpiregress/run/ab/sides.py), pairing A and B builds, and A/B samples as
Results (side and pair in conditions; a crashed side drops its pair and says so)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.osu_double import make_tarball
from shared import REPO

from mpiregress.errors import InputError
from mpiregress.model import manifest, results, toolchain
from mpiregress.run.ab import sides
from mpiregress.verdict.ab import judge


def write_manifest(folder: Path, method: str = "source", target: str = "x86_64_v4", env_vars=None) -> Path:
    return manifest.write(manifest.Manifest(
        method=method, toolchain="2023b", osu_version="7.2", target=target, prefix=f"/p/{method}/{target}",
        bin_dir=f"/p/{method}/{target}/libexec/osu-micro-benchmarks/mpi",
        env={"setup": [], "modules": [], "env_vars": dict(env_vars or {})}), folder)


def test_a_given_folder_without_manifests_is_one_sentence(tmp_path):
    with pytest.raises(InputError, match="is not a folder of build manifests"):
        sides.find(str(tmp_path), system="local", partition="batch", methods=["source"])


def test_an_a_a_run_pairs_the_build_with_itself_and_says_every_alarm_is_false(tmp_path):
    b_dir = tmp_path / "b"
    write_manifest(b_dir)
    found = sides.find(sides.SAME, system="local", partition="batch", methods=["source"], b_dir=b_dir)
    assert found.source == "same" and found.directory == b_dir.resolve() and "false alarm" in found.sentence
    pairing = sides.pair_builds(found.directory, b_dir, ["source"])
    a, b = pairing.pairs["source"]
    assert a.path == b.path
    with pytest.raises(InputError, match="needs B's builds"):
        sides.find(sides.SAME, system="local", partition="batch", methods=["source"], b_dir=tmp_path / "none")


def test_a_is_found_in_the_manifest_store_of_the_target_branch(tmp_path):
    store = tmp_path / "store"
    write_manifest(sides.store_folder(store, "main", "local", "batch"))
    found = sides.find("auto", system="local", partition="batch", methods=["source"], branch="main", store=store)
    assert found.source == "store" and found.directory == store / "main" / "local-batch"
    assert "main's last pipeline build" in found.sentence
    # Another branch's MR does not take main's builds.
    other = sides.find("auto", system="local", partition="batch", methods=["source"], branch="release/2023b",
                       store=store, build=False)
    assert other.directory is None and "release_2023b" in other.sentence


def test_no_a_and_an_unknown_merge_base_falls_back_saying_why(tmp_path):
    found = sides.find("auto", system="local", partition="batch", methods=["source"],
                       branch="no-such-branch-for-ab", store=tmp_path / "store", work_root=tmp_path / "ab")
    assert found.directory is None and found.source == "none"
    assert "merge base with no-such-branch-for-ab is unknown" in found.sentence
    assert not (tmp_path / "ab").exists()


def test_mismatched_targets_are_refused_in_one_sentence(tmp_path):
    write_manifest(tmp_path / "a", target="broadwell")
    write_manifest(tmp_path / "b", target="skylake_avx512")
    with pytest.raises(InputError, match="A and B were built for different targets .*broadwell.*skylake_avx512"):
        sides.pair_builds(tmp_path / "a", tmp_path / "b", ["source"])


def test_a_given_for_another_method_is_refused(tmp_path):
    write_manifest(tmp_path / "a", method="spack")
    write_manifest(tmp_path / "b", method="source")
    with pytest.raises(InputError, match="A and B are different build methods"):
        sides.pair_builds(tmp_path / "a", tmp_path / "b", ["source"])


def test_a_method_without_a_is_judged_by_history_and_the_others_are_paired(tmp_path):
    write_manifest(tmp_path / "a", method="source")
    write_manifest(tmp_path / "b", method="source")
    write_manifest(tmp_path / "b", method="spack")
    pairing = sides.pair_builds(tmp_path / "a", tmp_path / "b", ["source", "spack"])
    assert set(pairing.pairs) == {"source"} and "no A build of method spack" in pairing.b_only["spack"]


def test_default_branch_builds_are_kept_in_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    write_manifest(tmp_path / "job", method="source")
    kept = sides.keep_in_store("local", "batch", "main", tmp_path / "job", "source")
    assert kept == [tmp_path / "state" / "ab-store" / "main" / "local-batch" / "source-x86_64_v4.json"]
    found = sides.find("auto", system="local", partition="batch", methods=["source"],
                       store=tmp_path / "state" / "ab-store")
    assert found.source == "store"


def test_a_toolchain_runtime_env_must_be_a_mapping(tmp_path):
    data = yaml.safe_load((REPO / "toolchains" / "2023b.yaml").read_text())
    data["mpi"]["runtime_env"] = ["OMPI_MCA_btl=^vader"]
    path = tmp_path / "toolchains" / "2023b.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="'mpi.runtime_env' must map variable names to values"):
        toolchain.load(path)


def _sample(side: str, pair: int, value, status="pass", reason=""):
    return results.pt2pt("local", "batch", "source", "same_numa", "latency", value, status=status, reason=reason,
                         nodelist=["node1"], target="x86_64_v4",
                         conditions={"ab_side": side, "ab_pair": pair, "ab_position": 2 * pair + (side == "B")})


def test_a_crashed_side_drops_its_pair_and_says_so_the_others_are_kept():
    found = []
    for pair in range(6):
        found.append(_sample("A", pair, 3.0 + 0.01 * pair))
        if pair == 2:
            found.append(_sample("B", pair, None, "error", "illegal instruction (SIGILL) in rank 1"))
        else:
            found.append(_sample("B", pair, 3.0 + 0.01 * pair))
    records = judge.records(found)
    assert [(r["ab_side"], r["ab_pair"]) for r in records][:4] == [("A", 0), ("B", 0), ("A", 1), ("B", 1)]
    (verdict,), _ = judge.judge_run(records, db=Path("/nonexistent/history.sqlite"))
    assert verdict.pairs == 5 and verdict.dropped == 1
    assert "pair 2 B error: illegal instruction (SIGILL) in rank 1" in verdict.reason


def test_a_is_built_at_the_merge_base_with_its_own_toolchain(tmp_path):
    """A real merge-base build: a clone whose main has a toolchain runtime_env that the MR branch drops."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(repo)], check=True, timeout=300)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    # A target branch the clone's origin does not have, so the merge base is the local one.
    subprocess.run([*git, "checkout", "-q", "-B", "target"], check=True)
    tc = repo / "toolchains" / "2023b.yaml"
    data = yaml.safe_load(tc.read_text())
    data["mpi"]["runtime_env"] = {"OMPI_MCA_btl": "^vader"}
    tc.write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run([*git, "commit", "-qam", "target: toolchain with an MCA setting"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([*git, "checkout", "-q", "-b", "mr"], check=True)
    mirror = tmp_path / "mirror"
    _, sha256 = make_tarball(mirror)
    env = dict(os.environ, OSU_SOURCE_MIRROR=str(mirror), OSU_SHA256=sha256)
    code = (f"import sys; sys.path.insert(0, {str(repo)!r}); from pathlib import Path; "
            f"from mpiregress.run.ab import sides; "
            f"print(sides.find('auto', system='local', partition='batch', methods=['source'], branch='target', "
            f"store=None, work_root=Path({str(tmp_path / 'ab')!r})).to_dict())")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307  (our own dict repr)
    assert found["source"] == "merge-base" and found["commit"] == base, found
    built = manifest.find(Path(found["directory"]), "source")
    assert len(built) == 1 and built[0].env["env_vars"] == {"OMPI_MCA_btl": "^vader"}
    assert str(tmp_path / "ab") in built[0].prefix and os.access(built[0].binary("osu_latency"), os.X_OK)


def test_a_lost_node_exits_3_and_keeps_what_was_measured(tmp_path):
    """Pairs 0-1 measured, then Slurm lost node1: exit 3 (worth a retry), every sample in the reports."""
    from mpiregress.run import folder as run_folder
    from mpiregress.run import options
    from mpiregress.run.ab import looks as ab_looks

    lost = "node lost: Slurm says 'srun: error: Node failure on node1'"
    found = []
    for pair in range(5):
        for side in ("A", "B") if pair % 2 == 0 else ("B", "A"):
            if pair < 2:
                found.append(_sample(side, pair, 3.0 + 0.01 * pair))
            else:
                found.append(_sample(side, pair, None, "error", f"{lost} ({side} step of pair {pair}, exit 1)"))
    opts = options.RunOptions(system="local", report_dir=tmp_path / "r", methods=["source"], ab_against="auto")
    a = sides.FoundA(tmp_path / "a", "given", "A is the build in a (given with --ab-against)")
    with run_folder.RunFolder(opts.report_dir, "test") as folder:
        code = ab_looks.ab_verdict(found, opts, folder, {}, a)
    assert code == 3
    kept = json.loads((opts.report_dir / "ab-samples.json").read_text())
    assert len(kept) == 10 and sum(r["value"] is not None for r in kept) == 4
    summary = (opts.report_dir / "summary.md").read_text()
    assert "🔌 infrastructure: 1 infrastructure fault (exit 3)" in summary and "node lost" in summary
    assert "only 2 complete A/B pair(s) of 5" in summary
