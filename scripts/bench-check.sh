#!/usr/bin/env bash
# Re-runs the headline benchmarks and prints each figure beside the one
# BENCHMARKS.md records (its "Headline figures" table: key, figure,
# recorded value, commit, target), so that a regression is seen the day it
# lands. Each figure is the worst of the runs (the lowest throughput, the
# highest latency or memory), as BENCHMARKS.md records them.
#
#   scripts/bench-check.sh          # 3 runs of each
#   scripts/bench-check.sh 10       # 10 runs
#
# Run it on a quiet machine: the benches share its cores with everything else.
# The logs of every run stay in target/bench-check/ (replaced by the next
# check), so that an outlier can be read afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
logs="target/bench-check"
rm -rf "$logs"
mkdir -p "$logs"

echo "building (release)..." >&2
cargo build --release -q -p edgehive
cargo bench -q -p edgehive --bench cloudcore --no-run 2>/dev/null

# One value per run, per key, in $out/<key>.
record() { echo "$2" >> "$out/$1"; }

for i in $(seq 1 "$runs"); do
    echo "run $i of $runs: cloudcore, 1,000 nodes" >&2
    log="$logs/cloudcore-$i.log"
    cargo bench -q -p edgehive --bench cloudcore -- --nodes 1000 --idle 1000 --daemonset 0 --deployments 0 > "$log" 2>&1
    record cloudcore.flat_out "$(grep -m1 'flat out' "$log" | sed -E 's/.* = ([0-9]+)\/s.*/\1/')"
    record cloudcore.paced_p99_ms "$(grep -m1 'paced' "$log" | sed -E 's/.*write→edge p50 [0-9.]+ ms p99 ([0-9.]+) ms.*/\1/')"
    record cloudcore.answered_p99_ms "$(grep -m1 'paced' "$log" | sed -E 's/.*answer→edge p99 ([0-9.]+) ms.*/\1/')"
    record cloudcore.idle_kib_per_node "$(grep -m1 'idle nodes' "$log" | sed -E 's/.*= ([0-9.]+) KiB per idle node.*/\1/')"

    echo "run $i of $runs: edgehive sim hold, 1,000 nodes" >&2
    dir="$out/sim-$i"
    target/release/edgehive sim hold --nodes 1000 --duration 20s --spawn-cloud --quiet \
        --data-dir "$dir/cloud" --certs-dir "$dir/certs" --json "$dir/summary.json" > "$logs/sim-$i.log" 2>&1 || {
        echo "edgehive sim failed:" >&2; tail -20 "$logs/sim-$i.log" >&2; exit 1; }
    figure() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['figures'][sys.argv[2]])" "$dir/summary.json" "$1"; }
    record sim.cloud_kib_per_node "$(figure cloud_kib_per_node)"
    record sim.sim_kib_per_node "$(figure sim_kib_per_node)"
    record sim.bytes_per_node_s "$(python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['figures']; print(round(f['up_bytes_per_node_s']+f['down_bytes_per_node_s'],2))" "$dir/summary.json")"
done

# key: "min" when lower is worse (throughput), "max" when higher is.
worst() {
    case "$1" in
        cloudcore.flat_out) sort -n "$out/$1" | head -1 ;;
        *) sort -n "$out/$1" | tail -1 ;;
    esac
}

printf '%-28s %-14s %-10s %-14s %-12s %s\n' "figure" "recorded" "at" "now (worst)" "target" "all runs"
for key in cloudcore.flat_out cloudcore.paced_p99_ms cloudcore.answered_p99_ms cloudcore.idle_kib_per_node \
           sim.cloud_kib_per_node sim.sim_kib_per_node sim.bytes_per_node_s; do
    row="$(grep -m1 -F "| \`$key\` |" BENCHMARKS.md || true)"
    recorded="$(echo "$row" | awk -F'|' '{gsub(/ /,"",$4); print $4}')"
    commit="$(echo "$row" | awk -F'|' '{gsub(/ /,"",$5); print $5}')"
    target="$(echo "$row" | awk -F'|' '{gsub(/^ +| +$/,"",$6); print $6}')"
    printf '%-28s %-14s %-10s %-14s %-12s %s\n' "$key" "${recorded:--}" "${commit:--}" "$(worst "$key")" \
        "${target:--}" "$(tr '\n' ' ' < "$out/$key")"
done
echo "logs of every run: $logs/" >&2
