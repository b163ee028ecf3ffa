"""The official Kubernetes Python client reads what edgehive keeps for
Services: the `kubernetes` Service, its Endpoints (core/v1) and its
EndpointSlices (discovery.k8s.io/v1, read through the client's typed
models, which fail on a field of the wrong shape).

Usage: services.py KUBECONFIG

Prints one JSON object with what it read.
"""
import json
import sys

from kubernetes import client, config


def main():
    config.load_kube_config(sys.argv[1])
    core = client.CoreV1Api()
    out = {}
    svc = core.read_namespaced_service("kubernetes", "default")
    out["clusterIP"] = svc.spec.cluster_ip
    ep = core.read_namespaced_endpoints("kubernetes", "default")
    out["endpoints"] = [
        [a.ip for a in s.addresses or []] + [p.port for p in s.ports or []]
        for s in ep.subsets or []
    ]
    slices = client.DiscoveryV1Api().list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes")
    out["slices"] = [
        {"addressType": s.address_type,
         "ready": [e.conditions.ready for e in s.endpoints or []],
         "ports": [p.port for p in s.ports or []]}
        for s in slices.items
    ]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
