#!/usr/bin/env bash
# Create .venv and install memoryd with its test and vector extras at the versions
# requirements-dev.lock pins (every hash checked); make sure Redis runs. Any failure stops the
# script with pip's own message and a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# The lock holds pip, setuptools and every dependency; memoryd itself is then installed
# editable from this tree without resolving or downloading anything else.
.venv/bin/python -m pip install --quiet --require-hashes -r requirements-dev.lock
.venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
.venv/bin/python -m pip check
.venv/bin/python -c "import daemon, aiosqlite, arq"
bash deploy/ensure-redis.sh
