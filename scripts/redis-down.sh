#!/usr/bin/env bash
# Stop the servers started by scripts/redis-up.sh (SHUTDOWN NOSAVE). Same
# env overrides as redis-up.sh. Safe to re-run.
#
#   scripts/redis-down.sh            stop them all and remove their work directory
#   scripts/redis-down.sh PORT...    stop only these, and remove only their
#                                    subdirectories (scripts/test.sh uses this
#                                    to leave servers it did not start alone)
set -euo pipefail

DIR=${TOOLGUARD_REDIS_DIR:-/tmp/toolguard-redis}
HOST=127.0.0.1
read -r -a CLUSTER_PORTS <<<"${TOOLGUARD_REDIS_CLUSTER_PORTS:-17001 17002 17003}"

ports=("$@")
if ((${#ports[@]} == 0)); then
	ports=("${TOOLGUARD_REDIS_PORT:-16379}" "${CLUSTER_PORTS[@]}")
fi
for port in "${ports[@]}"; do
	if command -v redis-cli >/dev/null 2>&1 && [ "$(redis-cli -h "$HOST" -p "$port" ping 2>/dev/null)" = "PONG" ]; then
		echo "redis-down: stopping redis on $HOST:$port" >&2
		redis-cli -h "$HOST" -p "$port" shutdown nosave >/dev/null 2>&1 || true
	fi
done
if (($# == 0)); then
	rm -rf "$DIR"
else
	for port in "${ports[@]}"; do rm -rf "${DIR:?}/$port"; done
fi
