"""Stored change points (the weekly scan's findings) and, on PostgreSQL, the views Grafana charts.

history_points: one row per run of a series (median of its samples), time as timestamptz.
history_band: the accepted points with a band from the 10 accepted runs before each
(mean +- 2 standard deviations): what "usual" looked like when that run arrived.
history_changes: the stored change points, as Grafana annotations (time, text).
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SERIES = "system || '/' || partition || ' ' || method || ' ' || benchmark || ' ' || params || ' ' || metric"


def upgrade() -> None:
    op.create_table(
        "change_points",
        *(sa.Column(name, sa.Text, primary_key=True)
          for name in ("system", "partition", "method", "benchmark", "params", "metric", "run_id")),
        sa.Column("time", sa.Text, nullable=False),
        sa.Column("before", sa.Float(53), nullable=False),
        sa.Column("after", sa.Float(53), nullable=False),
        sa.Column("change", sa.Float(53), nullable=False),
        sa.Column("worse", sa.Integer, nullable=False),
        sa.Column("shared", sa.Integer, nullable=False),
        sa.Column("commits", sa.Text, nullable=False),
        sa.Column("sentence", sa.Text, nullable=False),
        sa.Column("found_at", sa.Text, nullable=False),
    )
    if op.get_bind().dialect.name != "postgresql":
        return          # Grafana's built-in SQL data sources are server databases; SQLite keeps the tables only
    op.execute("""
        CREATE VIEW history_points AS
        SELECT m.system, m.partition, m.method, m.benchmark, m.params, m.metric, m.unit,
               m.system || '/' || m.partition || ' ' || m.method || ' ' || m.benchmark || ' ' || m.params
                 || ' ' || m.metric AS series,
               m.run_id, r.kind, (r.accepted = 1) AS accepted, MIN(m.toolchain) AS toolchain,
               MIN(m.commit_sha) AS commit_sha, MIN(m.pipeline) AS pipeline,
               CAST(MAX(m.time) AS timestamptz) AS time,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY m.value) AS value,
               COUNT(*) AS samples
        FROM measurements m JOIN runs r ON r.run_id = m.run_id
        WHERE m.value IS NOT NULL AND m.status IN ('pass', 'fail')
        GROUP BY m.system, m.partition, m.method, m.benchmark, m.params, m.metric, m.unit, m.run_id, r.kind,
                 r.accepted""")
    op.execute("""
        CREATE VIEW history_band AS
        SELECT p.*, AVG(p.value) OVER w AS band_center,
               AVG(p.value) OVER w - 2 * STDDEV_SAMP(p.value) OVER w AS band_low,
               AVG(p.value) OVER w + 2 * STDDEV_SAMP(p.value) OVER w AS band_high,
               COUNT(*) OVER w AS band_runs
        FROM history_points p
        WHERE p.accepted
        WINDOW w AS (PARTITION BY p.system, p.partition, p.method, p.benchmark, p.params, p.metric
                     ORDER BY p.time ROWS BETWEEN 10 PRECEDING AND 1 PRECEDING)""")
    op.execute(f"""
        CREATE VIEW history_changes AS
        SELECT CAST(c.time AS timestamptz) AS time, {SERIES} AS series, c.system, c.partition, c.method,
               c.benchmark, c.params, c.metric, c.run_id, c.before, c.after, c.change, (c.worse = 1) AS worse,
               c.shared, c.commits, c.sentence AS text
        FROM change_points c""")
