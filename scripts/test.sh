#!/usr/bin/env bash
# Run every test against real Redis, in one command:
#
#   scripts/test.sh [go test flags and packages]   # default: ./...
#
# 1. starts a standalone Redis and a 3-master Redis Cluster on loopback
#    (scripts/redis-up.sh; it installs redis-server with apt-get if it is
#    missing, and says so first);
# 2. exports TOOLGUARD_REDIS_URL and TOOLGUARD_REDIS_CLUSTER, the variables
#    the tests read (without them the real-Redis tests skip);
# 3. runs go test -race -count=1 (without -race, saying so, when there is
#    no C compiler for cgo) and prints a line per package, the output of
#    every failed test, and the count of passed, failed and skipped tests
#    with the reasons for the skips;
# 4. on exit, stops the servers it started. A server that was already
#    listening on one of the ports before it ran is left running: it is not
#    ours to stop.
#
# Ports and directory are those of redis-up.sh, overridable the same way:
#   TOOLGUARD_REDIS_PORT (16379), TOOLGUARD_REDIS_CLUSTER_PORTS ("17001 17002 17003"),
#   TOOLGUARD_REDIS_DIR (/tmp/toolguard-redis).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "test.sh: $*" >&2; }

PORT=${TOOLGUARD_REDIS_PORT:-16379}
read -r -a CLUSTER_PORTS <<<"${TOOLGUARD_REDIS_CLUSTER_PORTS:-17001 17002 17003}"

# listening PORT: something accepts connections on 127.0.0.1:PORT. Plain
# bash, so it works before redis-cli is installed.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Which ports were taken before we started anything.
ours=()
theirs=()
for port in "$PORT" "${CLUSTER_PORTS[@]}"; do
	if listening "$port"; then theirs+=("$port"); else ours+=("$port"); fi
done
if ((${#theirs[@]} > 0)); then
	log "already listening before this run, will be left running: ports ${theirs[*]}"
fi

stop_ours() {
	if ((${#theirs[@]} == 0)); then
		bash scripts/redis-down.sh
	elif ((${#ours[@]} > 0)); then
		bash scripts/redis-down.sh "${ours[@]}"
	fi
}
trap stop_ours EXIT

redis_env=$(bash scripts/redis-up.sh)
while IFS= read -r kv; do
	export "${kv?}"
done <<<"$redis_env"
log "TOOLGUARD_REDIS_URL=$TOOLGUARD_REDIS_URL"
log "TOOLGUARD_REDIS_CLUSTER=$TOOLGUARD_REDIS_CLUSTER"

race=(-race)
if [ "$(go env CGO_ENABLED)" != 1 ] || ! command -v "$(go env CC)" >/dev/null 2>&1; then
	log "no C compiler for cgo ($(go env CC)): running the tests WITHOUT -race"
	race=()
fi

args=("$@")
if ((${#args[@]} == 0)); then args=(./...); fi

# go test's own status and the summary's: either failing fails the run.
set +e
go test "${race[@]}" -count=1 -json "${args[@]}" | go run scripts/testsummary.go
status=("${PIPESTATUS[@]}")
set -e
if [ "${status[0]}" != 0 ] || [ "${status[1]}" != 0 ]; then
	log "FAILED"
	exit 1
fi
log "OK"
