"""The official Kubernetes Python client against edgehive's API: discovery
and a watch.

Usage: discovery.py KUBECONFIG

Lists the API groups and the core resources, then watches ConfigMaps in
`default` from a list's resourceVersion while it creates, changes and
deletes one; prints one JSON object with what it saw.
"""
import json
import sys
import threading

from kubernetes import client, config, watch


def main():
    config.load_kube_config(sys.argv[1])
    out = {}
    out["version"] = client.VersionApi().get_code().git_version
    groups = client.ApisApi().get_api_versions()
    out["groups"] = sorted(g.name for g in groups.groups)
    core = client.CoreV1Api()
    out["core"] = sorted(r.name for r in core.get_api_resources().resources)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    seen = []
    done = threading.Event()

    def run():
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_config_map, "default",
                           resource_version=rv, timeout_seconds=30,
                           field_selector="metadata.name=py-watched"):
            seen.append([ev["type"], (ev["object"].data or {}).get("k")])
            if ev["type"] == "DELETED":
                w.stop()
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-watched"), data={"k": "1"})
    core.create_namespaced_config_map("default", body)
    core.patch_namespaced_config_map("py-watched", "default", {"data": {"k": "2"}})
    core.delete_namespaced_config_map("py-watched", "default")
    done.wait(30)
    out["watched"] = seen
    print(json.dumps(out))


if __name__ == "__main__":
    main()
