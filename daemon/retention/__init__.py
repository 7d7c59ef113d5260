"""Scoped retention, legal holds and verified erasure (seed 001, DESIGN §5).

Entry points live in `memoryd.retention.api`.
"""
