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
# Two passes per area, into one output directory: the library's unit tests alone (`--lib`:
# seconds), then only the mutants they missed again (by name) with the area's
# integration files (minutes each). A mutant's build is most of its cost: it is made with
# the `mutant` profile (Cargo.toml: the test profile without debug information, in
# target/mutant/; a build of the library's tests links in seconds instead of tens).
#
# Output: target/mutants/AREA/{lib,files}/mutants.out, one per pass (caught.txt, missed.txt,
# timeout.txt, unviable.txt): a mutant missed by `files` is a survivor.
# A mutant's tests are cut at --timeout seconds (a mutant that hangs a wait counts as caught
# by timeout). MUTANTS_TIMEOUT and MUTANTS_JOBS override the defaults; MUTANTS_RE keeps only
# the mutants whose name matches (cargo-mutants' `--re`: a function, `Shared::dispatch`);
# MUTANTS_PASS=lib or =files runs one pass only; MUTANTS_IN_PLACE=1 mutates this tree
# instead of a copy (faster: it reuses target/; nothing else may build or edit in the tree
# meanwhile: run it in a scratch copy of the tree to keep working in yours).
#
# The `conn` area's zxid rule is told apart only by a server whose notifications carry a
# zxid (3.9 on): run it with ZKGUARD_ZOOKEEPER_VERSION=3.9.5 (and ZKGUARD_VERSIONS_DIR; see
# docs/testing.md), as its pass over the integration files includes tests/plumbing.rs.
set -euo pipefail
# No globbing by the shell: an area's files are cargo-mutants' globs (`src/queue/**/*.rs`).
# Expanded by bash (no globstar) `**` is `*`, and the area was only its subdirectories'
# files (`src/client/conn/**/*.rs` was `reply/loom.rs` and `session/first.rs`).
set -f
cd "$(dirname "$0")/.."

# Area: the files mutated, then the integration files run on each mutant the library's unit
# tests missed. The model's unit tests (`model::`, a minute or more each run) are skipped
# where the mutated files are none of the models' inputs (ARCHITECTURE.md, "The model
# checker": the bell, `wake`, the connection; the models use `Wake` only as a type).
declare -A files tests skip
files[bell]="src/client/bell.rs"
tests[bell]="--test mutex --test locks --test plumbing"
skip[bell]="model::"
files[wake]="src/queue/wake.rs"
tests[wake]="--test mutex --test locks --test shutdown --test plumbing"
skip[wake]="model::"
files[queue]="src/queue/**/*.rs"
tests[queue]="--test plumbing --test mutex --test rwlock --test semaphore --test locks --test handoff --test queue_position --test lock_faults --test shutdown --test election_unfair --test new_directory --test tenancy --test acl --test failure_semantics"
skip[queue]=""
files[conn]="src/client/conn/**/*.rs"
tests[conn]="--test plumbing --test client --test faults --test connect --test recovery --test ensemble --test failure_semantics --test locks --test logging --test metrics --test server_versions --test harness_expire"
skip[conn]="model::"
files[election]="src/election/**/*.rs"
tests[election]="--test plumbing --test election --test election_unfair --test candidate --test candidate_fenced --test election_faults --test shutdown"
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
pass="${MUTANTS_PASS:-both}"
# cargo-mutants refuses --jobs with --in-place (one tree, one build at a time).
in_place=(--jobs "$jobs")
[ "${MUTANTS_IN_PLACE:-}" = 1 ] && in_place=(--in-place)
select=()
[ -n "${MUTANTS_RE:-}" ] && select=(--re "$MUTANTS_RE")

# The anchored alternation of the mutant names in file $1 (cargo-mutants' `--re`).
names_re() {
    printf '^('
    sed 's/[][\.*+?(){}|^$]/\\&/g' "$1" | paste -sd '|' | tr -d '\n'
    printf ')$'
}

for a in "${pick[@]}"; do
    [ -n "${files[$a]:-}" ] || { echo "no area $a (scripts/mutants.sh --list)" >&2; exit 2; }
    out="target/mutants/$a"
    mkdir -p "$out"
    file_args=()
    for f in ${files[$a]}; do file_args+=(-f "$f"); done
    test_bin=()
    [ -n "${skip[$a]}" ] && test_bin=(-- --skip "${skip[$a]}")
    common=("${in_place[@]}" --no-shuffle --all-features --profile mutant "${file_args[@]}")
    if [ "$pass" != files ]; then
        echo "==> mutants: $a (${files[$a]}), shard $shard, the library's unit tests"
        cargo mutants "${common[@]}" "${select[@]}" --shard "$shard" --timeout 120 \
            --output "$out/lib" -C --lib -- "${test_bin[@]}" || true
    fi
    if [ "$pass" != lib ]; then
        # Only what the first pass missed, by name (not `--iterate`: with a shard it would
        # take in every mutant of the other shards, none of them caught).
        missed="$out/lib/mutants.out/missed.txt"
        if [ -s "$missed" ]; then
            # The targets as `--cargo-arg`s, so the build before the tests makes only them
            # (after `--` they would reach `cargo test` alone, and its `--no-run` build
            # would make every test binary and example for each mutant).
            set --
            for t in --lib ${tests[$a]}; do set -- "$@" -C "$t"; done
            echo "==> mutants: $a, the $(wc -l <"$missed") the unit tests missed, its" \
                "integration files, timeout $timeout s"
            cargo mutants "${common[@]}" --re "$(names_re "$missed")" --timeout "$timeout" \
                --output "$out/files" "$@" -- "${test_bin[@]}" || true
        fi
    fi
    for p in lib files; do
        for f in caught missed timeout unviable; do
            list="$out/$p/mutants.out/$f.txt"
            printf '%s (%s): %s %s\n' "$a" "$p" "$f" "$(cat "$list" 2>/dev/null | wc -l)"
        done
    done
done
