#!/usr/bin/env bash
# What the metrics cost: the bench's W1 and W2:8 built without the `metrics` feature
# ("off") and with it and a Prometheus recorder installed ("recorder"), taking turns
# (off, recorder, recorder, off, ...) against one server, so that both meet the same server,
# JIT and disk. Prints each run's figures, then the medians per side and the spread.
#
#   examples/bench/metrics_cost.sh            # 4 rounds of each, BENCH_N=2000
#   ROUNDS=5 BENCH_N=1000 examples/bench/metrics_cost.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${ROUNDS:-4}"
export BENCH_N="${BENCH_N:-2000}"
target="${CARGO_TARGET_DIR:-target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for side in off recorder; do
    features=testing
    [ "$side" = recorder ] && features=testing,metrics
    cargo build --quiet --release --example bench --features "$features"
    cp "$target/release/examples/bench" "$work/bench-$side"
done

# One server for every run: the bench's own (full JIT), kept until its stdin closes.
coproc SERVER { BENCH_SERVE=1 "$work/bench-off"; }
read -r connect <&"${SERVER[0]}"
echo "server at $connect" >&2

for i in $(seq 1 "$rounds"); do
    # Each side goes first every other round (off, recorder, recorder, off, ...).
    order="off recorder"
    [ $((i % 2)) -eq 0 ] && order="recorder off"
    for side in $order; do
        env_metrics=()
        [ "$side" = recorder ] && env_metrics=(BENCH_METRICS=recorder)
        env "${env_metrics[@]}" ZK_CONNECT="$connect" BENCH_ONLY=W1,W2:8 "$work/bench-$side" |
            sed "s/^{/{\"side\":\"$side\",\"round\":$i,/" | tee -a "$work/lines"
    done
done
exec {SERVER[1]}>&-
wait "$SERVER_PID" || true

python3 - "$work/lines" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
figures = {
    "W1": ["p50_us", "p99_us", "cycles_per_s", "ratio_to_same_requests"],
    "W2:8": ["acquisitions_per_s", "handoff_p50_us", "handoff_p99_us", "ratio_in_run"],
}
print(f"\n| workload | figure | off (median) | recorder (median) | recorder/off | off spread | recorder spread |")
print("|---|---|---|---|---|---|---|")
for w, keys in figures.items():
    for k in keys:
        side = {s: [r[k] for r in rows if r.get("figure") == w and r["side"] == s and k in r]
                for s in ("off", "recorder")}
        if not side["off"] or not side["recorder"]:
            continue
        off, rec = statistics.median(side["off"]), statistics.median(side["recorder"])
        spread = lambda v: f"{min(v):.1f}–{max(v):.1f}"
        print(f"| {w} | {k} | {off:.1f} | {rec:.1f} | {rec / off:.3f} | {spread(side['off'])} | {spread(side['recorder'])} |")
EOF
