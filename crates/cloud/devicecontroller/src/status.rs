//! What an edge reports of a device, and how it lands in the Device's
//! `status` (docs/devices.md, "Status").
//!
//! KubeEdge v1.15's edge sends two reports (`edge/pkg/devicetwin`):
//! - `device/{id}/twin/edge_updated`: `{"event_id","timestamp","twin":
//!   {name: {"expected":{"value","metadata":{"timestamp"}},"actual":{…},
//!   "metadata":{"type"}}}}`, as an object or as a JSON string;
//! - `device/{id}/state/update`: a JSON string of `{"event_id","timestamp",
//!   "device":{"name","state","last_online"}}`.
//!
//! A report's twins land in `status.twins[]` by `propertyName`: `actual`
//! becomes `reported`, `expected` becomes `observedDesired`, each with
//! `metadata` `timestamp` (milliseconds, as a string) and `type`, as
//! KubeEdge's upstream controller writes them. Twins for names the Device's
//! spec does not declare are ignored (KubeEdge does the same), and twins of
//! properties the spec no longer has are dropped from the status.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The longest twin name and value KubeEdge's edge accepts (dtcommon
/// `ValidateTwinKey` / `ValidateTwinValue`: 128 and 512 bytes).
pub const MAX_NAME: usize = 128;
/// See [`MAX_NAME`].
pub const MAX_VALUE: usize = 512;

/// One side (expected or actual) of a reported twin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Side {
    /// The value, as text.
    pub value: String,
    /// When the edge took it, in milliseconds.
    pub timestamp: Option<i64>,
}

/// What a report says of one twin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TwinReport {
    /// The reported (actual) value.
    pub actual: Option<Side>,
    /// The desired value the device has seen (expected).
    pub expected: Option<Side>,
    /// The twin's type (`metadata.type`).
    pub ty: Option<String>,
}

/// A device's reports since its status was last written, merged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pending {
    /// Twins by property name; a later report's side replaces an earlier one.
    pub twins: BTreeMap<String, TwinReport>,
    /// The device's state (`online`, `offline`, …).
    pub state: Option<String>,
    /// When the device was last seen online (the edge's text).
    pub last_online: Option<String>,
}

impl Pending {
    /// Folds a later report into this one.
    pub fn merge(&mut self, later: Pending) {
        for (name, t) in later.twins {
            let cur = self.twins.entry(name).or_default();
            if t.actual.is_some() {
                cur.actual = t.actual;
            }
            if t.expected.is_some() {
                cur.expected = t.expected;
            }
            if t.ty.is_some() {
                cur.ty = t.ty;
            }
        }
        if later.state.is_some() {
            self.state = later.state;
        }
        if later.last_online.is_some() {
            self.last_online = later.last_online;
        }
    }
}

/// What writing a [`Pending`] would change in a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Nothing at all.
    None,
    /// Only timestamps (the same values reported again).
    Timestamps,
    /// A value, a type or the state.
    Values,
}

#[derive(Deserialize)]
struct WireValue {
    value: Option<String>,
    metadata: Option<WireValueMeta>,
}

#[derive(Deserialize)]
struct WireValueMeta {
    timestamp: Option<i64>,
}

#[derive(Deserialize)]
struct WireTypeMeta {
    #[serde(rename = "type")]
    ty: Option<String>,
}

#[derive(Deserialize)]
struct WireTwin {
    expected: Option<WireValue>,
    actual: Option<WireValue>,
    metadata: Option<WireTypeMeta>,
}

#[derive(Deserialize)]
struct WireTwinUpdate {
    twin: Option<BTreeMap<String, Option<WireTwin>>>,
}

#[derive(Deserialize)]
struct WireDevice {
    state: Option<String>,
    last_online: Option<String>,
}

#[derive(Deserialize)]
struct WireStateUpdate {
    device: Option<WireDevice>,
    // A mapper publishing `$hw/events/device/{id}/state/update` sends
    // `{"state": …}`; the edge passes its own shape up, but accept both.
    state: Option<String>,
}

