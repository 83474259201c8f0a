#!/usr/bin/env bash
# The stress runner: runs the test suite (every test binary of the workspace, the doctests,
# and the examples `.ci/run` runs) again and again, optionally with a CPU hog on every core,
# and prints each test that failed with its run number; the output of every failed job is
# kept. See tests/README.md ("The stress runner").
#
#   scripts/stress.sh [-n RUNS] [--hog] [--minutes M] [--out DIR] [--keep-all]
#                     [--test NAME]... [--lib] [--doc] [--example NAME]... [-- TEST-ARGS...]
#
# With no --test/--lib/--doc/--example it runs the whole suite: what
# `cargo test --workspace --all-features --no-fail-fast` runs, then the examples demo,
# locks, leader, daemon and `metrics_prometheus --once`. TEST-ARGS go to every test binary
# (a name filter, `--exact`, `--test-threads=1`).
#
# It builds once, first, and hard-links the binaries it runs into DIR/bin, so rebuilding
# the worktree while it runs does not change what it runs (the doctests are compiled by
# cargo at each run, and the command line's tests run `target/debug/zkguard` as it is).
# Bounded: at most RUNS runs, none started after M minutes, every job under a timeout; the
# hog's loops are killed when it ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

runs=5
hog=false
minutes=0
out=""
keep_all=false
tests=()
examples=()
want_lib=false
want_doc=false
test_args=()
suite_timeout=${STRESS_TIMEOUT:-900} # seconds per test binary or example

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
    -n | --runs) runs=$2; shift 2 ;;
    --hog) hog=true; shift ;;
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep-all) keep_all=true; shift ;;
    --test) tests+=("$2"); shift 2 ;;
    --example) examples+=("$2"); shift 2 ;;
    --lib) want_lib=true; shift ;;
    --doc) want_doc=true; shift ;;
    -h | --help) usage 0 ;;
    --) shift; test_args=("$@"); break ;;
    *) echo "stress.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
    esac
done
case "$runs" in '' | *[!0-9]* | 0) echo "stress.sh: -n needs a positive number, not '$runs'" >&2; exit 2 ;; esac
case "$minutes" in '' | *[!0-9]*) echo "stress.sh: --minutes needs a number, not '$minutes'" >&2; exit 2 ;; esac

