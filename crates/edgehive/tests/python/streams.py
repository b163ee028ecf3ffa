"""The official Kubernetes Python client against edgehive's streams.

Usage: streams.py KUBECONFIG POD PORT

Reads the pod's log, runs a command in it, and fetches /hello.txt from an
HTTP server on PORT in the pod through a port-forward; reads the pod's
metrics (metrics.k8s.io) and its node's /healthz through nodes/proxy;
prints what each returned as one JSON object.
"""
import json
import sys

from kubernetes import client, config
from kubernetes.stream import portforward, stream


def main():
    kubeconfig, pod, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config.load_kube_config(kubeconfig)
    api = client.CoreV1Api()
    out = {}
    out["log"] = api.read_namespaced_pod_log(pod, "default", tail_lines=1)
    ex = stream(api.connect_get_namespaced_pod_exec, pod, "default",
                command=["sh", "-c", "echo $X; exit 4"], stderr=True, stdin=False,
                stdout=True, tty=False, _preload_content=False)
    ex.run_forever(timeout=30)
    out["exec"] = ex.read_stdout()
    out["exec_code"] = ex.returncode
    pf = portforward(api.connect_get_namespaced_pod_portforward, pod, "default", ports=str(port))
    sock = pf.socket(port)
    sock.setblocking(True)
    sock.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: pod\r\n\r\n")
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    out["forward"] = data.decode("utf-8", "replace")
    out["forward_error"] = pf.error(port)
    # A port nothing listens on: the port's error channel says why.
    pf = portforward(api.connect_get_namespaced_pod_portforward, pod, "default", ports="1")
    sock = pf.socket(1)
    sock.setblocking(True)
    while sock.recv(65536):
        pass
    out["closed_port_error"] = pf.error(1)
    metrics = client.CustomObjectsApi().get_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", "default", "pods", pod)
    out["metrics_containers"] = [c["name"] for c in metrics["containers"]]
    node = api.read_namespaced_pod(pod, "default").spec.node_name
    out["node_healthz"] = api.connect_get_node_proxy_with_path(node, "healthz")
    print(json.dumps(out))


main()
