//! Conversions between the versions of a kind that share one storage: the
//! form the store keeps and the form of another served version.
//!
//! The one built-in case is events.k8s.io/v1 Event, which kube-apiserver
//! stores as a core Event (`/registry/events`) and converts on the way in
//! and out (`pkg/apis/events/v1/conversion.go`): a renaming of fields, no
//! value changes. The renames are total and one-to-one, so a round trip in
//! either direction gives back the same object. Fields that are absent stay
//! absent (Go would print some of them as `null` or `{}`).

use serde_json::{Map, Value};

/// events.k8s.io/v1 field → core/v1 field; the others have the same name in both (`eventTime`, `series`,
/// `reason`, `action`, `type`, `related`, `reportingInstance`, `metadata`).
const EVENT_V1_TO_CORE: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    // The internal `ReportingController` is `reportingComponent` in core/v1's JSON.
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// An events.k8s.io/v1 Event in its core/v1 form (`Convert_v1_Event_To_core_Event`).
pub fn event_v1_to_core(obj: Value) -> Value {
    rename(obj, "v1", EVENT_V1_TO_CORE.iter().map(|(v1, core)| (*v1, *core)))
}

/// A core/v1 Event in its events.k8s.io/v1 form (`Convert_core_Event_To_v1_Event`).
pub fn event_core_to_v1(obj: Value) -> Value {
    rename(obj, "events.k8s.io/v1", EVENT_V1_TO_CORE.iter().map(|(v1, core)| (*core, *v1)))
}

