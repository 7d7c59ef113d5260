#!/usr/bin/env bash
# Regenerate the lock files from pyproject.toml's version ranges, after a dependency changes:
#   requirements.lock      what memoryd runs: its dependencies, sqlite-vec and the build backend
#                          (deploy/setup.sh --runtime, the quickstart)
#   requirements-dev.lock  the same pins, plus the test and lint tools (deploy/setup.sh, CI)
# Both pin every package with its hashes. Needs .venv (bash deploy/setup.sh) and the index.
#
#   bash deploy/lock.sh              keep every pin that still satisfies pyproject.toml
#   bash deploy/lock.sh --upgrade    take the newest releases the ranges allow
set -euo pipefail
cd "$(dirname "$0")/.."
export CUSTOM_COMPILE_COMMAND="bash deploy/lock.sh"
compile=(.venv/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras
  --no-emit-index-url --no-emit-find-links "$@")
"${compile[@]}" --extra vec --build-deps-for editable -o requirements.lock pyproject.toml
"${compile[@]}" --extra vec --extra dev --build-deps-for editable -c requirements.lock \
  -o requirements-dev.lock pyproject.toml
