#!/usr/bin/env bash
# What the metrics cost: the bench's W1 and W2:8 built without the `metrics` feature
# ("off"), with it and no recorder ("bare", with SIDES including it), and with it and a
# Prometheus recorder installed ("recorder"), taking turns against one server (the order
# reversed every other round), so that every side meets the same server, JIT and disk.
# Prints each run's figures, then the medians per side, their ratio to "off", and the spread.
#
#   examples/bench/metrics_cost.sh                 # off and recorder, 4 rounds, BENCH_N=2000
#   SIDES="off bare recorder" ROUNDS=3 examples/bench/metrics_cost.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${ROUNDS:-4}"
sides="${SIDES:-off recorder}"
export BENCH_N="${BENCH_N:-2000}"
target="${CARGO_TARGET_DIR:-target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for features in testing testing,metrics; do
    cargo build --quiet --release --example bench --features "$features"
    cp "$target/release/examples/bench" "$work/bench-$features"
done

# One server for every run: the bench's own (full JIT), kept until its stdin closes.
coproc SERVER { BENCH_SERVE=1 "$work/bench-testing"; }
read -r connect <&"${SERVER[0]}"
echo "server at $connect" >&2

for i in $(seq 1 "$rounds"); do
    order="$sides"
    [ $((i % 2)) -eq 0 ] && order="$(echo "$sides" | tr ' ' '\n' | tac | tr '\n' ' ')"
    for side in $order; do
        case "$side" in
        off) run=("$work/bench-testing") ;;
        bare) run=("$work/bench-testing,metrics") ;;
        recorder) run=(env BENCH_METRICS=recorder "$work/bench-testing,metrics") ;;
        *) echo "SIDES: unknown side $side (off, bare, recorder)" >&2 && exit 2 ;;
        esac
        ZK_CONNECT="$connect" BENCH_ONLY=W1,W2:8 "${run[@]}" |
            sed "s/^{/{\"side\":\"$side\",\"round\":$i,/" | tee -a "$work/lines"
    done
done
exec {SERVER[1]}>&-
wait "$SERVER_PID" || true

python3 - "$work/lines" $sides <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sides = sys.argv[2:]
figures = {
    "W1": ["p50_us", "p99_us", "cycles_per_s", "ratio_to_same_requests"],
    "W2:8": ["acquisitions_per_s", "handoff_p50_us", "handoff_p99_us", "ratio_in_run"],
}
head = " | ".join(f"{s} (median) | {s} spread" for s in sides)
print(f"\n| workload | figure | {head} | " + " | ".join(f"{s}/off" for s in sides if s != "off") + " |")
print("|---|---|" + "---|---|" * len(sides) + "---|" * (len(sides) - 1))
for w, keys in figures.items():
    for k in keys:
        vals = {s: [r[k] for r in rows if r.get("figure") == w and r["side"] == s and k in r] for s in sides}
        if not all(vals.values()):
            continue
        med = {s: statistics.median(v) for s, v in vals.items()}
        cells = " | ".join(f"{med[s]:.3f} | {min(vals[s]):.3f}–{max(vals[s]):.3f}" for s in sides)
        ratios = " | ".join(f"{med[s] / med['off']:.3f}" for s in sides if s != "off" and "off" in med)
        print(f"| {w} | {k} | {cells} | {ratios} |")
EOF
