#!/usr/bin/env bash
# Runs edgehive's whole test suite on a fresh machine: installs with apt what
# the tests need and is missing, then runs `cargo test` for the workspace.
#
#   scripts/test.sh            # everything
#   scripts/test.sh -p NAME    # extra arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use: Go and gorilla/websocket build a peer that
# talks like KubeEdge's EdgeHub (viaduct's go_peer test). etcd-server is
# the store's HA backend (its conformance suite and the
# kubectl end-to-end test run against a real etcd). containerd, runc,
# busybox-static and the CNI plugins: edged's CRI runtime tests start their
# own containerd (scripts/cri-dev.sh) with images built from busybox-static.
# python3-venv: the official Kubernetes Python client (from PyPI, below)
# is one of the clients the end-to-end tests drive. mosquitto and its
# clients: EventBus's external broker (KubeEdge's default mqttMode), and
# the plain MQTT clients the device tests speak KubeEdge's topics with.
# golang-google-grpc-dev: grpc-go, for a DMI mapper written the way
# KubeEdge's mapper framework writes one.
packages=(golang-go golang-github-gorilla-websocket-dev golang-google-grpc-dev etcd-server
          containerd runc busybox-static containernetworking-plugins iproute2
          python3-venv mosquitto mosquitto-clients)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The official Kubernetes Python client, in a virtual environment of its
# own under target/ (the tests find it through EDGEHIVE_TEST_PYTHON).
venv="target/test-python"
if ! "$venv/bin/python" -c 'import kubernetes' 2>/dev/null; then
    echo "installing the Kubernetes Python client into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "kubernetes==37.0.2"
fi
export EDGEHIVE_TEST_PYTHON="$PWD/$venv/bin/python"

# A one-off build gains nothing from incremental compilation and its cache
# doubles the disk the build takes; a developer iterating can set it to 1.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# --locked: test exactly the dependency versions in Cargo.lock.
exec cargo test --workspace --locked "$@"
