#!/usr/bin/env bash
# Writes a go.work at the repository root naming the core module and every
# integration module (integrations/*/go.mod), for working on both at once.
# It is not committed (.gitignore): in a workspace the core module's build
# list would include the frameworks, and each integration already builds
# alone through its replace of the core module to ../.. .
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f go.work go.work.sum
go work init .
for mod in $(find integrations -mindepth 2 -maxdepth 2 -name go.mod -printf '%h\n' 2>/dev/null | sort); do
	go work use "./$mod"
done
cat go.work