whole=false
if [ ${#tests[@]} -eq 0 ] && [ ${#examples[@]} -eq 0 ] && ! $want_lib && ! $want_doc; then
    whole=true
    want_lib=true
    want_doc=true
    examples=(demo locks leader daemon metrics_prometheus)
fi
[ -n "$out" ] || out="target/stress/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
failures="$out/failures.tsv"
: >"$failures"

# ---------------------------------------------------------------- build once
echo "stress: building (once) ..."
jobs_file="$out/jobs.tsv" # name, working directory, binary, arguments
: >"$jobs_file"
link() { # the binary, kept as it is now
    local dest="$out/bin/$2"
    ln -f "$1" "$dest" 2>/dev/null || cp -f "$1" "$dest"
    echo "$dest"
}
if $whole || $want_lib || [ ${#tests[@]} -gt 0 ]; then
    cargo test --workspace --all-features --no-run --message-format=json 2>"$out/build.log" |
        jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test)
               | [.target.name, .target.kind[0], .manifest_path, .executable] | @tsv' \
            >"$out/artifacts.tsv" || { cat "$out/build.log" >&2; exit 1; }
    while IFS=$'\t' read -r name kind manifest exe; do
        pkg=$(basename "$(dirname "$manifest")")
        [ "$manifest" = "$root/Cargo.toml" ] && pkg=zkguard
        case "$kind" in
        test) job="$pkg/$name" ;;
        *) job="$pkg/$kind" ;;
        esac
        if ! $whole; then
            keep=false
            if [ "$kind" = test ]; then
                for t in "${tests[@]}"; do [ "$t" = "$name" ] && keep=true; done
            elif [ "$kind" = lib ] && [ "$pkg" = zkguard ]; then
                keep=$want_lib
            fi
            $keep || continue
        fi
        bin=$(link "$exe" "${job//\//.}")
        printf '%s\t%s\t%s\n' "$job" "$(dirname "$manifest")" "$bin" >>"$jobs_file"
    done <"$out/artifacts.tsv"
    for t in "${tests[@]}"; do
        grep -q "/$t"$'\t' "$jobs_file" || { echo "stress: no test binary named '$t'" >&2; exit 2; }
    done
fi
for ex in "${examples[@]}"; do
    features=testing
    args=""
    if [ "$ex" = metrics_prometheus ]; then
        features=testing,metrics
        args=--once
    fi
    exe=$(cargo build --features "$features" --example "$ex" --message-format=json 2>>"$out/build.log" |
        jq -r 'select(.reason == "compiler-artifact" and .executable != null) | .executable' | tail -1)
    [ -n "$exe" ] || { echo "stress: example '$ex' did not build (see $out/build.log)" >&2; exit 2; }
    bin=$(link "$exe" "example.$ex")
    printf '%s\t%s\t%s\t%s\n' "example/$ex" "$root" "$bin" "$args" >>"$jobs_file"
done
if $want_doc; then
    printf '%s\t%s\t%s\n' "doctests" "$root" "-" >>"$jobs_file"
fi

# ---------------------------------------------------------------- the hog
hogs=()
stop_hogs() {
    if [ ${#hogs[@]} -gt 0 ]; then
        kill "${hogs[@]}" 2>/dev/null || true
        wait "${hogs[@]}" 2>/dev/null || true
        hogs=()
    fi
}
# ---------------------------------------------------------------- the table
report() {
    echo
    echo "stress: $done_runs run(s) of $(wc -l <"$jobs_file") job(s)$($hog && echo ", CPU hog on $(nproc) core(s)"), $(($(date +%s) - started))s"
    if [ ! -s "$failures" ]; then
        echo "stress: no failures"
        return 0
    fi
    echo "stress: failures (run, job, test, first line of its panic, output kept):"
    column -t -s $'\t' "$failures"
    return 1
}
started=$(date +%s)
done_runs=0
trap stop_hogs EXIT
trap 'stop_hogs; echo "stress: interrupted during run $((done_runs + 1))" >&2; report || true; exit 130' INT TERM
if $hog; then
    for _ in $(seq "$(nproc)"); do
        bash -c 'while :; do :; done' &
        hogs+=($!)
    done
    echo "stress: CPU hog on $(nproc) core(s): pids ${hogs[*]}"
fi

# ---------------------------------------------------------------- the runs
# The failed tests of one job's output: libtest's "test NAME ... FAILED" lines; a job that
# failed without one (a crash, a timeout, an example) is named as a whole.
failed_tests() {
    sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$1"
}
# The first line of the panic of test $2 (or of the job when $2 is "-") in log $1.
reason() {
    local section
    if [ "$2" = "-" ]; then section=$(cat "$1"); else
        section=$(sed -n "/^---- $(printf '%s' "$2" | sed 's/[][\\/.*^$]/\\&/g') stdout ----\$/,/^---- /p" "$1")
    fi
    printf '%s\n' "$section" | grep -A1 -m1 "panicked at" | tail -1 | cut -c1-150
}

echo "stress: $(wc -l <"$jobs_file") job(s) a run, $runs run(s)$([ "$minutes" -gt 0 ] && echo ", none started after $minutes min"); output of failed jobs in $out"
echo "stress: tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
for run in $(seq "$runs"); do
    if [ "$minutes" -gt 0 ] && [ $(($(date +%s) - started)) -ge $((minutes * 60)) ]; then
        echo "stress: $minutes min passed, no more runs"
        break
    fi
    run_dir="$out/run-$run"
    mkdir -p "$run_dir"
    run_start=$(date +%s)
    run_failed=0
    while IFS=$'\t' read -r job dir bin args; do
        log="$run_dir/${job//\//.}.log"
        job_start=$(date +%s)
        set +e
        if [ "$job" = doctests ]; then
            timeout -k 30 "$suite_timeout" cargo test --workspace --all-features --no-fail-fast --doc \
                >"$log" 2>&1
        elif [[ "$job" == example/* ]]; then
            # shellcheck disable=SC2086 # args: none or one word
            (cd "$dir" && timeout -k 30 "$suite_timeout" "$bin" $args) >"$log" 2>&1
        else
            (cd "$dir" && timeout -k 30 "$suite_timeout" "$bin" "${test_args[@]}") >"$log" 2>&1
        fi
        status=$?
        set -e
        secs=$(($(date +%s) - job_start))
        if [ $status -eq 0 ]; then
            $keep_all || rm -f "$log"
            printf '  run %d  %-34s ok      %4ds\n' "$run" "$job" "$secs"
            continue
        fi
        run_failed=$((run_failed + 1))
        named=$(failed_tests "$log")
        if [ $status -eq 124 ] || [ $status -eq 137 ]; then
            named=$(printf '%s\n%s' "$named" "(timed out after ${suite_timeout}s)" | sed '/^$/d')
        fi
        [ -n "$named" ] || named="-"
        while IFS= read -r t; do
            printf '%d\t%s\t%s\t%s\t%s\n' "$run" "$job" "$t" "$(reason "$log" "$t")" "$log" >>"$failures"
        done <<<"$named"
        printf '  run %d  %-34s FAILED  %4ds (exit %d): %s\n' "$run" "$job" "$secs" "$status" "$(echo "$named" | paste -sd' ')"
    done <"$jobs_file"
    done_runs=$run
    [ "$run_failed" -gt 0 ] || rmdir "$run_dir" 2>/dev/null || true
    echo "stress: run $run: $run_failed failed job(s) in $(($(date +%s) - run_start))s"
done
stop_hogs

report
