"""The official Kubernetes Python client against edgehive's API: a
CustomResourceDefinition round trip.

Usage: crds.py KUBECONFIG

Creates a definition with ApiextensionsV1Api, waits until it is
Established, then creates, reads, lists, patches (object and status) and
deletes a custom object with CustomObjectsApi, and deletes the definition;
prints one JSON object with what it saw.
"""
import json
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def main():
    config.load_kube_config(sys.argv[1])
    ext = client.ApiextensionsV1Api()
    objs = client.CustomObjectsApi()
    out = {}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "cronSpec": {"type": "string"},
                        "replicas": {"type": "integer", "default": 1}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}},
            }],
        },
    }
    ext.create_custom_resource_definition(crd)
    deadline = time.time() + 30
    while True:
        got = ext.read_custom_resource_definition("crontabs.stable.example.com")
        conds = {c.type: c.status for c in (got.status.conditions or [])}
        if conds.get("Established") == "True":
            break
        if time.time() > deadline:
            raise SystemExit("not established: %s" % conds)
        time.sleep(0.1)
    out["accepted"] = got.status.accepted_names.kind
    group, version, plural = "stable.example.com", "v1", "crontabs"
    created = objs.create_namespaced_custom_object(group, version, "default", plural, {
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c1"}, "spec": {"cronSpec": "* * * * */5", "unknown": 1}})
    out["defaulted"] = created["spec"].get("replicas")
    out["pruned"] = "unknown" not in created["spec"]
    out["listed"] = [i["metadata"]["name"] for i in
                     objs.list_namespaced_custom_object(group, version, "default", plural)["items"]]
    objs.patch_namespaced_custom_object(group, version, "default", plural, "c1", {"spec": {"replicas": 3}})
    objs.patch_namespaced_custom_object_status(group, version, "default", plural, "c1", {"status": {"phase": "Ok"}})
    got = objs.get_namespaced_custom_object(group, version, "default", plural, "c1")
    out["replicas"] = got["spec"]["replicas"]
    out["phase"] = got["status"]["phase"]
    try:
        objs.create_namespaced_custom_object(group, version, "default", plural, {
            "apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "c2"}, "spec": {"replicas": "three"}})
        out["invalid"] = None
    except ApiException as e:
        out["invalid"] = [e.status, json.loads(e.body)["reason"]]
    objs.delete_namespaced_custom_object(group, version, "default", plural, "c1")
    ext.delete_custom_resource_definition("crontabs.stable.example.com")
    deadline = time.time() + 30
    while True:
        try:
            ext.read_custom_resource_definition("crontabs.stable.example.com")
        except ApiException as e:
            if e.status == 404:
                break
            raise
        if time.time() > deadline:
            raise SystemExit("definition not deleted")
        time.sleep(0.1)
    out["deleted"] = True
    print(json.dumps(out))


main()
