#!/usr/bin/env bash
# A private containerd for edgehive's CRI runtime: its tests, its benchmark,
# and anyone who wants to try `edgehive edge` with containerd on one machine
# without touching the system's containerd.
#
#   scripts/cri-dev.sh start DIR   # containerd with all its state under DIR
#   scripts/cri-dev.sh stop DIR    # stops it and everything it ran
#
# `start` writes DIR/config.toml (CRI plugin: sandbox image
# edgehive.local/pause:1, restrict_oom_score_adj, the native snapshotter, a
# CNI bridge with its own name and /24), builds two images from the host's
# busybox-static without any registry (edgehive.local/busybox:1 with the
# busybox applets, and the pause image, which sleeps), imports them, and
# prints the CRI endpoint (unix://DIR/containerd.sock). It fails with the
# reason when a part is missing or containerd does not come up.
#
# Everything containerd keeps lives under DIR (runc's state too, and the pod
# network namespaces) except the shims' sockets, which containerd 1.6 always
# puts in /run/containerd/s, the cgroups of the containers, and the CNI
# plugins' result cache in /var/lib/cni/results.
#
# `stop` kills and deletes every task through containerd (the shims then
# remove runc's state, the cgroups and their sockets), then kills whatever is
# left (the containers' processes, the shims, containerd), removes what those
# leave outside DIR, the pod network namespaces and the bridge, and unmounts
# what is left under DIR.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
dir=$(realpath -m "$dir")
sock="$dir/containerd.sock"

need() {
    local missing=()
    for b in containerd runc ctr busybox ip; do command -v "$b" >/dev/null || missing+=("$b"); done
    for p in bridge host-local loopback; do [ -x "/usr/lib/cni/$p" ] || missing+=("/usr/lib/cni/$p"); done
    if ((${#missing[@]})); then
        echo "missing: ${missing[*]} (scripts/test.sh installs containerd, runc, busybox-static and containernetworking-plugins)" >&2
        exit 1
    fi
}

# Builds a docker-archive image of busybox-static: $1 name, $2 JSON config fields.
image() {
    local name=$1 fields=$2 work="$dir/images/$1"
    mkdir -p "$work"
    local diff cfg
    diff=$(sha256sum "$dir/images/layer.tar" | cut -d' ' -f1)
    printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/bin"],%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
        "$(dpkg --print-architecture 2>/dev/null || echo amd64)" "$fields" "$diff" >"$work/config.json"
    cfg=$(sha256sum "$work/config.json" | cut -d' ' -f1)
    mv "$work/config.json" "$work/$cfg.json"
    ln -f "$dir/images/layer.tar" "$work/layer.tar"
    printf '[{"Config":"%s.json","RepoTags":["edgehive.local/%s:1"],"Layers":["layer.tar"]}]' "$cfg" "$name" >"$work/manifest.json"
    tar -C "$work" -cf "$dir/images/$name.tar" manifest.json "$cfg.json" layer.tar
    if ! out=$(ctr --address "$sock" -n k8s.io images import --snapshotter native "$dir/images/$name.tar" 2>&1); then
        echo "image import failed: $out" >&2
        exit 1
    fi
}

start() {
    need
    mkdir -p "$dir/cni.d" "$dir/images/root/bin" "$dir/images/root/tmp" "$dir/images/root/etc"
    # A bridge and a /24 of its own, so that several can run at once.
    local n m bridge subnet
    for _ in $(seq 20); do
        n=$((RANDOM % 250)) m=$((RANDOM % 50 + 200))
        bridge="eh${m}x${n}" subnet="10.$m.$n.0/24"
        ip link show "$bridge" >/dev/null 2>&1 || break
    done
    echo "$bridge $subnet" >"$dir/network"
    cat >"$dir/cni.d/10-edgehive.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "edgehive-$m-$n", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet"}]], "dataDir": "$dir/ipam"}},
  {"type": "loopback"}]}
JSON
    cat >"$dir/config.toml" <<TOML
