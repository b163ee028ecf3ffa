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
cargo build --release -p edgehive >/dev/null
cargo build --profile edge -p edgehive --no-default-features --features edge >/dev/null
bin="$PWD/target/release/edgehive"
edge_bin="$PWD/target/edge/edgehive"
dir="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api=$(free_port) ws=$(free_port) join=$(free_port)
export KUBECONFIG="$dir/cloud/kubeconfig.yaml" HOME="$dir"
"$bin" cloud --data-dir "$dir/cloud" --bind 127.0.0.1:$api --websocket-bind 127.0.0.1:$ws --no-quic --join-bind 127.0.0.1:$join >"$dir/cloud.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f "$KUBECONFIG" ] && kubectl get ns >/dev/null 2>&1 && break; sleep 0.1; done
cat >"$dir/edge.yaml" <<YAML
dataDir: $dir/edge
modules:
  edged: {hostnameOverride: edge-1}
  edgeHub:
    httpServer: https://127.0.0.1:$join
    token: $("$bin" token --data-dir "$dir/cloud")
    websocket: {server: 127.0.0.1:$ws}
    pingKeepalive: ${PING_KEEPALIVE:-true}
YAML
"$edge_bin" edge --config "$dir/edge.yaml" >"$dir/edge.log" 2>&1 &
edge=$!
pids+=($edge)
for _ in $(seq 300); do kubectl get node edge-1 >/dev/null 2>&1 && break; sleep 0.1; done
kubectl wait --for=condition=Ready node/edge-1 --timeout=60s >/dev/null
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
