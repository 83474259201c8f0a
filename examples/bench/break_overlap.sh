#!/bin/sh
# Overlap of two jobs when `break` runs right after the holder's zkguard is frozen.
# Usage: examples/bench/break_overlap.sh [--now]  (from the repo root, after
# `cargo build -p zkguard-cli --all-features`; a 10 s session, the holder frozen 15 s;
# `--now` deletes at once, as break did before it waited out the watchdog)
Z=${Z:-target/debug/zkguard}
D=$(mktemp -d)
$Z server > $D/cs 2>$D/server.err & SP=$!
while [ ! -s $D/cs ]; do sleep 0.1; done
CS=$(head -1 $D/cs)
W='while [ ! -e '$D'/stop ]; do echo "$0 $(date +%s.%N)" >> '$D'/log; sleep 0.1; done'
$Z --connect $CS --session-timeout 10s lock /m -- sh -c "$W" a 2>$D/a.err & A=$!
while [ ! -s $D/log ]; do sleep 0.1; done
$Z --connect $CS lock /m --timeout 60s -- sh -c "$W" b 2>$D/b.err & B=$!
sleep 2
T0=$(date +%s.%N); kill -STOP $A
$Z --connect $CS break /m --holder --yes "$@" 2>$D/break.err
sleep 15; kill -CONT $A; wait $A; touch $D/stop; wait $B
kill -INT $SP; wait $SP 2>/dev/null
awk -v t0=$T0 '$1=="a"{la=$2} $1=="b"&&!fb{fb=$2} END{o=la-fb; if(o<0)o=0; printf "a last wrote %.3f s after the freeze, b first %.3f s after it: %.3f s of both\n", la-t0, fb-t0, o}' $D/log
grep -h "waiting until" $D/break.err
rm -rf $D
