#!/usr/bin/env bash
# Create .venv and install memoryd with its test and vector extras; make sure Redis runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c "import daemon, aiosqlite, arq" 
bash deploy/ensure-redis.sh