/// A report's body: an object, or a JSON string holding one (KubeEdge's
/// edge sends state reports as strings).
fn body(content: &Value) -> Result<Value, String> {
    match content {
        Value::String(s) => serde_json::from_str(s).map_err(|e| format!("report is not JSON: {e}")),
        Value::Object(_) => Ok(content.clone()),
        other => {
            Err(format!("report is neither an object nor a JSON string: {}", edgehive_model::json::type_name(other)))
        }
    }
}

fn side(v: Option<WireValue>, name: &str) -> Result<Option<Side>, String> {
    let Some(v) = v else { return Ok(None) };
    let Some(value) = v.value else { return Ok(None) };
    if value.len() > MAX_VALUE {
        return Err(format!("twin {name:?}: value longer than {MAX_VALUE} bytes"));
    }
    Ok(Some(Side { value, timestamp: v.metadata.and_then(|m| m.timestamp) }))
}

/// Reads an `edge_updated` report.
pub fn parse_twin_report(content: &Value) -> Result<Pending, String> {
    let update: WireTwinUpdate =
        serde_json::from_value(body(content)?).map_err(|e| format!("not a twin update: {e}"))?;
    let twins = update.twin.ok_or("twin update without \"twin\"")?;
    let mut out = Pending::default();
    for (name, t) in twins {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(format!("twin name {name:?} is empty or longer than {MAX_NAME} bytes"));
        }
        let Some(t) = t else { continue };
        let report = TwinReport {
            actual: side(t.actual, &name)?,
            expected: side(t.expected, &name)?,
            ty: t.metadata.and_then(|m| m.ty).filter(|t| !t.is_empty()),
        };
        out.twins.insert(name, report);
    }
    Ok(out)
}

/// Reads a `state/update` report.
pub fn parse_state_report(content: &Value) -> Result<Pending, String> {
    let update: WireStateUpdate =
        serde_json::from_value(body(content)?).map_err(|e| format!("not a state update: {e}"))?;
    let (state, last_online) = match update.device {
        Some(d) => (d.state, d.last_online),
        None => (update.state, None),
    };
    let state = state.filter(|s| !s.is_empty()).ok_or("state update without a state")?;
    if state.len() > MAX_NAME {
        return Err(format!("state longer than {MAX_NAME} bytes"));
    }
    Ok(Pending { twins: BTreeMap::new(), state: Some(state), last_online })
}

/// The most entries one `devices/reports` batch may hold (the edge sends
/// at most 256).
pub const MAX_BATCH: usize = 1024;

/// Reads a `devices/reports` batch: `{"devices": [{"id", "twin"?,
/// "state"?}]}`, `twin` and `state` being the bodies of the two KubeEdge
/// reports. The outer error refuses the whole message; an entry's error
/// refuses that entry alone (it names the device when it can).
#[allow(clippy::type_complexity)]
pub fn parse_batch(content: &Value) -> Result<Vec<Result<(String, Pending), String>>, String> {
    let body = body(content)?;
    let Some(devices) = body.get("devices").and_then(Value::as_array) else {
        return Err("batch without a \"devices\" list".into());
    };
    if devices.len() > MAX_BATCH {
        return Err(format!("batch of {} devices is over {MAX_BATCH}", devices.len()));
    }
    Ok(devices.iter().map(batch_entry).collect())
}

fn batch_entry(entry: &Value) -> Result<(String, Pending), String> {
    let id = match entry.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_NAME => id.clone(),
        Some(Value::String(id)) => return Err(format!("device id {id:?} is empty or longer than {MAX_NAME} bytes")),
        _ => return Err("batch entry without a device id".into()),
    };
    let (twin, state) = (entry.get("twin"), entry.get("state"));
    if twin.is_none() && state.is_none() {
        return Err(format!("device {id:?}: batch entry with neither a twin nor a state report"));
    }
    let mut pending = Pending::default();
    if let Some(t) = twin {
        pending.merge(parse_twin_report(t).map_err(|e| format!("device {id:?}: {e}"))?);
    }
    if let Some(s) = state {
        pending.merge(parse_state_report(s).map_err(|e| format!("device {id:?}: {e}"))?);
    }
    Ok((id, pending))
}

