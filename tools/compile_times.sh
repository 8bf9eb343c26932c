#!/bin/sh
# Compile-time report: the wall time and peak memory of compiling each contract program and each
# example at -O2 (one translation unit at a time, with the flags CMake gives it), then the wall
# time of building the whole suite from scratch.
#
#   tools/compile_times.sh [build dir]        (default build/compile-times; CXX picks the compiler)
#
# The section 1 contract program must compile in under SECTION1_LIMIT seconds (10 by default).
set -eu

build=${1:-build/compile-times}
jobs=${JOBS:-$(nproc)}
limit=${SECTION1_LIMIT:-10}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

rm -rf "$build"
cmake -S "$source_dir" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${CXX:+-DCMAKE_CXX_COMPILER="$CXX"} >/dev/null

# Each translation unit's command, from compile_commands.json: the contract programs' and the
# examples' sources (not the fail_ contract programs, which must not compile).
commands=$("$python" -c '
import json, sys
for entry in json.load(open(sys.argv[1])):
    f = entry["file"]
    if ("/contract/" in f and "/contract/fail_" not in f) or "/examples/" in f:
        print(f + "\t" + entry["directory"] + "\t" + entry["command"])
' "$build/compile_commands.json")

printf '%-52s %10s %14s\n' "translation unit (-O2)" "wall (s)" "peak RSS (MB)"
over_limit=""
tab=$(printf '\t')
while IFS="$tab" read -r file dir command; do
    [ -n "$file" ] || continue
    # The object goes nowhere, so that the timed build below still starts from nothing.
    command=$(printf '%s' "$command" | sed 's| -o [^ ]*| -o /dev/null|')
    out=$(cd "$dir" && /usr/bin/time -f '%e %M' sh -c "$command" 2>&1 >/dev/null | tail -n 1)
    seconds=${out% *}
    kilobytes=${out#* }
    name=$(printf '%s' "$file" | sed "s|^$source_dir/||; s|^.*/shared/contract/|contract/|")
    printf '%-52s %10s %14s\n' "$name" "$seconds" "$((kilobytes / 1024))"
    case "$file" in
    */contract/section1_self_attention.cpp)
        if awk -v s="$seconds" -v l="$limit" 'BEGIN { exit !(s >= l) }'; then over_limit="$seconds"; fi ;;
    esac
done <<END
$commands
END

start=$(date +%s.%N)
if ! cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1; then
    tail -n 40 "$build/build.log" >&2
    exit 1
fi
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" -v j="$jobs" \
    'BEGIN { printf "\nwhole suite (library, tests, examples, benchmarks), -j %s: %.0f s\n", j, b - a }'

if [ -n "$over_limit" ]; then
    echo "compile-times: section 1 took $over_limit s, over the $limit s limit" >&2
    exit 1
fi
echo "section 1 contract program: under the $limit s limit"
