"""Alembic's migration scripts of the history schema (``versions/``), applied forward when a history is opened.

Each revision works on SQLite and PostgreSQL alike unless it says otherwise; the code's tables
(history_schema.py) match the newest one. A new revision: copy the newest file in versions/,
give it the next number as ``revision`` and the previous one as ``down_revision``.
"""
