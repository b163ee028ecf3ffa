#!/usr/bin/env bash
# Pod figures for BENCHMARKS.md (edged), on 127.0.0.1 in a temporary
# directory, for the process runtime or, with RUNTIME=cri, containerd (a
# private one started by scripts/cri-dev.sh; pods on its CNI bridge):
#   - end to end: `kubectl create` of one pod -> Running and ready as the API
#     shows it, 40 pods one after the other (p50/p99);
#   - on the edge: the pod change received by edged -> its container running
#     (from edged's JSON log lines "starting pod" and "container running");
#   - the edge process's RSS with 40 running pods (the pods' own processes
#     not counted).
#   RUNTIME=cri scripts/bench-pods.sh
# The cloud is the release build; the edge is the edge-only build.
set -euo pipefail
cd "$(dirname "$0")/.."
EDGED=true
EDGE_ARGS=(--log-json)
source scripts/bench-lib.sh

now_ms() { date +%s%3N; }
lat=()
for i in $(seq 1 40); do
    t0=$(now_ms)
    printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p%d}\nspec:\n  nodeName: edge-1\n  containers: [{name: c, image: edgehive.local/busybox:1, command: [sh, -c, "while true; do sleep 5; done"]}]\n' "$i" | kubectl create -f - >/dev/null
    until [ "$(kubectl get pod "p$i" -o jsonpath='{.status.containerStatuses[0].ready}')" = true ]; do sleep 0.01; done
    lat+=($(( $(now_ms) - t0 )))
done
sleep 10
echo "edge_rss_kib_40_running_pods $(awk '/^VmRSS:/ {print $2}' /proc/$edge/status)" \
    "(anon $(awk '/^RssAnon:/ {print $2}' /proc/$edge/status), file $(awk '/^RssFile:/ {print $2}' /proc/$edge/status))"
echo "edge_threads $(awk '/^Threads:/ {print $2}' /proc/$edge/status)" \
    "heap_rss_kib $(awk '/\[heap\]/ {h=1; next} /^[0-9a-f]+-/ {h=0} h && /^Rss:/ {print $2}' /proc/$edge/smaps)"
printf '%s\n' "${lat[@]}" | sort -n | awk '{a[NR]=$1} END {printf "e2e_create_to_running_ms p50=%d p99=%d max=%d (n=%d)\n", a[int(NR*0.5+0.5)], a[int(NR*0.99+0.5)], a[NR], NR}'
python3 - "$dir/edge.log" <<'PY'
import json, sys, datetime
start, run = {}, {}
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    f = e.get("fields", {}); msg = f.get("message"); pod = f.get("pod")
    t = datetime.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
    if msg == "starting pod": start.setdefault(pod, t)
    if msg == "container running": run.setdefault(pod, t)
d = sorted((run[p] - start[p]) * 1000 for p in start if p in run)
if d:
    print("edge_received_to_running_ms p50=%.2f p99=%.2f max=%.2f (n=%d)" % (d[int(len(d)*0.5)], d[min(len(d)-1, int(len(d)*0.99))], d[-1], len(d)))
PY
