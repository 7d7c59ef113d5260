"""Table definitions, one module per domain. `migrations.py` applies them in a fixed order.

Each module exposes `DDL`: idempotent statements (IF NOT EXISTS), so a domain adds its tables
without touching another's file.
"""
