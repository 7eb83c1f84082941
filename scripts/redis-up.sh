#!/usr/bin/env bash
# Start throwaway Redis servers for toolguard's real-Redis tests:
#   - a standalone redis-server on 127.0.0.1:${TOOLGUARD_REDIS_PORT:-16379}
#   - a 3-master Redis Cluster on 127.0.0.1:17001-17003
#     (override with TOOLGUARD_REDIS_CLUSTER_PORTS="p1 p2 p3")
# Everything binds to loopback only and has persistence disabled. State
# (config, logs, pid files) lives under ${TOOLGUARD_REDIS_DIR:-/tmp/toolguard-redis}.
#
# Idempotent: servers that are already up and healthy are reused; a broken or
# half-formed cluster is shut down, its nodes-*.conf wiped, and rebuilt.
#
# On success, stdout carries exactly two NAME=value lines to export; all
# progress output goes to stderr. For example:
#   while IFS= read -r kv; do export "$kv"; done < <(scripts/redis-up.sh)
# Stop everything with scripts/redis-down.sh. scripts/test.sh does all of
# it (start, export, go test, stop) in one command.
set -euo pipefail

DIR=${TOOLGUARD_REDIS_DIR:-/tmp/toolguard-redis}
HOST=127.0.0.1
STANDALONE_PORT=${TOOLGUARD_REDIS_PORT:-16379}
read -r -a CLUSTER_PORTS <<<"${TOOLGUARD_REDIS_CLUSTER_PORTS:-17001 17002 17003}"
WAIT_SECS=${TOOLGUARD_REDIS_WAIT_SECS:-30}

log() { echo "redis-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- 1. Make sure redis-server and redis-cli exist (Debian packages). ---------
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	command -v apt-get >/dev/null 2>&1 || die "redis-server/redis-cli not found and apt-get not available; install redis-server and redis-cli (redis-tools) yourself"
	log "redis-server/redis-cli not found: INSTALLING the Debian packages redis-server and redis-tools"
	log "with apt-get (as root or with sudo -n); install them yourself beforehand to avoid this"
	SUDO=
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to apt-get install redis-server"
		SUDO="sudo -n"
	fi
	# Without systemd (containers), the package's service start may fail;
	# we never use that service, so tolerate it as long as the binaries land.
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		redis-server redis-tools >&2 || log "apt-get install reported an error; checking binaries anyway"
	command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after apt-get install"
	command -v redis-cli >/dev/null 2>&1 || die "redis-cli still missing after apt-get install"
fi

cli() { local port=$1; shift; redis-cli -h "$HOST" -p "$port" "$@"; }
is_up() { [ "$(cli "$1" ping 2>/dev/null)" = "PONG" ]; }

# stop PORT: shut a node down without saving and wait for the port to free up.
stop() {
	local port=$1 i
	is_up "$port" || return 0
	cli "$port" shutdown nosave >/dev/null 2>&1 || true
	for ((i = 0; i < 50; i++)); do is_up "$port" || return 0; sleep 0.1; done
	die "redis on port $port did not shut down"
}

# start PORT [extra redis-server args...]: daemonize a server in $DIR/PORT.
start() {
	local port=$1 i; shift
	local d="$DIR/$port"
	mkdir -p "$d"
	rm -f "$d/redis.log"
	redis-server --bind "$HOST" --port "$port" --dir "$d" \
		--save "" --appendonly no \
		--daemonize yes --pidfile "$d/redis.pid" --logfile "$d/redis.log" \
		"$@" >&2
	for ((i = 0; i < 100; i++)); do is_up "$port" && return 0; sleep 0.1; done
	log "redis on port $port did not come up; log tail:"
	tail -n 20 "$d/redis.log" >&2 2>/dev/null || true
	die "could not start redis-server on port $port (port taken by something else?)"
}

# --- 2. Standalone server. ------------------------------------------------------
if is_up "$STANDALONE_PORT" && [ "$(cli "$STANDALONE_PORT" info cluster | tr -d '\r' | grep -c '^cluster_enabled:0$')" = 1 ]; then
	log "standalone redis already up on $HOST:$STANDALONE_PORT (reusing)"
else
	stop "$STANDALONE_PORT"
	log "starting standalone redis on $HOST:$STANDALONE_PORT"
	start "$STANDALONE_PORT"
fi

# --- 3. Cluster. ----------------------------------------------------------------
# healthy: every node is up and sees an ok cluster of exactly our N masters with
# all slots assigned.
cluster_healthy() {
	local port info
	for port in "${CLUSTER_PORTS[@]}"; do
		info=$(cli "$port" cluster info 2>/dev/null | tr -d '\r') || return 1
		grep -qx 'cluster_state:ok' <<<"$info" || return 1
		grep -qx 'cluster_slots_assigned:16384' <<<"$info" || return 1
		grep -qx "cluster_known_nodes:${#CLUSTER_PORTS[@]}" <<<"$info" || return 1
		grep -qx "cluster_size:${#CLUSTER_PORTS[@]}" <<<"$info" || return 1
	done
}

if cluster_healthy; then
	log "redis cluster already up on ports ${CLUSTER_PORTS[*]} (reusing)"
else
	# Rebuild from scratch: stop whatever is there and drop stale cluster state,
	# otherwise old nodes-PORT.conf files make "cluster create" refuse the nodes.
	for port in "${CLUSTER_PORTS[@]}"; do
		stop "$port"
		rm -f "$DIR/$port/nodes-$port.conf"
	done
	nodes=()
	for port in "${CLUSTER_PORTS[@]}"; do
		log "starting cluster node on $HOST:$port"
		start "$port" --cluster-enabled yes --cluster-config-file "nodes-$port.conf" \
			--cluster-node-timeout 2000
		nodes+=("$HOST:$port")
	done
	log "creating cluster: ${nodes[*]}"
	# redis-cli colours its --cluster output even when it is not a terminal;
	# strip the escape codes so logs (CI's too) stay plain text.
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes </dev/null 2>&1 \
		| sed 's/\x1b\[[0-9;]*m//g' >&2 \
		|| die "redis-cli --cluster create failed"
	deadline=$((SECONDS + WAIT_SECS))
	until cluster_healthy; do
		if ((SECONDS >= deadline)); then
			cli "${CLUSTER_PORTS[0]}" cluster info >&2 || true
			die "cluster did not reach cluster_state:ok within ${WAIT_SECS}s"
		fi
		sleep 0.2
	done
	log "cluster is ok"
fi

# --- 4. Tell the caller what to export. -------------------------------------------
addrs=()
for port in "${CLUSTER_PORTS[@]}"; do addrs+=("$HOST:$port"); done
echo "TOOLGUARD_REDIS_URL=redis://$HOST:$STANDALONE_PORT/0"
(IFS=,; echo "TOOLGUARD_REDIS_CLUSTER=${addrs[*]}")
