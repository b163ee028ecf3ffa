#!/usr/bin/env bash
# A device from kubectl to a simulated Modbus register and back, on the
# all-in-one: start scripts/allinone.sh in one shell, then this in another.
# It starts a simulated Modbus TCP device (`edgehive mapper simulate`) and
# the Modbus mapper (`edgehive mapper modbus`), which registers with the
# edge's DMI socket; applies a DeviceModel and a Device bound to edge-1;
# shows the register's value in `kubectl get device`; patches a desired
# value and shows the register taking it. Ctrl-C stops the two.
#
#   scripts/devices-demo.sh           # with the release build allinone.sh made
#   scripts/devices-demo.sh --debug   # with a debug build
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
[ "${1:-}" = "--debug" ] && profile=debug
bin="target/$profile/edgehive"
dir="${EDGEHIVE_ALLINONE_DIR:-$PWD/.edgehive-allinone}"
export KUBECONFIG="$dir/cloud/kubeconfig.yaml"
if [ ! -S "$dir/edge/dmi.sock" ]; then
    echo "no all-in-one edge at $dir: start scripts/allinone.sh first" >&2
    exit 1
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# The device: holding register 0 is a temperature in tenths of a degree
# (215 = 21.5), register 1 a set point the mapper writes.
"$bin" mapper simulate --listen 127.0.0.1:5020 --holding 0=215 >"$dir/simulator.log" 2>&1 &
pids+=($!)
"$bin" mapper modbus --dmi-sock "$dir/edge/dmi.sock" --sock "$dir/modbus-mapper.sock" >"$dir/mapper.log" 2>&1 &
pids+=($!)
echo "a simulated Modbus device on 127.0.0.1:5020 (log: $dir/simulator.log)"
echo "the Modbus mapper, registered with edge-1 (log: $dir/mapper.log)"

kubectl apply -f - <<'YAML'
apiVersion: devices.kubeedge.io/v1beta1
kind: DeviceModel
metadata: {name: thermostat, namespace: default}
spec:
  protocol: modbus
  properties:
  - {name: temperature, type: FLOAT, accessMode: ReadOnly}
  - {name: setpoint, type: FLOAT, accessMode: ReadWrite}
---
apiVersion: devices.kubeedge.io/v1beta1
kind: Device
metadata: {name: thermo, namespace: default}
spec:
  nodeName: edge-1
  deviceModelRef: {name: thermostat}
  protocol:
    protocolName: modbus
    configData: {ip: 127.0.0.1, port: 5020, slaveID: 1}
  properties:
  - name: temperature
    collectCycle: 500
    reportCycle: 500
    visitors: {protocolName: modbus, configData: {register: HoldingRegister, offset: 0, limit: 1, scale: 0.1}}
  - name: setpoint
    desired: {value: "20"}
    collectCycle: 500
    reportCycle: 500
    visitors: {protocolName: modbus, configData: {register: HoldingRegister, offset: 1, limit: 1, scale: 0.1}}
YAML

reported() {
    kubectl get device thermo -o jsonpath="{.status.twins[?(@.propertyName==\"$1\")].reported.value}" 2>/dev/null
}
wait_reported() { # property, value
    for _ in $(seq 300); do [ "$(reported "$1")" = "$2" ] && return 0; sleep 0.1; done
    echo "timed out waiting for $1=$2 in kubectl get device thermo" >&2; exit 1
}
wait_reported temperature 21.5
echo; echo "register 0 (215) reaches the cloud through edge-1, as the Device's status:"
kubectl get device thermo -o jsonpath='{range .status.twins[*]}{.propertyName}={.reported.value}{"\n"}{end}'

echo; echo "a new desired set point with kubectl (25.5):"
kubectl patch device thermo --type=json \
    -p '[{"op":"replace","path":"/spec/properties/1/desired/value","value":"25.5"}]'
written() { sed 's/\x1b\[[0-9;]*m//g' "$dir/simulator.log" | grep 'register=1 value=255'; }
for _ in $(seq 300); do written >/dev/null && break; sleep 0.1; done
echo "the mapper wrote it to register 1 of the device:"
written | tail -1
wait_reported setpoint 25.5
echo "and edge-1 reports it back: setpoint=$(reported setpoint)"

echo; echo "running; try: kubectl get device thermo -o yaml; Ctrl-C stops the device and the mapper"
wait
