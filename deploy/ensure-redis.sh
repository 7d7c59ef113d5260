#!/usr/bin/env bash
# Make sure a Redis answers on 127.0.0.1:6379: use a running one, else install and start one.
set -euo pipefail
if command -v redis-cli >/dev/null 2>&1 && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
mkdir -p /tmp/memoryd-redis
redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
  --dir /tmp/memoryd-redis --logfile /tmp/memoryd-redis/redis.log
for _ in $(seq 1 50); do
  if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then exit 0; fi
  sleep 0.1
done
echo "ensure-redis: Redis did not start; see /tmp/memoryd-redis/redis.log" >&2
exit 1
