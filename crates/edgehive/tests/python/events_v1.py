"""The official Kubernetes Python client reads Events through
events.k8s.io/v1 (EventsV1Api, typed models): one created there and one
created as a core/v1 Event, both in the namespace given.

Usage: events_v1.py KUBECONFIG NAMESPACE

Prints one JSON list of [name, note, regarding.name, reportingController],
sorted by name.
"""
import json
import sys

from kubernetes import client, config


def main():
    config.load_kube_config(sys.argv[1])
    events = client.EventsV1Api().list_namespaced_event(sys.argv[2])
    out = sorted(
        [e.metadata.name, e.note, e.regarding.name if e.regarding else None, e.reporting_controller]
        for e in events.items
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
