"""The real ``.gitlab-ci.yml``'s A/B job under gitlab-ci-local: a red and a green toolchain MR.

Where ``benchmarks/ab_local_mrs.py`` calls ``mpiregress run --ab-against`` itself, this runs the
pipeline as GitLab would for a merge request (``CI_PIPELINE_SOURCE=merge_request_event``):
``gitlab-ci-local --needs ab:local:batch`` runs the lint jobs, the MR's build job (B) and the
``ab:local:batch`` job, whose ``ci/jobs/ab.sh`` finds no A in the manifest store and builds it
at the merge base with main, then runs every point-to-point series A B B A ... on the same nodes.

* **red MR**: ``mpi.runtime_env: {OMPI_MCA_btl: '^vader'}`` in the toolchain file (same-node ranks
  lose shared memory): the job must fail (exit 1) with "toolchain" as the cause of the same-node
  series;
* **green MR**: a comment in the toolchain file: the job must pass.

The repository is this working tree committed as ``main`` plus the MR commit (the suite's
``tests/test_gitlab_ci.py`` helpers). The local Slurm is the project's own
(``var/local-cluster``, started when down). OSU: ``$OSU_SOURCE_MIRROR`` with ``$OSU_SHA256``
(real OSU 7.2 for evidence). About 5 minutes per MR on a 2-core VM: not part of the suite,
which checks the A/B job's place in the pipeline (``test_gitlab_ci.py``) and its check for real
(``test_ab_run.py``).

2026-11-24, this VM, real OSU 7.2 (``yqin/osu-micro-benchmarks`` release/7.2, sha256 a5dd364d…):
red: ``ab:local:batch`` FAIL (exit 1) in 283 s for the pipeline; same_numa latency +270.0%
(+151.1% … +445.1%), bandwidth +69.1%, both "toolchain: … worse in B (the MR) than in A (the
target branch) on the same nodes (node1)"; cross_node latency and bandwidth "inconclusive"
(5 pairs, Holm p 0.62), not gating. green: ``ab:local:batch`` PASS (exit 0) in 325 s; same_numa
latency -6.9% (-25.8% … +16.9%), bandwidth -1.9%, cross_node bandwidth -10.3%; cross_node latency
"inconclusive" (+19.1%, -25.0% … +88.9%, Holm p 0.99). A was built at the merge base both times.
This script itself, right after: red FAIL in 282 s (same_numa latency +208.0%, bandwidth +64.5%,
cause toolchain, with "the noise probe flagged node1 …, but A ran on it too"), green PASS in
214 s; "2 of 2 MRs judged as wanted".

    OSU_SOURCE_MIRROR=DIR OSU_SHA256=SUM python benchmarks/ab_pipeline.py [--work /tmp/ab-pipeline]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from test_gitlab_ci import job_verdicts, touch_toolchain  # noqa: E402
from verdict_pipeline import mr_pipeline, prepare  # noqa: E402


def red(repo: Path) -> None:
    path = repo / "toolchains" / "2023b.yaml"
    data = yaml.safe_load(path.read_text())
    data["mpi"]["runtime_env"] = {"OMPI_MCA_btl": "^vader"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def one_mr(name: str, change, work: Path) -> tuple[int, dict, Path]:
    done, repo, _ = mr_pipeline(name, change, work, "ab:local:batch", "--no-artifacts-to-source")
    return done.returncode, job_verdicts(done.stdout), repo / ".gitlab-ci-local" / "output" / "abOglocalOgbatch.log"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/ab-pipeline"))
    opts = parser.parse_args()
    prepare(opts.work)
    right = 0
    for name, change, wanted in (("red", red, "FAIL"), ("green", touch_toolchain, "PASS")):
        started = time.time()
        code, verdicts, log = one_mr(name, change, opts.work)
        got = verdicts.get("ab:local:batch", "did not run")
        right += got == wanted
        print(f"\n== {name} MR: ab:local:batch {got} (wanted {wanted}), gitlab-ci-local exit {code}, "
              f"{time.time() - started:.0f} s; jobs {verdicts}")
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        start = next((i for i, line in enumerate(lines) if line.startswith(("regression", "pass", "inconclusive",
                                                                            "error"))), len(lines))
        print("\n".join(line for line in lines[start:] if not line.startswith("skip")
                        and "is not available on" not in line))
    print(f"\n{right} of 2 MRs judged as wanted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
