#!/usr/bin/env bash
# Create a virtualenv and install memoryd at the versions a lock pins (every hash checked); make
# sure Redis answers at $MEMORYD_REDIS_URL (deploy/ensure-redis.sh). Any failure stops the script
# with pip's own message and a non-zero exit.
#
#   bash deploy/setup.sh             requirements-dev.lock: memoryd, sqlite-vec, the test and lint tools
#   bash deploy/setup.sh --runtime   requirements.lock: what memoryd runs, nothing else (the quickstart)
#
# PYTHON picks the interpreter (default python3; any Python the package admits, 3.11.0 on);
# VENV the directory (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements-dev.lock
for arg in "$@"; do
  case "$arg" in
    --runtime) LOCK=requirements.lock ;;
    *) echo "setup: unknown argument $arg" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# The lock holds pip, setuptools and every dependency; memoryd itself is then installed
# editable from this tree without resolving or downloading anything else.
"$VENV/bin/python" -m pip install --quiet --require-hashes -r "$LOCK"
# Strict editable mode: a tree of links named as the package imports (`memoryd`), which mypy
# reads too; a module added or removed later needs this script run again.
"$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict
"$VENV/bin/python" -m pip check
"$VENV/bin/python" -c "import memoryd, aiosqlite, arq"
bash deploy/ensure-redis.sh