fn side_json(side: &Side, ty: Option<&str>) -> Value {
    let mut meta = Map::new();
    if let Some(ts) = side.timestamp {
        meta.insert("timestamp".into(), json!(ts.to_string()));
    }
    if let Some(ty) = ty {
        meta.insert("type".into(), json!(ty));
    }
    let mut v = json!({ "value": side.value });
    if !meta.is_empty() {
        v["metadata"] = Value::Object(meta);
    }
    v
}

/// How `new` differs from `old` (one `reported` / `observedDesired`).
fn compare(old: Option<&Value>, new: &Value) -> Change {
    match old {
        None => Change::Values,
        Some(o) if o == new => Change::None,
        Some(o)
            if o.get("value") == new.get("value") && o.pointer("/metadata/type") == new.pointer("/metadata/type") =>
        {
            Change::Timestamps
        }
        Some(_) => Change::Values,
    }
}

/// The status `pending` makes of `status` for a device whose spec declares
/// `properties`, and what that changes.
pub fn apply(status: &Value, properties: &[&str], pending: &Pending) -> (Value, Change) {
    let mut status = match status {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut change = Change::None;
    let old_twins: Vec<Value> = status.get("twins").and_then(Value::as_array).cloned().unwrap_or_default();
    let name_of = |t: &Value| t.get("propertyName").and_then(Value::as_str).map(str::to_owned);
    // Twins of properties the spec no longer declares are dropped.
    let mut twins: Vec<Value> =
        old_twins.iter().filter(|t| name_of(t).is_some_and(|n| properties.contains(&n.as_str()))).cloned().collect();
    if twins.len() != old_twins.len() {
        change = Change::Values;
    }
    for (name, report) in &pending.twins {
        if !properties.contains(&name.as_str()) {
            continue;
        }
        let at = match twins.iter().position(|t| name_of(t).as_deref() == Some(name)) {
            Some(i) => i,
            None => {
                twins.push(json!({ "propertyName": name }));
                change = change.max(Change::Values);
                twins.len() - 1
            }
        };
        let twin = &mut twins[at];
        for (field, side) in [("reported", &report.actual), ("observedDesired", &report.expected)] {
            let Some(side) = side else { continue };
            let new = side_json(side, report.ty.as_deref());
            change = change.max(compare(twin.get(field), &new));
            twin[field] = new;
        }
    }
    if !twins.is_empty() || status.contains_key("twins") {
        status.insert("twins".into(), Value::Array(twins));
    }
    if let Some(state) = &pending.state {
        if status.get("state").and_then(Value::as_str) != Some(state) {
            change = Change::Values;
        }
        status.insert("state".into(), json!(state));
    }
    if let Some(seen) = &pending.last_online {
        if status.get("lastOnlineTime").and_then(Value::as_str) != Some(seen) {
            change = change.max(Change::Timestamps);
        }
        status.insert("lastOnlineTime".into(), json!(seen));
    }
    (Value::Object(status), change)
}

/// The property names a Device's spec declares.
pub fn properties(device: &Value) -> Vec<&str> {
    device
        .pointer("/spec/properties")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(|p| p.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn report(name: &str, actual: &str, ts: i64) -> Pending {
        parse_twin_report(&json!({"event_id": "", "timestamp": ts, "twin": {
            name: {"actual": {"value": actual, "metadata": {"timestamp": ts}}, "metadata": {"type": "int"}}
        }}))
        .unwrap()
    }

    #[test]
    fn a_report_lands_in_the_status_as_kubeedge_writes_it() {
        let (status, change) = apply(&json!({}), &["temperature"], &report("temperature", "21", 1700));
        assert_eq!(change, Change::Values);
        assert_eq!(
            status,
            json!({"twins": [{"propertyName": "temperature",
                "reported": {"value": "21", "metadata": {"timestamp": "1700", "type": "int"}}}]})
        );
        // The same value later changes only timestamps; the same report nothing.
        let (again, change) = apply(&status, &["temperature"], &report("temperature", "21", 1800));
        assert_eq!(change, Change::Timestamps);
        assert_eq!(apply(&again, &["temperature"], &report("temperature", "21", 1800)).1, Change::None);
        assert_eq!(apply(&again, &["temperature"], &report("temperature", "22", 1800)).1, Change::Values);
    }

    #[test]
    fn undeclared_twins_are_ignored_and_removed_properties_dropped() {
        let (status, _) = apply(&json!({}), &["a", "b"], &report("a", "1", 1));
        let (status, change) = apply(&status, &["a", "b"], &report("zzz", "1", 1));
        assert_eq!(change, Change::None);
        assert_eq!(status["twins"].as_array().unwrap().len(), 1);
        let (status, change) = apply(&status, &["b"], &Pending::default());
        assert_eq!(change, Change::Values);
        assert_eq!(status["twins"], json!([]));
    }

    #[test]
    fn reports_merge_latest_side_wins() {
        let mut p = report("t", "1", 1);
        p.merge(report("t", "2", 2));
        p.merge(parse_state_report(&json!("{\"device\":{\"state\":\"online\",\"last_online\":\"x\"}}")).unwrap());
        assert_eq!(p.twins["t"].actual.as_ref().unwrap().value, "2");
        assert_eq!(p.state.as_deref(), Some("online"));
        let (status, _) = apply(&json!({}), &["t"], &p);
        assert_eq!(status["state"], "online");
        assert_eq!(status["lastOnlineTime"], "x");
    }

    #[test]
    fn bad_reports_are_refused_with_a_reason() {
        for (content, why) in [
            (json!("not json"), "not JSON"),
            (json!(7), "neither an object"),
            (json!({"event_id": ""}), "without \"twin\""),
            (json!({"twin": {"t": {"actual": {"value": 5}}}}), "not a twin update"),
            (json!({"twin": {"": {}}}), "empty"),
            (json!({"twin": {"t": {"actual": {"value": "x".repeat(MAX_VALUE + 1)}}}}), "longer than 512"),
        ] {
            let e = parse_twin_report(&content).unwrap_err();
            assert!(e.contains(why), "{content}: {e}");
        }
        assert!(parse_state_report(&json!({"device": {}})).unwrap_err().contains("without a state"));
    }

    #[test]
    fn a_batch_is_read_entry_by_entry_and_a_bad_entry_is_refused_alone() {
        let twin = json!({"event_id": "", "timestamp": 1, "twin": {"t": {"actual": {"value": "5"}}}});
        let entries = parse_batch(&json!({"devices": [
            {"id": "a", "twin": twin},
            {"id": "b", "state": {"device": {"state": "online"}}},
            {"id": "c", "twin": {"twin": {"t": {"actual": {"value": 5}}}}},
            {"id": "d"},
            {"twin": twin},
            {"id": "", "twin": twin},
            {"id": "e", "twin": twin, "state": "{\"state\":\"offline\"}"},
        ]}))
        .unwrap();
        assert_eq!(entries.len(), 7);
        let (id, a) = entries[0].as_ref().unwrap();
        assert_eq!((id.as_str(), a.twins["t"].actual.as_ref().unwrap().value.as_str()), ("a", "5"));
        assert_eq!(entries[1].as_ref().unwrap().1.state.as_deref(), Some("online"));
        assert!(entries[2].as_ref().unwrap_err().contains("device \"c\": not a twin update"));
        assert!(entries[3].as_ref().unwrap_err().contains("neither a twin nor a state"));
        assert!(entries[4].as_ref().unwrap_err().contains("without a device id"));
        assert!(entries[5].as_ref().unwrap_err().contains("empty"));
        let (_, e) = entries[6].as_ref().unwrap();
        assert_eq!((e.twins.len(), e.state.as_deref()), (1, Some("offline")));
        // The message as a whole: not a batch, or too big a one.
        assert!(parse_batch(&json!({"devices": {}})).unwrap_err().contains("without a \"devices\" list"));
        let many: Vec<Value> = (0..=MAX_BATCH).map(|i| json!({"id": format!("d{i}"), "twin": twin})).collect();
        assert!(parse_batch(&json!({ "devices": many })).unwrap_err().contains("over 1024"));
    }
}
