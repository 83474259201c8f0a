#!/usr/bin/env bash
# Mutation testing with cargo-mutants (`cargo install --locked cargo-mutants`): each one-line
# change cargo-mutants makes to the library must fail a test. Not in CI: all of it is hours on
# a small machine. Shards over the plumbing and the algorithms, each with the library's unit
# tests and the integration files tests/README.md names for it (real servers).
#
#   scripts/mutants.sh                 # every area, one shard each
#   scripts/mutants.sh bell 1/4        # one area, the second of four shards
#   scripts/mutants.sh wake            # ...
#   scripts/mutants.sh --list          # the areas
#
# Output: target/mutants/AREA/mutants.out (caught.txt, missed.txt, timeout.txt, unviable.txt).
# A mutant's tests are cut at --timeout seconds (a mutant that hangs a wait counts as caught
# by timeout). MUTANTS_TIMEOUT and MUTANTS_JOBS override the defaults; MUTANTS_IN_PLACE=1
# mutates this tree instead of a copy (faster: it reuses target/; nothing else may build in
# the tree meanwhile).
set -euo pipefail
cd "$(dirname "$0")/.."

# Area: the files mutated, then the tests run on each mutant. The model's unit tests
# (`model::`, a minute or more each run) are skipped where the mutated files are none of the
# model's inputs (the bell and `wake`: the models call neither; they use `Wake` as a type).
declare -A files tests skip
files[bell]="src/client/bell.rs"
tests[bell]="--lib --test mutex --test locks"
skip[bell]="model::"
files[wake]="src/queue/wake.rs"
tests[wake]="--lib --test mutex --test locks --test shutdown"
skip[wake]="model::"
files[queue]="src/queue/**/*.rs"
tests[queue]="--lib --test mutex --test rwlock --test semaphore --test locks --test handoff --test queue_position --test lock_faults --test shutdown --test election_unfair --test new_directory --test tenancy --test failure_semantics"
skip[queue]=""
files[conn]="src/client/conn/**/*.rs"
tests[conn]="--lib --test client --test faults --test connect --test recovery --test ensemble --test failure_semantics"
skip[conn]=""
files[election]="src/election/**/*.rs"
tests[election]="--lib --test election --test election_unfair --test candidate --test candidate_fenced --test election_faults --test shutdown"
skip[election]=""
areas=(bell wake queue conn election)

if [ "${1:-}" = --list ]; then
    for a in "${areas[@]}"; do printf '%-9s %s  (%s)\n' "$a" "${files[$a]}" "${tests[$a]}"; done
    exit 0
fi
pick=("${areas[@]}")
[ $# -ge 1 ] && pick=("$1")
shard="${2:-0/1}"
timeout="${MUTANTS_TIMEOUT:-600}"
jobs="${MUTANTS_JOBS:-1}"
# cargo-mutants refuses --jobs with --in-place (one tree, one build at a time).
in_place=(--jobs "$jobs")
[ "${MUTANTS_IN_PLACE:-}" = 1 ] && in_place=(--in-place)

for a in "${pick[@]}"; do
    [ -n "${files[$a]:-}" ] || { echo "no area $a (scripts/mutants.sh --list)" >&2; exit 2; }
    out="target/mutants/$a"
    mkdir -p "$out"
    file_args=()
    for f in ${files[$a]}; do file_args+=(-f "$f"); done
    # shellcheck disable=SC2086 # the test list is words
    set -- ${tests[$a]}
    test_bin=()
    [ -n "${skip[$a]}" ] && test_bin=(-- --skip "${skip[$a]}")
    echo "==> mutants: $a (${files[$a]}), shard $shard, timeout $timeout s"
    cargo mutants "${in_place[@]}" --no-shuffle --all-features --timeout "$timeout" \
        --shard "$shard" --output "$out" "${file_args[@]}" \
        -- "$@" "${test_bin[@]}" || true
    for f in caught missed timeout unviable; do
        printf '%s: %s %s\n' "$a" "$f" "$(wc -l <"$out/mutants.out/$f.txt" 2>/dev/null || echo 0)"
    done
done
