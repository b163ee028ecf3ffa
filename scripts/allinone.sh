#!/usr/bin/env bash
# The all-in-one: builds edgehive, starts `edgehive cloud` on the embedded
# store and one `edgehive edge` joined with a fresh token, applies a pod with
# kubectl and shows it reaching the edge's local store and running there.
# Everything lives under .edgehive-allinone/ (or $EDGEHIVE_ALLINONE_DIR);
# Ctrl-C stops both.
#
#   scripts/allinone.sh           # build (release) and run
#   scripts/allinone.sh --debug   # use a debug build
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
[ "${1:-}" = "--debug" ] && profile=debug
if [ "$profile" = release ]; then cargo build --release -p edgehive; else cargo build -p edgehive; fi
bin="target/$profile/edgehive"

dir="${EDGEHIVE_ALLINONE_DIR:-$PWD/.edgehive-allinone}"
mkdir -p "$dir"
api=127.0.0.1:6443 ws=127.0.0.1:10000 join=127.0.0.1:10002
export KUBECONFIG="$dir/cloud/kubeconfig.yaml"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$bin" cloud --data-dir "$dir/cloud" --bind "$api" --websocket-bind "$ws" --no-quic --join-bind "$join" \
    --advertise-address 127.0.0.1 >"$dir/cloud.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f "$KUBECONFIG" ] && kubectl get ns >/dev/null 2>&1 && break; sleep 0.1; done
echo "cloud is up (log: $dir/cloud.log)"

token="$("$bin" token --data-dir "$dir/cloud")"
cat >"$dir/edge.yaml" <<YAML
apiVersion: edgecore.config.kubeedge.io/v1alpha2
kind: EdgeCore
dataDir: $dir/edge
modules:
  edged: {hostnameOverride: edge-1}
  edgeHub:
    httpServer: https://$join
    token: $token
    websocket: {enable: true, server: $ws}
YAML
"$bin" edge --config "$dir/edge.yaml" >"$dir/edge.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do kubectl get node edge-1 >/dev/null 2>&1 && break; sleep 0.1; done
kubectl wait --for=condition=Ready node/edge-1 --timeout=60s >/dev/null
echo "edge-1 joined with a fresh token (log: $dir/edge.log)"
kubectl get nodes -o wide

kubectl apply -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  nodeName: edge-1
  containers: [{name: hello, image: busybox, command: [sh, -c, "while true; do date; sleep 5; done"]}]
YAML
for _ in $(seq 100); do "$bin" edge --config "$dir/edge.yaml" --show-store 2>/dev/null | grep -q default/pod/hello && break; sleep 0.1; done
echo; echo "the pod in edge-1's local store:"
"$bin" edge --config "$dir/edge.yaml" --show-store
kubectl wait --for=condition=Ready pod/hello --timeout=60s >/dev/null
echo; echo "and running on edge-1 (a host process; logs under $dir/edge/pods/):"
kubectl get pods -o wide
echo; echo "its log, through edge-1's own connection to the cloud (kubectl logs hello):"
kubectl logs hello
echo; echo "a command run in it (kubectl exec hello -- sh -c 'echo running on \$(hostname); pwd'):"
kubectl exec hello -- sh -c 'echo "running on $(hostname)"; pwd'
echo; echo "what it uses, measured on edge-1 when asked (kubectl top pod hello):"
kubectl top pod hello
echo; echo "try: kubectl logs -f hello; kubectl exec -it hello -- sh; kubectl top node"
echo; echo "running; KUBECONFIG=$KUBECONFIG kubectl ... in another shell; Ctrl-C stops both"
wait