/// `obj` with `apiVersion` set and each `from` key renamed to `to` (the store puts `apiVersion`, `kind`
/// and `metadata` first when it encodes). A value that is not an object is given back as it is: the
/// caller's decode check reports it.
fn rename<'a>(obj: Value, api_version: &str, renames: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Value {
    let Value::Object(map) = obj else { return obj };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        // A target name already in the input (a core field sent to v1, say) is dropped: it is not a
        // field of the input's version, and the renamed field owns that name in the output.
        if renames.clone().any(|(_, to)| to == k) {
            continue;
        }
        let key = renames.clone().find(|(from, _)| *from == k).map_or(k, |(_, to)| to.to_string());
        out.insert(key, v);
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1_event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default", "resourceVersion": "7"},
            "eventTime": "2026-11-25T07:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-25T07:01:00.000000Z"},
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-1",
            "action": "Scale",
            "reason": "ScalingUp",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1",
                          "apiVersion": "apps/v1", "resourceVersion": "3", "fieldPath": "spec"},
            "related": {"kind": "ReplicaSet", "namespace": "default", "name": "web-1"},
            "note": "scaled up",
            "type": "Normal",
            "deprecatedSource": {"component": "kubelet", "host": "edge-1"},
            "deprecatedFirstTimestamp": "2026-11-25T06:00:00Z",
            "deprecatedLastTimestamp": "2026-11-25T06:30:00Z",
            "deprecatedCount": 3,
        })
    }

    #[test]
    fn every_v1_field_has_its_core_name() {
        let core = event_v1_to_core(v1_event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["kind"], "Event");
        assert_eq!(core["metadata"]["name"], "web.1");
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["involvedObject"]["fieldPath"], "spec");
        assert_eq!(core["related"]["name"], "web-1");
        assert_eq!(core["message"], "scaled up");
        assert_eq!(core["reportingComponent"], "example.com/controller");
        assert_eq!(core["reportingInstance"], "controller-1");
        assert_eq!(core["source"], json!({"component": "kubelet", "host": "edge-1"}));
        assert_eq!(core["firstTimestamp"], "2026-11-25T06:00:00Z");
        assert_eq!(core["lastTimestamp"], "2026-11-25T06:30:00Z");
        assert_eq!(core["count"], 3);
        assert_eq!(core["eventTime"], "2026-11-25T07:00:00.000000Z");
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(
            (core["action"].as_str(), core["reason"].as_str(), core["type"].as_str()),
            (Some("Scale"), Some("ScalingUp"), Some("Normal"))
        );
        for v1_only in [
            "regarding",
            "note",
            "reportingController",
            "deprecatedSource",
            "deprecatedCount",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
        ] {
            assert!(core.get(v1_only).is_none(), "{v1_only} left in {core}");
        }
    }

    #[test]
    fn round_trips_give_back_the_same_object() {
        let v1 = v1_event();
        assert_eq!(event_core_to_v1(event_v1_to_core(v1.clone())), v1);
        let core = json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"}, "reason": "Started",
            "message": "Started container", "source": {"component": "kubelet", "host": "edge-1"},
            "firstTimestamp": "2026-11-25T06:00:00Z", "lastTimestamp": "2026-11-25T06:00:00Z", "count": 1,
            "type": "Normal", "eventTime": null, "reportingComponent": "kubelet", "reportingInstance": "edge-1",
        });
        let v1 = event_core_to_v1(core.clone());
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["deprecatedSource"]["host"], "edge-1");
        assert_eq!(v1["reportingController"], "kubelet");
        assert_eq!(v1["note"], "Started container");
        assert_eq!(v1["deprecatedCount"], 1);
        assert!(v1["eventTime"].is_null());
        assert_eq!(event_v1_to_core(v1), core);
    }

    fn create_errors(obj: &Value) -> Vec<String> {
        crate::validation::validate_create("events.k8s.io", "Event", obj).iter().map(|e| e.message()).collect()
    }

    #[test]
    fn events_k8s_io_creates_are_validated_strictly_with_core_paths() {
        let mut ev = v1_event();
        for deprecated in ["deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"]
        {
            ev.as_object_mut().map(|m| m.remove(deprecated));
        }
        assert_eq!(create_errors(&ev), Vec::<String>::new());
        // No eventTime: the legacy rules of an old event, then eventTime required.
        let mut no_time = ev.clone();
        no_time.as_object_mut().map(|m| m.remove("eventTime"));
        assert_eq!(create_errors(&no_time), ["eventTime: Required value"]);
        let mut bad = ev.clone();
        bad.as_object_mut().map(|m| m.remove("reportingController"));
        bad["note"] = json!("x".repeat(1025));
        bad["type"] = json!("Fatal");
        bad["series"] = json!({"count": 1});
        bad["deprecatedCount"] = json!(2);
        bad["deprecatedSource"] = json!({"host": "h"});
        bad["deprecatedLastTimestamp"] = json!("2026-11-25T06:30:00Z");
        assert_eq!(
            create_errors(&bad),
            [
                "reportingController: Required value",
                // IsQualifiedName("") adds its own two, as in Kubernetes.
                "reportingController: Invalid value: \"\": name part must be non-empty",
                "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', \
                 '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  \
                 or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "message: Invalid value: \"\": can have at most 1024 characters",
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value",
                "type: Invalid value: \"\": has invalid value: Fatal",
                "lastTimestamp: Invalid value: \"\": needs to be unset",
                "count: Invalid value: \"\": needs to be unset",
                "source: Invalid value: \"\": needs to be unset",
            ]
        );
        // A core field is not an events.k8s.io/v1 field: the decode check's strictness is the API
        // server's; here it is simply not read.
        let mut core_names = ev.clone();
        core_names["message"] = json!("x".repeat(2000));
        assert_eq!(create_errors(&core_names), Vec::<String>::new());
    }

    #[test]
    fn a_field_of_the_other_version_does_not_pass_through() {
        // `message` is not an events.k8s.io/v1 field: `note` alone becomes the core `message`.
        let core = event_v1_to_core(json!({"metadata": {}, "note": "n", "message": "smuggled"}));
        assert_eq!(core["message"], "n");
        let core = event_v1_to_core(json!({"metadata": {}, "message": "smuggled"}));
        assert!(core.get("message").is_none());
        assert_eq!(event_v1_to_core(json!("not an object")), json!("not an object"));
    }
}
