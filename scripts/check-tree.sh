#!/usr/bin/env bash
# check-tree.sh: fails when git tracks a built binary, or a file over 1 MB
# that .ci/fixtures does not declare (one path a line; # starts a comment).
# A binary is a file that starts as an ELF, Mach-O, PE or WebAssembly file
# does, or one with the executable bit that is not a script (#!). Run from
# the repository root; .ci/run runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
declared=()
if [[ -f .ci/fixtures ]]; then
	while IFS= read -r line; do
		line=${line%%#*}
		line=${line//[[:space:]]/}
		[[ -n $line ]] && declared+=("$line")
	done <.ci/fixtures
fi
is_declared() {
	local f
	for f in "${declared[@]+"${declared[@]}"}"; do
		[[ $f == "$1" ]] && return 0
	done
	return 1
}

bad=0
while IFS= read -r -d '' entry; do
	mode=${entry%% *}
	path=${entry#*$'\t'}
	[[ -f $path ]] || continue # deleted in the work tree
	magic=$(head -c 4 "$path" | od -An -tx1 | tr -d ' \n')
	case $magic in
	7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | cafebabe | 0061736d | 4d5a*)
		echo "check-tree: $path is a built binary ($magic); build output is never tracked" >&2
		bad=1
		continue
		;;
	esac
	if [[ $mode == 100755 && $(head -c 2 "$path") != '#!' ]]; then
		echo "check-tree: $path is executable but not a script" >&2
		bad=1
	fi
	size=$(stat -c %s "$path")
	if ((size > limit)) && ! is_declared "$path"; then
		echo "check-tree: $path is $size bytes, over 1 MB, and not declared in .ci/fixtures" >&2
		bad=1
	fi
done < <(git ls-files -s -z) # "<mode> <object> <stage>\t<path>" each

if ((bad)); then
	exit 1
fi
echo "check-tree: $(git ls-files | wc -l) tracked files, no build output, none over 1 MB undeclared"
