#!/usr/bin/env bash
# Edge figures for BENCHMARKS.md: `edgehive edge` RSS connected and idle with
# 0 and 40 pods stored, upstream bytes per second while idle, and how fast
# 1,000 pods created through the API are committed and ACKed by the edge.
# The cloud is the release build; the edge is the edge-only build
# (`--profile edge --no-default-features --features edge`, what a small
# device runs).
# Uses 127.0.0.1 and a temporary directory. PING_KEEPALIVE=false measures
# KubeEdge's way of keeping alive (keepalive messages and Lease renewals).
set -euo pipefail
cd "$(dirname "$0")/.."
# Pods are only stored here (edged off): the store's figures, not running pods'.
EDGED=false
HUB_EXTRA="    pingKeepalive: ${PING_KEEPALIVE:-true}"
EDGE_ARGS=()
source scripts/bench-lib.sh
rss() { awk '/^(VmRSS|RssAnon):/ {printf "%s=%s ", $1, $2}' /proc/$edge/status; echo; }
stored() { "$edge_bin" edge --config "$dir/edge.yaml" --show-store | grep -c '/pod/' || true; }
pods() { # pods N FROM: N pods bound to edge-1, one kubectl call
    for i in $(seq "$2" $(($2 + $1 - 1))); do
        printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p%d, namespace: default}\nspec:\n  nodeName: edge-1\n  containers: [{name: c, image: busybox, command: [sleep, "3600"]}]\n---\n' "$i"
    done | kubectl create -f - >/dev/null
}
sleep 20
echo "rss_kib_idle_0_pods $(rss)"
pods 40 0
until [ "$(stored)" -ge 40 ]; do sleep 0.2; done
sleep 20
echo "rss_kib_idle_40_pods $(rss)"
# Upstream bytes (TCP payload the edge sent, TLS included) over 120 s idle.
sent() { ss -tinH state established "( sport != :$api and dport = :$ws )" | grep -o 'bytes_sent:[0-9]*' | head -1 | cut -d: -f2; }
a=$(sent); sleep 120; b=$(sent)
echo "idle_upstream_bytes_per_s $(( (b - a) / 120 ))"
start=$(date +%s.%N)
pods 1000 100
until [ "$(stored)" -ge 1040 ]; do sleep 0.05; done
end=$(date +%s.%N)
echo "pods_1000_created_and_committed_s $(echo "$end - $start" | bc)"
echo "rss_kib_idle_1040_pods $(rss)"
