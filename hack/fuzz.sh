#!/usr/bin/env bash
# Fuzzes every fuzz target of fleet-role in turn, each for the given time:
#
#   hack/fuzz.sh            # 10s a target
#   hack/fuzz.sh 30s        # 30s a target
#   hack/fuzz.sh 10m ./internal/entry   # one package, longer
#
# The targets are found with `go test -list '^Fuzz'`, so a new one is fuzzed
# without editing this script. Ordinary `go test` (and CI) runs only the
# seeds: each target's f.Add inputs and testdata/fuzz/FuzzXxx/ files.
#
# A target that fails (a crash, a panic, a broken property) leaves its input
# in the package's testdata/fuzz/FuzzXxx/ directory, where it becomes a seed
# that every later `go test` runs; the script names the file and the command
# that re-runs it, goes on with the other targets, and exits 1 at the end.
# Interesting inputs that pass stay in Go's cache ($(go env GOCACHE)/fuzz),
# so a longer run later starts from where this one stopped.
set -euo pipefail
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$(dirname "$0")/.."

fuzztime="${1:-10s}"
shift || true
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(./...)

# go test's own timeout must outlast the fuzzing: the fuzz time plus ten
# minutes for building the instrumented binary and running the seeds.
timeout=0
if [[ "$fuzztime" =~ ^([0-9]+)([smh])$ ]]; then
	n=${BASH_REMATCH[1]}
	case ${BASH_REMATCH[2]} in s) secs=$n ;; m) secs=$((n * 60)) ;; h) secs=$((n * 3600)) ;; esac
	timeout="$((secs + 600))s"
fi

# Only packages with a test file declaring a fuzz target are listed, so that
# go test need not build every package's tests; `go test -list` then names
# the targets. It prints a package's matching names, then "ok <package>".
candidates=()
while IFS='|' read -r dir pkg; do
	if grep -qs '^func Fuzz' "$dir"/*_test.go; then candidates+=("$pkg"); fi
done < <(go list -f '{{.Dir}}|{{.ImportPath}}' "${packages[@]}")
if [ ${#candidates[@]} -eq 0 ]; then
	echo "no fuzz targets in ${packages[*]}" >&2
	exit 1
fi
if ! listing=$(go test -list '^Fuzz' "${candidates[@]}" 2>&1); then
	echo "$listing" >&2
	exit 1
fi
targets=()
names=()
while read -r line; do
	case "$line" in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in "${names[@]}"; do targets+=("$pkg $n"); done
		names=()
		;;
	esac
done <<<"$listing"

if [ ${#targets[@]} -eq 0 ]; then
	echo "no fuzz targets in ${packages[*]}" >&2
	exit 1
fi
echo "fuzzing ${#targets[@]} targets for $fuzztime each"

failed=()
summary=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	printf '\n== %s %s (%s)\n' "$pkg" "$name" "$(date +%H:%M:%S)"
	log=$(mktemp)
	if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -timeout "$timeout" "$pkg" >"$log" 2>&1; then
		result=ok
	else
		result=FAILED
		failed+=("$pkg $name")
		cat "$log"
		dir=$(go list -f '{{.Dir}}' "$pkg")
		saved=$(grep -o 'Failing input written to [^ ]*' "$log" | awk '{print $NF}' || true)
		if [ -n "$saved" ]; then
			echo "crasher saved: $dir/$saved"
			echo "re-run it: go test -run '$name/$(basename "$saved")' $pkg"
		fi
	fi
	# The fuzzer's last progress line: "fuzz: elapsed: 20s, execs: 123456 (6172/sec), new interesting: ..."
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
	tail -1 "$log"
	summary+=("$(printf '%-8s %-12s %-50s %s' "$result" "${execs:-?}" "$pkg" "$name")")
	rm -f "$log"
done

printf '\n%-8s %-12s %-50s %s\n' result execs package target
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	printf '\n%d of %d targets failed:\n' "${#failed[@]}" "${#targets[@]}"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
