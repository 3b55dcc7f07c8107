"""The seed study's CSV through the product's report: what its top line and JUnit say.

Reads shared/data/ulhpc-2025-05-osu-results.csv (mpiregress.model.seed_data), writes it as a
results.json (one result per study partition of each system, as benchmarks/seed_study.py does),
runs `mpiregress report --min-samples 1 --gate` on it with no history, and prints the first line of
summary.md, the JUnit counts and the findings of each state.

Usage: python benchmarks/seed_verdict.py [CSV]
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from seed_study import DEFAULT_CSV, study_results  # noqa: E402

from mpiregress.model import seed_data  # noqa: E402
from mpiregress.model.results import dump  # noqa: E402


def main(argv: list[str]) -> int:
    csv = Path(argv[0]) if argv else DEFAULT_CSV
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "results.json").write_text(dump(study_results(seed_data.read(csv))))
        done = subprocess.run([sys.executable, "-m", "mpiregress", "report", str(work / "results.json"),
                               "--min-samples", "1", "--db", str(work / "none.sqlite"), "--out-dir", str(work / "out"),
                               "--gate"], capture_output=True, text=True)
        print(f"mpiregress report exit {done.returncode}")
        summary = (work / "out" / "summary.md").read_text().splitlines()
        print(f"summary.md first line: {summary[0]}")
        suite = ET.parse(work / "out" / "junit.xml").getroot().find("testsuite")
        assert suite is not None
        print(f"JUnit: suite {suite.get('name')!r}: tests {suite.get('tests')}, failures {suite.get('failures')}, "
              f"errors {suite.get('errors')}, skipped {suite.get('skipped')}")
        for case in suite.findall("testcase"):
            skipped = case.find("skipped")
            if skipped is not None:
                print(f"  skipped: {skipped.get('message')[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
