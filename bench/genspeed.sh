#!/usr/bin/env bash
# genspeed.sh measures the generator side by side with `go vet`: the time
# to regenerate one package against `go vet` of the same package, and
# `streamgen ./...` over the repository against regenerating that one
# package. The commands run in turn, ROUNDS times (the order rotates each
# round), on a warm build cache; it prints every time and the medians.
#
#	bench/genspeed.sh [PACKAGE] [ROUNDS]
#
# PACKAGE defaults to ./examples/sessions (it imports typed, so its
# dependencies are most of the module); ROUNDS to 11. Run it from anywhere
# in the repository. The generator is built once, as `go tool` or
# `go run` would have it cached, and runs with -check: it does all the work
# of a run and writes nothing (a run with nothing to change writes nothing
# either).
# With BASELINE=path/to/streamgen (another build, such as an earlier
# commit's), that binary regenerating PACKAGE joins the rotation.
set -euo pipefail

cd "$(dirname "$0")/.."
pkg=${1:-./examples/sessions}
rounds=${2:-11}
bin=$(mktemp -d)/streamgen
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/streamgen

names=("go vet $pkg" "streamgen $pkg" "streamgen ./..." "baseline $pkg")
n=3
if [[ -n ${BASELINE:-} ]]; then n=4; fi
run() {
	case $1 in
	0) go vet "$pkg" ;;
	1) "$bin" -check "$pkg" ;;
	2) "$bin" -check ./... ;;
	3) "$BASELINE" -check "$pkg" 2>/dev/null || true ;; # its output may differ
	esac
}

# Warm the build cache and the file cache.
for ((i = 0; i < n; i++)); do run $i >/dev/null; done

declare -a times0 times1 times2 times3
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < n; k++)); do
		i=$(((r + k) % n))
		start=$(date +%s%N)
		run $i >/dev/null
		end=$(date +%s%N)
		ms=$(((end - start) / 1000000))
		eval "times$i+=($ms)"
	done
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for ((i = 0; i < n; i++)); do
	eval "t=(\"\${times$i[@]}\")"
	printf '%-32s median %5s ms   runs: %s\n' "${names[$i]}" "$(median "${t[@]}")" "${t[*]}"
done
m0=$(median "${times0[@]}")
m1=$(median "${times1[@]}")
m2=$(median "${times2[@]}")
awk -v a="$m1" -v b="$m0" -v p="$pkg" 'BEGIN {printf "streamgen %s / go vet %s: %.2fx (target <= 2)\n", p, p, a / b}'
awk -v a="$m2" -v b="$m1" -v p="$pkg" 'BEGIN {printf "streamgen ./... / streamgen %s: %.2fx (target < 1.5)\n", p, a / b}'
if ((n == 4)); then
	m3=$(median "${times3[@]}")
	awk -v a="$m3" -v b="$m1" 'BEGIN {printf "baseline / streamgen: %.1fx\n", a / b}'
fi
