#!/usr/bin/env bash
# Count the instructions Redis spends per dispatch (read, fresh write,
# replay): starts a redis-server under valgrind's callgrind on 127.0.0.1:
# ${TOOLGUARD_INSTR_PORT:-16999}, runs internal/rediscost against it, and
# stops it. Needs valgrind and redis-server (Debian: valgrind, redis-server).
# Arguments go to rediscost (-n dispatches of each kind).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${TOOLGUARD_INSTR_PORT:-16999}
DIR=$(mktemp -d)
for cmd in valgrind callgrind_control redis-server redis-cli; do
	command -v "$cmd" >/dev/null || { echo "redis-instr: $cmd not found (apt-get install valgrind redis-server)" >&2; exit 1; }
done
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out" \
	redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" >"$DIR/valgrind.log" 2>&1 &
VG=$!
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$VG" 2>/dev/null; wait "$VG" 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do
	redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
	sleep 0.2
done
redis-cli -p "$PORT" ping >/dev/null
echo "redis-instr: $(redis-server --version | cut -d' ' -f1-3) under callgrind on port $PORT" >&2
go run ./internal/rediscost -addr "127.0.0.1:$PORT" -out "$DIR/cg.out" "$@"
