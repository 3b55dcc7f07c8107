"""Baselines as data: the shipped files validate, and every malformed file names the file and the key."""
import pytest
import yaml
from shared import REPO, STUDY_CSV, require

from mpiregress.errors import InputError
from mpiregress.model import baselines, seed_data

GOOD = """
schema: mpiregress-baselines/1
system: local
toolchain: "2023b"
provenance:
  dev: {description: measured here, runs: 5, collected: 2026-11-22, pipelines: []}
references:
  batch:
    source:
      same_numa:
        latency: {value: 3.0, tolerance: 0.2, unit: us, provenance: dev}
        bandwidth: {value: 9000, tolerance: 0.1, unit: MB/s, provenance: dev}
"""


def parse(text: str, path: str = "baselines/local.yaml") -> baselines.Baselines:
    return baselines.parse(yaml.safe_load(text), path)


@pytest.mark.parametrize("system", ["iris", "aion", "local"])
def test_shipped_baselines_validate(system):
    refs = baselines.for_system(system, REPO / "baselines")
    assert refs.system == system and refs.references
    for ref in refs.references.values():
        assert ref.provenance in refs.provenance


def test_iris_and_aion_are_seeded_from_the_study_with_provenance():
    rows = seed_data.read(require(STUDY_CSV))
    for system in ("iris", "aion"):
        refs = baselines.for_system(system, REPO / "baselines")
        assert "shared/data/ulhpc-2025-05-osu-results.csv" in refs.provenance["ulhpc-2025-05"]["description"]
        for row in (r for r in rows if r.system == system):
            for partition in seed_data.STUDY_PARTITIONS[system]:
                ref = refs.lookup_pt2pt(partition, row.method, row.placement, row.metric)
                assert ref is not None and ref.value == pytest.approx(row.value)


def test_bands_are_one_sided_in_the_direction_that_hurts():
    refs = parse(GOOD)
    latency = refs.lookup_pt2pt("batch", "source", "same_numa", "latency")
    bandwidth = refs.lookup_pt2pt("batch", "source", "same_numa", "bandwidth")
    assert latency.reframe() == (3.0, None, 0.2, "us")
    assert bandwidth.reframe() == (9000.0, -0.1, None, "MB/s")
    assert latency.limit() == pytest.approx(3.6) and bandwidth.limit() == pytest.approx(8100)


@pytest.mark.parametrize("change, key", [
    (("tolerance: 0.2", "tolerance: fast"), "references.batch.source.same_numa.latency.tolerance"),
    (("tolerance: 0.1", "tolerance: 1.5"), "references.batch.source.same_numa.bandwidth.tolerance"),
    (("value: 3.0", "value: -1"), "references.batch.source.same_numa.latency.value"),
    (("unit: us", "unit: ms"), "references.batch.source.same_numa.latency.unit"),
    (("provenance: dev}\n        bandwidth", "provenance: nowhere}\n        bandwidth"),
     "references.batch.source.same_numa.latency.provenance"),
    (("same_numa:", "same_rack:"), "references.batch.source.same_rack"),
    (("    source:", "    conda:"), "references.batch.conda"),
    (("runs: 5", "runs: 0"), "provenance.dev.runs"),
    (("description: measured here, ", ""), "provenance.dev.description"),
    (("system: local", "system: jupiter"), "system"),
    (("schema: mpiregress-baselines/1", "schema: 2"), "schema"),
])
def test_malformed_entries_name_the_file_and_the_key(change, key):
    with pytest.raises(InputError) as err:
        parse(GOOD.replace(*change))
    assert "baselines/local.yaml" in str(err.value)
    assert f"{key}:" in str(err.value)


def test_missing_file_and_bad_yaml_are_named(tmp_path):
    with pytest.raises(InputError, match=f"baselines file {tmp_path}/local.yaml does not exist"):
        baselines.for_system("local", tmp_path)
    (tmp_path / "local.yaml").write_text("references: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        baselines.for_system("local", tmp_path)


def test_a_file_for_another_system_is_refused(tmp_path):
    (tmp_path / "iris.yaml").write_text(GOOD)
    with pytest.raises(InputError, match="system: is 'local' but the file is for 'iris'"):
        baselines.for_system("iris", tmp_path)
