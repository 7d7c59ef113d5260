"""`python -m bench --peer`: memoryd against OpenClaw 2026.9.6 on the same agent (issue 21).

OpenClaw runs from a cache directory outside the repository (installed with npm when missing),
offline, in its own state directory; the agent's sessions are written by OpenClaw's own
writers from a plan of ours; memoryd reads that agent database read-only. Never run in CI.
"""
