#!/usr/bin/env bash
# Make sure a Redis answers at $MEMORYD_REDIS_URL (default redis://127.0.0.1:6379/0): use a
# running one; else, when it names this machine, install and start one on its port; a Redis on
# another machine is only checked (start it there).
set -euo pipefail
URL="${MEMORYD_REDIS_URL:-redis://127.0.0.1:6379/0}"

# HOST:PORT of the URL, without its userinfo, path or query (for messages and a local start).
rest="${URL#*://}"
rest="${rest##*@}"
rest="${rest%%/*}"
rest="${rest%%\?*}"
case "$rest" in
  \[*\]:*) HOST="${rest%%]*}"; HOST="${HOST#[}"; PORT="${rest##*]:}" ;;
  \[*\]) HOST="${rest#[}"; HOST="${HOST%]}"; PORT=6379 ;;
  *:*) HOST="${rest%%:*}"; PORT="${rest##*:}" ;;
  *) HOST="${rest:-127.0.0.1}"; PORT=6379 ;;
esac
WHERE="$HOST:$PORT"

# What redis-cli says to a PING at the URL (its password warning left out): PONG when usable.
reply() {
  command -v redis-cli >/dev/null 2>&1 || return 0
  redis-cli -u "$URL" ping 2>&1 | grep -v "^Warning: Using a password" || true
}
answers() { [ "$(reply)" = PONG ]; }

said=$(reply)
if [ "$said" = PONG ]; then
  exit 0
fi
if [ -n "$said" ] && ! printf '%s' "$said" | grep -q "Could not connect"; then
  # A Redis answers, but not to us (a wrong password, an ACL user): start nothing.
  echo "ensure-redis: the Redis at $WHERE refused MEMORYD_REDIS_URL: $(printf '%s' "$said" | head -n 1)" >&2
  exit 1
fi
case "$HOST" in
  127.0.0.1|localhost|::1) ;;
  *)
    echo "ensure-redis: no Redis answers at $WHERE (MEMORYD_REDIS_URL); start it there or point MEMORYD_REDIS_URL at one" >&2
    exit 1 ;;
esac
if ! command -v redis-server >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
DIR="/tmp/memoryd-redis-$PORT"
mkdir -p "$DIR"
redis-server --daemonize yes --bind "$HOST" --port "$PORT" --save "" --appendonly no \
  --dir "$DIR" --logfile "$DIR/redis.log"
for _ in $(seq 1 50); do
  if answers; then exit 0; fi
  sleep 0.1
done
echo "ensure-redis: Redis did not start at $WHERE; see $DIR/redis.log" >&2
exit 1
