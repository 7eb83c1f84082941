#!/usr/bin/env bash
# Stop the servers started by scripts/redis-up.sh (SHUTDOWN NOSAVE) and remove
# their work directory. Same env overrides as redis-up.sh. Safe to re-run.
set -euo pipefail

DIR=${TOOLGUARD_REDIS_DIR:-/tmp/toolguard-redis}
HOST=127.0.0.1
read -r -a CLUSTER_PORTS <<<"${TOOLGUARD_REDIS_CLUSTER_PORTS:-17001 17002 17003}"

for port in "${TOOLGUARD_REDIS_PORT:-16379}" "${CLUSTER_PORTS[@]}"; do
	if [ "$(redis-cli -h "$HOST" -p "$port" ping 2>/dev/null)" = "PONG" ]; then
		echo "redis-down: stopping redis on $HOST:$port" >&2
		redis-cli -h "$HOST" -p "$port" shutdown nosave >/dev/null 2>&1 || true
	fi
done
rm -rf "$DIR"