version = 2
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "edgehive.local/pause:1"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni.d"
TOML
    containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
    echo $! >"$dir/containerd.pid"
    for _ in $(seq 200); do
        ctr --address "$sock" version >/dev/null 2>&1 && break
        if ! kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null; then break; fi
        sleep 0.1
    done
    if ! ctr --address "$sock" version >/dev/null 2>&1; then
        echo "containerd did not come up; its log ends with:" >&2
        tail -n 20 "$dir/containerd.log" >&2
        exit 1
    fi
    cp "$(command -v busybox)" "$dir/images/root/bin/busybox"
    for a in $("$dir/images/root/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$dir/images/root/bin/$a"
    done
    tar -C "$dir/images/root" -cf "$dir/images/layer.tar" .
    image busybox '"Cmd":["sh"]'
    image pause '"Entrypoint":["/bin/sleep","2147483647"]'
    echo "unix://$sock"
}

# Every descendant of $1, deepest first.
descendants() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do
        descendants "$c"
        echo "$c"
    done
}

# Kills and deletes every task of this containerd through it, each call
# bounded, while it answers.
delete_tasks() {
    local ns t
    timeout 2 ctr --address "$sock" version >/dev/null 2>&1 || return 0
    for ns in $(timeout 5 ctr --address "$sock" namespaces ls -q 2>/dev/null); do
        for t in $(timeout 5 ctr --address "$sock" -n "$ns" tasks ls -q 2>/dev/null); do
            timeout 5 ctr --address "$sock" -n "$ns" tasks kill -a -s KILL "$t" >/dev/null 2>&1 || true
        done
        for t in $(timeout 5 ctr --address "$sock" -n "$ns" tasks ls -q 2>/dev/null); do
            timeout 5 ctr --address "$sock" -n "$ns" tasks delete -f "$t" >/dev/null 2>&1 || true
        done
    done
}

stop() {
    local tasks="$dir/state/io.containerd.runtime.v2.task"
    # What a killed shim leaves outside DIR: noted before anything is killed.
    local bundles=() b
    for b in "$tasks"/*/*; do [ -d "$b" ] && bundles+=("$b"); done
    delete_tasks
    # The shims of this containerd (and the containers under them).
    local shims=() p
    for p in $(pgrep -f "containerd-shim.*-address $sock( |\$)" 2>/dev/null || true); do shims+=("$p"); done
    for p in "${shims[@]}"; do
        for c in $(descendants "$p"); do kill -KILL "$c" 2>/dev/null || true; done
    done
    if [ -f "$dir/containerd.pid" ]; then
        p=$(cat "$dir/containerd.pid")
        kill -TERM "$p" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    fi
    for p in "${shims[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    # (A bundle containerd deleted has nothing left but the CNI cache.)
    for b in "${bundles[@]}"; do
        local id ns addr root cg
        id=$(basename "$b") ns=$(basename "$(dirname "$b")")
        addr=$(cat "$b/address" 2>/dev/null || true)
        case "$addr" in unix:///run/containerd/s/*) rm -f "${addr#unix://}" ;; esac
        # runc's state: under DIR for the CRI's containers, in the default
        # root for those `ctr run` started (when its bundle is this one).
        for root in "$dir/runc/$ns" "/run/containerd/runc/$ns"; do
            if grep -qF "\"bundle=$b\"" "$root/$id/state.json" 2>/dev/null; then
                runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
            fi
        done
        cg=$(grep -o '"cgroupsPath":"[^"]*"' "$b/config.json" 2>/dev/null | cut -d'"' -f4 || true)
        if [ -n "$cg" ] && [ "${cg#/}" != "$cg" ]; then
            find /sys/fs/cgroup -depth -type d -path "*$cg" -exec rmdir {} + 2>/dev/null || true
        fi
        # The CNI plugins' cache of a pod's network (the CRI's ids are unique).
        if [[ "$id" =~ ^[0-9a-f]{64}$ ]]; then rm -f /var/lib/cni/results/*-"$id"-*; fi
    done
    if [ -f "$dir/network" ]; then
        read -r bridge subnet <"$dir/network"
        ip link del "$bridge" 2>/dev/null || true
    fi
    # Mounts the shims left (rootfs, shm, pod network namespaces), deepest first.
    awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
