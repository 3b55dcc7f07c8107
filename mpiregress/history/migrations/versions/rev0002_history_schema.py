"""The history schema mpiregress-history/2: runs, their measurements, and the meta marker.

Files written before Alembic carry exactly this layout and are stamped with this revision
when first opened (history_migrate.py), so they migrate forward like any other.
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("meta", sa.Column("key", sa.Text, primary_key=True), sa.Column("value", sa.Text, nullable=False))
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("accepted", sa.Integer, nullable=False),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("imported_at", sa.Text, nullable=False),
        sa.Column("time", sa.Text, nullable=False),
        sa.Column("commit_sha", sa.Text, nullable=False),
        sa.Column("pipeline", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("system", sa.Text, nullable=False),
        sa.Column("partition", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("method", sa.Text, nullable=False),
        sa.Column("benchmark", sa.Text, nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("sample", sa.Integer, nullable=False),
        sa.Column("value", sa.Float(53)),
        sa.Column("unit", sa.Text, nullable=False),
        sa.Column("toolchain", sa.Text, nullable=False),
        sa.Column("commit_sha", sa.Text, nullable=False),
        sa.Column("pipeline", sa.Text, nullable=False),
        sa.Column("nodelist", sa.Text, nullable=False),
        sa.Column("time", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("conditions", sa.Text, nullable=False, server_default="{}"),
    )
    series = ["system", "partition", "method", "benchmark", "params", "metric"]
    op.create_index("measurements_series", "measurements", series)
    op.create_index("measurements_run", "measurements", ["run_id"])
    # A series' newest row without sorting its history: the toolchain check of every import asks it.
    op.create_index("measurements_series_time", "measurements", [*series, "time", "id"])
    op.bulk_insert(sa.table("meta", sa.column("key", sa.Text), sa.column("value", sa.Text)),
                   [{"key": "schema", "value": "mpiregress-history/2"}])
