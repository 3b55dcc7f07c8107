"""Where the read-only shared material is (../shared beside the checkout, as in CI)."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
OSU_OUTPUTS = SHARED / "osu-7.2-outputs"
STUDY_CSV = SHARED / "data" / "ulhpc-2025-05-osu-results.csv"


def require(path: Path) -> Path:
    """Fail (not skip) when the shared material is missing: the tests depend on it."""
    assert path.exists(), f"{path} is missing: CI clones the repo with shared/ beside it"
    return path
