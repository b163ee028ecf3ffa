# Sourced by the bench-*.sh scripts: builds the release cloud and the
# edge-only edge (`--profile edge`), then starts `edgehive cloud` and one
# `edgehive edge` joined with a fresh token, both on 127.0.0.1 under a
# temporary directory that is removed (with any container processes the
# edge left) on exit. Before sourcing, set:
#   EDGED=true|false         run pods on the edge (edged)
#   HUB_EXTRA='    key: v'   more modules.edgeHub lines (optional)
#   EDGE_ARGS=(...)          global arguments for the edge (optional)
#   RUNTIME=process|cri      edged's runtime (default process); cri starts a
#                            private containerd with scripts/cri-dev.sh
#   EDGE_BIN=path            another edge binary (e.g. an older build to compare)
# Afterwards: $bin, $edge_bin, $dir, $edge (the edge's pid), KUBECONFIG.
cargo build --release -p edgehive >/dev/null
cargo build --profile edge -p edgehive --no-default-features --features edge >/dev/null
bin="$PWD/target/release/edgehive"
edge_bin="${EDGE_BIN:-$PWD/target/edge/edgehive}"
dir="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${RUNTIME:-process}" = cri ] && scripts/cri-dev.sh stop "$dir/ctd"
    find "$dir/edge/pods" -name '*.pid' 2>/dev/null | while read -r f; do
        kill -s KILL -- "-$(cut -d' ' -f1 "$f")" 2>/dev/null || true
    done
    rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api=$(free_port) ws=$(free_port) join=$(free_port)
export KUBECONFIG="$dir/cloud/kubeconfig.yaml" HOME="$dir"
"$bin" cloud --data-dir "$dir/cloud" --bind 127.0.0.1:$api --websocket-bind 127.0.0.1:$ws --no-quic \
    --join-bind 127.0.0.1:$join >"$dir/cloud.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -f "$KUBECONFIG" ] && kubectl get ns >/dev/null 2>&1 && break; sleep 0.1; done
runtime_cfg=""
if [ "${RUNTIME:-process}" = cri ]; then
    endpoint=$(scripts/cri-dev.sh start "$dir/ctd")
    runtime_cfg=", tailoredKubeletConfig: {containerRuntimeEndpoint: '$endpoint'}"
fi
cat >"$dir/edge.yaml" <<YAML
dataDir: $dir/edge
modules:
  edged: {enable: ${EDGED:-true}, hostnameOverride: edge-1$runtime_cfg}
  edgeHub:
    httpServer: https://127.0.0.1:$join
    token: $("$bin" token --data-dir "$dir/cloud")
    websocket: {server: 127.0.0.1:$ws}
${HUB_EXTRA:-}
YAML
"$edge_bin" "${EDGE_ARGS[@]}" edge --config "$dir/edge.yaml" >"$dir/edge.log" 2>&1 &
edge=$!
pids+=($edge)
for _ in $(seq 300); do kubectl get node edge-1 >/dev/null 2>&1 && break; sleep 0.1; done
kubectl wait --for=condition=Ready node/edge-1 --timeout=60s >/dev/null
