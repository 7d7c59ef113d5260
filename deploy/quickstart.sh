#!/usr/bin/env bash
# From a fresh clone to a running daemon, in the foreground:
#   1. deploy/setup.sh: create .venv, install memoryd; make sure Redis answers at
#      $MEMORYD_REDIS_URL (default redis://127.0.0.1:6379/0; deploy/ensure-redis.sh)
#   2. without a config (argument or $MEMORYD_CONFIG): write the example session store with
#      `memoryd demo init` into $MEMORYD_DEMO_DIR (default ~/.local/share/memoryd/demo), once
#   3. `memoryd run` on that config (Ctrl-C stops it cleanly); memoryd, too, uses
#      $MEMORYD_REDIS_URL over the config's redis_url
#
#   bash deploy/quickstart.sh [CONFIG.toml] [--skip-setup]
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG="${MEMORYD_CONFIG:-}"
SKIP_SETUP=0
for arg in "$@"; do
  case "$arg" in
    --skip-setup) SKIP_SETUP=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "quickstart: unknown option $arg" >&2; exit 2 ;;
    *) CONFIG="$arg" ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }

# Not exported: memoryd would take it over the redis_url of a config given here.
REDIS_URL="${MEMORYD_REDIS_URL:-redis://127.0.0.1:6379/0}"
if [ "$SKIP_SETUP" = 0 ]; then
  step "setting up: .venv, memoryd (the runtime lock), Redis at $REDIS_URL"
  MEMORYD_REDIS_URL="$REDIS_URL" bash deploy/setup.sh --runtime
else
  MEMORYD_REDIS_URL="$REDIS_URL" bash deploy/ensure-redis.sh
fi
MEMORYD="$PWD/.venv/bin/memoryd"

if [ -z "$CONFIG" ]; then
  DEMO_DIR="${MEMORYD_DEMO_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/memoryd/demo}"
  CONFIG="$DEMO_DIR/memoryd.toml"
  if [ -f "$CONFIG" ]; then
    step "using the example store already in $DEMO_DIR"
  else
    step "no config given: writing the example session store to $DEMO_DIR"
    "$MEMORYD" demo init "$DEMO_DIR" --redis-url "$REDIS_URL"
  fi
fi

# `memoryd run` itself refuses a bad config, an unusable state_dir or an unreachable Redis
# with one line naming the key, directory or URL (exit 2 or 1).
step "starting memoryd with $CONFIG (Ctrl-C stops it); in another terminal try:"
cat <<EOF
    export MEMORYD_CONFIG=$CONFIG
    $MEMORYD status
    $MEMORYD checkpoints --agent main
    $MEMORYD search --agent main "lighthouse launch"
EOF
echo
exec "$MEMORYD" --config "$CONFIG" run
