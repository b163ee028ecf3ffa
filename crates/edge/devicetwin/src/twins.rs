//! The devices of this node and what happens to them: the cloud's Devices
//! and membership, and the `$hw/events/...` requests of mappers and apps.
//! Pure: every operation returns an [`Outcome`] (what to publish, what to
//! report to the cloud, which devices to write), which the module carries
//! out.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::types::{
    BaseMessage, Device, DeviceMsg, DeviceTwinUpdate, ErrorResult, MembershipGetResult, MembershipUpdate, MsgTwin,
    StateUpdate, TwinDelta, TwinDoc, TwinDocument, TwinResult, TwinValue, TwinVersion, TypeMetadata, ValueMetadata,
    valid_twin_key, valid_twin_value,
};

/// Topic prefixes and suffixes (KubeEdge `dtcommon`).
pub const DEVICE_PREFIX: &str = "$hw/events/device/";
/// See [`DEVICE_PREFIX`].
pub const NODE_PREFIX: &str = "$hw/events/node/";

/// The most twins one device may have (KubeEdge sets none; a mapper or app
/// adding twins without end would grow the tables without end).
pub const MAX_TWINS: usize = 1024;

/// KubeEdge's `ValidateValue`: whether `value` is a `ty` (KubeEdge's twin
/// types, and the DeviceModel's lowercased property types).
fn check_value(ty: &str, value: &str) -> Result<(), &'static str> {
    match ty {
        "" | "string" | "bytes" | "stream" | "deleted" => Ok(()),
        "int" | "integer" => value.parse::<i64>().map(|_| ()).map_err(|_| "the value is not int or integer"),
        "float" | "double" => value.parse::<f64>().map(|_| ()).map_err(|_| "the value is not float"),
        "boolean" => {
            if value == "true" || value == "false" {
                Ok(())
            } else {
                Err("the bool value must be true or false")
            }
        }
        _ => Err("the value type is not allowed"),
    }
}

/// The device states KubeEdge's edge takes (`mappers-go` constants).
const STATES: [&str; 5] = ["online", "offline", "ok", "unknown", "disconnected"];

/// One device: its row, attributes and twins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// Its id: the Device's name.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its state.
    pub state: String,
    /// When it was last online.
    pub last_online: String,
    /// Attributes.
    pub attributes: BTreeMap<String, crate::types::MsgAttr>,
    /// Twins.
    pub twins: crate::smallmap::SmallMap<MsgTwin>,
}

impl DeviceState {
    fn summary(&self) -> Device {
        Device {
            id: self.id.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            state: self.state.clone(),
            last_online: self.last_online.clone(),
            attributes: (!self.attributes.is_empty()).then(|| self.attributes.clone()),
            twin: None,
        }
    }
}

/// What an operation asks of the module.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// MQTT publishes: topic and payload.
    pub publish: Vec<(String, String)>,
    /// Twins to report to the cloud, by device (merged with earlier ones).
    pub report: Vec<(String, BTreeMap<String, MsgTwin>)>,
    /// State reports to the cloud: device id and payload.
    pub state: Vec<(String, String)>,
    /// Devices whose rows changed.
    pub dirty: Vec<String>,
    /// Devices that are gone.
    pub removed: Vec<String>,
    /// Why a request was refused (for the log), if it was.
    pub refused: Option<String>,
}

impl Outcome {
    fn publish(&mut self, topic: String, payload: &impl serde::Serialize) {
        if let Ok(p) = serde_json::to_string(payload) {
            self.publish.push((topic, p));
        }
    }

    fn error(mut self, topic: String, event_id: &str, code: u16, reason: String) -> Outcome {
        self.publish(topic, &ErrorResult { base: BaseMessage::now(event_id), code, reason: reason.clone() });
        self.refused = Some(reason);
        self
    }
}

/// Whether the update `t` changes the twin `cur` beyond timestamps (as
/// the update in `twin_update` applies it).
fn changes(cur: &MsgTwin, t: &MsgTwin) -> bool {
    let cloud_owned = cur.expected_version.is_some_and(|v| v.cloud > 0);
    t.actual_value().is_some_and(|v| cur.actual_value() != Some(v))
        || (!cloud_owned
            && t.expected_value().filter(|v| !v.is_empty()).is_some_and(|v| cur.expected_value() != Some(v)))
        || t.metadata.as_ref().filter(|m| !m.ty.is_empty()).is_some_and(|m| cur.metadata.as_ref() != Some(m))
        || t.optional.is_some_and(|o| cur.optional != Some(o))
}

fn value_now(value: &str) -> TwinValue {
    TwinValue {
        value: Some(value.to_owned()),
        metadata: Some(ValueMetadata { timestamp: edgehive_model::now_millis() }),
    }
}

/// KubeEdge's `last_online` text (`2006-01-02 15:04:05`), in UTC.
fn last_online_now() -> String {
    edgehive_model::timestamp::date_time(time::OffsetDateTime::now_utc(), ' ')
}

/// The devices of one node.
#[derive(Debug, Default)]
pub struct Twins {
    node: String,
    devices: BTreeMap<String, DeviceState>,
    /// Whether answers to updates are built: not when no EventBus runs
    /// (a DMI mapper's reports, a thousand a second, are answered to no
    /// one).
    answering: bool,
}

impl Twins {
    /// The devices of `node`, as loaded from its tables.
    pub fn new(node: &str, devices: BTreeMap<String, DeviceState>) -> Twins {
        Twins { node: node.to_owned(), devices, answering: true }
    }

    /// Whether updates are answered (`update/result`, `document`, `delta`,
    /// `state/update/result`): only when someone can hear it (EventBus
    /// runs). Other answers and refusals are built either way.
    pub fn set_answering(&mut self, on: bool) {
        self.answering = on;
    }

    /// A device.
    pub fn get(&self, id: &str) -> Option<&DeviceState> {
        self.devices.get(id)
    }

    /// The devices' ids.
    pub fn ids(&self) -> Vec<String> {
        self.devices.keys().cloned().collect()
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Every device's twins that have an actual value, and its state: what
    /// a reconnected edge reports again.
    pub fn all_reports(&self) -> Outcome {
        let mut out = Outcome::default();
        for d in self.devices.values() {
            let twins: BTreeMap<String, MsgTwin> = d
                .twins
                .iter()
                .filter(|(_, t)| t.actual_value().is_some())
                .map(|(k, t)| (k.clone(), t.shown()))
                .collect();
            if !twins.is_empty() {
                out.report.push((d.id.clone(), twins));
            }
            if !d.state.is_empty() {
                let msg = state_msg(d);
                out.state.push((d.id.clone(), serde_json::to_string(&msg).unwrap_or_default()));
            }
        }
        out
    }

    fn membership_topic(&self) -> String {
        format!("{NODE_PREFIX}{}/membership/updated", self.node)
    }

    /// A Device from the cloud (inserted or updated), with its model: the
    /// device exists, its twins' expected values are the properties'
    /// desired values. A changed expected value that the actual one does
    /// not match yet is published as a delta.
    pub fn apply_device(&mut self, device: &Value, model: Option<&Value>) -> Outcome {
        let mut out = Outcome::default();
        let Some(name) = device.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            out.refused = Some("device without a name".into());
            return out;
        };
        let id = name.to_owned();
        let added = !self.devices.contains_key(&id);
        let d = self.devices.entry(id.clone()).or_insert_with(|| DeviceState {
            id: id.clone(),
            name: id.clone(),
            ..DeviceState::default()
        });
        d.description =
            device.pointer("/metadata/labels/description").and_then(Value::as_str).unwrap_or_default().to_owned();
        let model_type = |prop: &str| -> Option<String> {
            model?
                .pointer("/spec/properties")?
                .as_array()?
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(prop))?
                .get("type")?
                .as_str()
                .map(str::to_ascii_lowercase)
        };
        let props = device.pointer("/spec/properties").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut declared = Vec::new();
        let mut expected_changed = false;
        for p in &props {
            let Some(pname) = p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
            declared.push(pname.to_owned());
            let desired = p.pointer("/desired/value").and_then(Value::as_str);
            let twin = d.twins.get_or_insert_with(pname, MsgTwin::default);
            if let Some(ty) = model_type(pname) {
                twin.metadata = Some(TypeMetadata { ty });
            }
            twin.optional.get_or_insert(false);
            if let Some(v) = desired
                && twin.expected_value() != Some(v)
            {
                twin.expected = Some(value_now(v));
                let ver = twin.expected_version.get_or_insert_with(TwinVersion::default);
                ver.cloud += 1;
                expected_changed = true;
            }
        }
        // Twins the cloud declared before and no longer does are removed;
        // ones a mapper added at the edge stay.
        let before = d.twins.len();
        d.twins.retain(|k, t| declared.contains(k) || t.expected_version.is_none_or(|v| v.cloud == 0));
        let removed_twins = before != d.twins.len();
        out.dirty.push(id.clone());
        if added {
            let m = MembershipUpdate {
                base: BaseMessage::now(""),
                added_devices: Some(vec![d.summary()]),
                removed_devices: Some(vec![]),
            };
            out.publish(self.membership_topic(), &m);
        }
        if expected_changed || removed_twins {
            let d = &self.devices[&id];
            if let Some(delta) = delta_of(d) {
                out.publish(format!("{DEVICE_PREFIX}{id}/twin/update/delta"), &delta);
            }
        }
        out
    }

    /// A device that is no longer this node's.
    pub fn remove_device(&mut self, id: &str) -> Outcome {
        let mut out = Outcome::default();
        if let Some(d) = self.devices.remove(id) {
            let m = MembershipUpdate {
                base: BaseMessage::now(""),
                added_devices: Some(vec![]),
                removed_devices: Some(vec![d.summary()]),
            };
            out.publish(self.membership_topic(), &m);
            out.removed.push(id.to_owned());
        }
        out
    }

    /// The cloud's membership update: devices added (known from now on,
    /// their twins come with the Device) and removed.
    pub fn membership(&mut self, update: &MembershipUpdate) -> Outcome {
        let mut out = Outcome::default();
        let mut added = Vec::new();
        for dev in update.added_devices.iter().flatten() {
            let id = if dev.id.is_empty() { &dev.name } else { &dev.id };
            if id.is_empty() || self.devices.contains_key(id) {
                continue;
            }
            let d = DeviceState {
                id: id.clone(),
                name: if dev.name.is_empty() { id.clone() } else { dev.name.clone() },
                description: dev.description.clone(),
                ..DeviceState::default()
            };
            added.push(d.summary());
            out.dirty.push(id.clone());
            self.devices.insert(id.clone(), d);
        }
        let mut removed = Vec::new();
        for dev in update.removed_devices.iter().flatten() {
            let id = if dev.id.is_empty() { &dev.name } else { &dev.id };
            if let Some(d) = self.devices.remove(id) {
                removed.push(d.summary());
                out.removed.push(id.clone());
            }
        }
        if !added.is_empty() || !removed.is_empty() {
            let m = MembershipUpdate {
                base: update.base.clone(),
                added_devices: Some(added),
                removed_devices: Some(removed),
            };
            out.publish(self.membership_topic(), &m);
        }
        out
    }

    /// A message on a `$hw/events/...` topic (from MQTT or a DMI mapper).
    pub fn on_topic(&mut self, topic: &str, payload: &str) -> Outcome {
        if let Some(rest) = topic.strip_prefix(NODE_PREFIX) {
            return match rest.split_once('/') {
                Some((node, "membership/get")) if node == self.node => self.membership_get(payload),
                Some((node, "membership/get")) => Outcome {
                    refused: Some(format!("membership of node {node:?} asked of node {:?}", self.node)),
                    ..Outcome::default()
                },
                _ => Outcome { refused: Some(format!("topic {topic:?} is not served")), ..Outcome::default() },
            };
        }
        let Some(rest) = topic.strip_prefix(DEVICE_PREFIX) else {
            return Outcome { refused: Some(format!("topic {topic:?} is not served")), ..Outcome::default() };
        };
        let Some((id, action)) = rest.split_once('/') else {
            return Outcome { refused: Some(format!("topic {topic:?} names no action")), ..Outcome::default() };
        };
        match action {
            "twin/update" => self.twin_update(id, payload),
            "twin/get" => self.twin_get(id, payload),
            "state/update" => self.state_update(id, payload),
            // Results and the cloud's sync topics are what DeviceTwin sends.
            _ => Outcome::default(),
        }
    }

    fn membership_get(&self, payload: &str) -> Outcome {
        let topic = format!("{NODE_PREFIX}{}/membership/get/result", self.node);
        let base: BaseMessage = match serde_json::from_str(payload) {
            Ok(b) => b,
            Err(e) => {
                let reason = format!("Unmarshal get membership info {payload} failed , err: {e}");
                return Outcome::default().error(topic, "", 400, reason);
            }
        };
        let mut out = Outcome::default();
        let devices = self.devices.values().map(DeviceState::summary).collect();
        out.publish(topic, &MembershipGetResult { base: BaseMessage::now(&base.event_id), devices });
        out
    }

    fn twin_get(&self, id: &str, payload: &str) -> Outcome {
        let topic = format!("{DEVICE_PREFIX}{id}/twin/get/result");
        let base: BaseMessage = match serde_json::from_str(payload) {
            Ok(b) => b,
            Err(e) => {
                return Outcome::default().error(
                    topic,
                    "",
                    400,
                    format!("Unmarshal twin info {payload} failed , err: {e}"),
                );
            }
        };
        let Some(d) = self.devices.get(id) else {
            let reason = format!("Device {id} not found while getting twin");
            return Outcome::default().error(topic, &base.event_id, 404, reason);
        };
        let mut out = Outcome::default();
        let twin = d.twins.iter().filter(|(_, t)| !deleted(t)).map(|(k, t)| (k.clone(), t.shown())).collect();
        out.publish(topic, &TwinResult { base: BaseMessage::now(&base.event_id), twin });
        out
    }

    fn twin_update(&mut self, id: &str, payload: &str) -> Outcome {
        // Built when an answer is: most updates are answered to no one.
        let topic = || format!("{DEVICE_PREFIX}{id}/twin/update/result");
        let update: DeviceTwinUpdate = match serde_json::from_str(payload) {
            Ok(u) => u,
            Err(_) => {
                let reason = "Unmarshal update request body failed, please check the request".to_owned();
                return Outcome::default().error(topic(), "", 400, reason);
            }
        };
        let event = update.base.event_id.clone();
        let Some(d) = self.devices.get_mut(id) else {
            let reason = "update rejected due to the device is not existed".to_owned();
            return Outcome::default().error(topic(), &event, 404, reason);
        };
        let Some(twins) = update.twin else {
            return Outcome::default().error(topic(), &event, 400, "Update twin error, key:twin does not exist".into());
        };
        for (key, t) in &twins {
            if !valid_twin_key(key) {
                return Outcome::default().error(topic(), &event, 400, "The key of twin must only include upper or lowercase letters, number, english, and special letter - _ . , : / @ # and the length of key should be less than 128 bytes".into());
            }
            let bad = t.as_ref().is_some_and(|t| {
                [t.expected_value(), t.actual_value()].into_iter().flatten().any(|v| !valid_twin_value(v))
            });
            if bad {
                return Outcome::default().error(topic(), &event, 400, "The value of twin must only include upper or lowercase letters, number, english, and special letter - _ . , : / @ # and the length of value should be less than 512 bytes".into());
            }
        }
        let added = twins.iter().filter(|(k, t)| t.is_some() && !d.twins.contains_key(k)).count();
        if d.twins.len() + added > MAX_TWINS {
            let reason = format!("update rejected: a device has at most {MAX_TWINS} twins");
            return Outcome::default().error(topic(), &event, 400, reason);
        }
        for (key, t) in &twins {
            let Some(t) = t else { continue };
            let ty = t
                .metadata
                .as_ref()
                .map(|m| m.ty.as_str())
                .filter(|ty| !ty.is_empty())
                .or_else(|| d.twins.get(key).and_then(|c| c.metadata.as_ref()).map(|m| m.ty.as_str()))
                .unwrap_or_default();
            let values = [t.expected_value(), t.actual_value()];
            if let Some(why) =
                values.into_iter().flatten().filter(|v| !v.is_empty()).find_map(|v| check_value(ty, v).err())
            {
                return Outcome::default().error(topic(), &event, 400, why.to_owned());
            }
        }
        let answering = self.answering;
        let mut out = Outcome::default();
        let mut result = BTreeMap::new();
        let mut docs = BTreeMap::new();
        let mut report = BTreeMap::new();
        let mut expected_changed = false;
        for (key, t) in twins {
            let Some(t) = t else {
                // `null` deletes the twin.
                if let Some(last) = d.twins.remove(&key) {
                    docs.insert(key.clone(), TwinDoc { last: Some(last.shown()), current: None });
                }
                continue;
            };
            // The twin before, kept only when this update changes it: a
            // mapper polling a steady device changes only timestamps.
            let (new, last) = match d.twins.get(&key) {
                None => (true, None),
                Some(cur) => (false, changes(cur, &t).then(|| cur.clone())),
            };
            let cur = d.twins.get_or_insert_with(&key, || MsgTwin { optional: Some(true), ..MsgTwin::default() });
            let mut changed = false;
            if let Some(v) = t.actual_value() {
                if cur.actual_value() != Some(v) {
                    cur.actual_version.get_or_insert_with(TwinVersion::default).edge += 1;
                    changed = true;
                }
                match &mut cur.actual {
                    // The same value: only its time moves.
                    Some(a) if a.value.as_deref() == Some(v) => {
                        a.metadata = Some(ValueMetadata { timestamp: edgehive_model::now_millis() });
                    }
                    _ => cur.actual = Some(value_now(v)),
                }
            }
            // An empty expected value is none (a DMI mapper reports an
            // empty `observedDesired` for a property without a desired
            // value), and one the cloud set is the cloud's: a mapper's stale
            // `observedDesired` must not undo a newer desired value.
            let cloud_owned = cur.expected_version.is_some_and(|v| v.cloud > 0);
            if let Some(v) = t.expected_value().filter(|v| !v.is_empty())
                && !cloud_owned
                && cur.expected_value() != Some(v)
            {
                cur.expected = Some(value_now(v));
                cur.expected_version.get_or_insert_with(TwinVersion::default).edge += 1;
                expected_changed = true;
                changed = true;
            }
            if let Some(m) = t.metadata.as_ref().filter(|m| !m.ty.is_empty()) {
                changed |= cur.metadata.as_ref() != Some(m);
                cur.metadata = Some(m.clone());
            }
            if let Some(o) = t.optional {
                changed |= cur.optional != Some(o);
                cur.optional = Some(o);
            }
            if answering {
                result.insert(key.clone(), cur.shown());
            }
            debug_assert!(new || changed == last.is_some(), "changes() and the update disagree on {key}");
            if changed || new {
                docs.insert(key.clone(), TwinDoc { last: last.map(|l| l.shown()), current: Some(cur.shown()) });
                report.insert(key, cur.shown());
            }
        }
        // The same values again (a mapper polling a steady device) change
        // only timestamps: the row is not rewritten for them.
        if !docs.is_empty() {
            out.dirty.push(id.to_owned());
        }
        if answering {
            out.publish(topic(), &TwinResult { base: BaseMessage::now(&event), twin: result });
            if !docs.is_empty() {
                out.publish(
                    format!("{DEVICE_PREFIX}{id}/twin/update/document"),
                    &TwinDocument { base: BaseMessage::now(&event), twin: docs },
                );
            }
            if (expected_changed || !report.is_empty())
                && let Some(delta) = delta_of(d)
            {
                out.publish(format!("{DEVICE_PREFIX}{id}/twin/update/delta"), &delta);
            }
        }
        if !report.is_empty() {
            out.report.push((id.to_owned(), report));
        }
        out
    }

    fn state_update(&mut self, id: &str, payload: &str) -> Outcome {
        let Ok(update) = serde_json::from_str::<StateUpdate>(payload) else {
            return Outcome { refused: Some(format!("state update of {id:?} is not JSON")), ..Outcome::default() };
        };
        let Some(d) = self.devices.get_mut(id) else {
            return Outcome { refused: Some(format!("state update of unknown device {id:?}")), ..Outcome::default() };
        };
        let state = update.state.to_ascii_lowercase();
        if !STATES.contains(&state.as_str()) {
            return Outcome {
                refused: Some(format!("state {:?} of {id:?} is not one of {STATES:?}", update.state)),
                ..Outcome::default()
            };
        }
        d.state = update.state.clone();
        d.last_online = last_online_now();
        let msg = state_msg(d);
        let mut out = Outcome::default();
        out.dirty.push(id.to_owned());
        if self.answering {
            out.publish(format!("{DEVICE_PREFIX}{id}/state/update/result"), &msg);
        }
        out.state.push((id.to_owned(), serde_json::to_string(&msg).unwrap_or_default()));
        out
    }
}

fn state_msg(d: &DeviceState) -> DeviceMsg {
    DeviceMsg {
        base: BaseMessage::now(&edgehive_model::new_msg_id()),
        device: Device {
            name: d.name.clone(),
            state: d.state.clone(),
            last_online: d.last_online.clone(),
            ..Device::default()
        },
    }
}

fn deleted(t: &MsgTwin) -> bool {
    t.metadata.as_ref().is_some_and(|m| m.ty == "deleted")
}

/// KubeEdge's delta: every twin with an expected value, and the expected
/// values the actual ones do not match; `None` when they all match.
fn delta_of(d: &DeviceState) -> Option<TwinDelta> {
    let mut twin = BTreeMap::new();
    let mut delta = BTreeMap::new();
    for (k, t) in &d.twins {
        let Some(expected) = t.expected_value().filter(|v| !v.is_empty()) else { continue };
        if deleted(t) {
            continue;
        }
        if t.actual_value() != Some(expected) {
            delta.insert(k.clone(), expected.to_owned());
        }
        twin.insert(k.clone(), t.shown());
    }
    (!delta.is_empty()).then(|| TwinDelta { base: BaseMessage::now(&edgehive_model::new_msg_id()), twin, delta })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn device(desired: &str) -> Value {
        json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": "thermo", "namespace": "default", "labels": {"description": "a thermometer"}},
            "spec": {"nodeName": "edge-1", "deviceModelRef": {"name": "thermo-model"},
                "properties": [{"name": "temperature", "desired": {"value": desired}}, {"name": "humidity"}]}})
    }

    fn model() -> Value {
        json!({"spec": {"properties": [{"name": "temperature", "type": "INT"}, {"name": "humidity", "type": "FLOAT"}]}})
    }

    fn payload(out: &Outcome, suffix: &str) -> Option<Value> {
        out.publish.iter().find(|(t, _)| t.ends_with(suffix)).map(|(_, p)| serde_json::from_str(p).unwrap())
    }

    #[test]
    fn a_device_from_the_cloud_has_its_desired_values_as_expected_and_a_delta() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        let out = t.apply_device(&device("20"), Some(&model()));
        let m = payload(&out, "$hw/events/node/edge-1/membership/updated").unwrap();
        assert_eq!(m["added_devices"][0]["id"], "thermo");
        assert_eq!(m["added_devices"][0]["description"], "a thermometer");
        let delta = payload(&out, "/twin/update/delta").unwrap();
        assert_eq!(delta["delta"], json!({"temperature": "20"}));
        assert_eq!(delta["twin"]["temperature"]["metadata"]["type"], "int");
        assert!(delta["twin"]["temperature"].get("expected_version").is_none());
        // The same Device again publishes nothing new; a new desired value a delta.
        assert!(t.apply_device(&device("20"), Some(&model())).publish.is_empty());
        let out = t.apply_device(&device("25"), Some(&model()));
        assert_eq!(payload(&out, "/twin/update/delta").unwrap()["delta"], json!({"temperature": "25"}));
        assert_eq!(t.get("thermo").unwrap().twins["temperature"].expected_version.unwrap().cloud, 2);
    }

    #[test]
    fn without_an_eventbus_updates_are_taken_but_not_answered() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        t.set_answering(false);
        t.apply_device(&device("20"), Some(&model()));
        let up = r#"{"event_id":"e1","timestamp":1,"twin":{"temperature":{"actual":{"value":"21"}}}}"#;
        let out = t.on_topic("$hw/events/device/thermo/twin/update", up);
        assert!(out.publish.is_empty(), "{:?}", out.publish);
        assert_eq!(out.report[0].1["temperature"].actual_value(), Some("21"));
        assert_eq!(out.dirty, ["thermo"]);
        let out = t.on_topic("$hw/events/device/thermo/state/update", r#"{"state":"online"}"#);
        assert!(out.publish.is_empty());
        assert_eq!(out.state.len(), 1);
        // Refusals are still answered.
        let out = t.on_topic("$hw/events/device/nothere/twin/update", up);
        assert!(payload(&out, "/twin/update/result").is_some());
    }

    #[test]
    fn a_repeated_value_moves_only_its_time_and_a_change_documents_the_last() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        t.apply_device(&device("20"), Some(&model()));
        let up = |v: &str| format!(r#"{{"twin":{{"temperature":{{"actual":{{"value":"{v}"}}}}}}}}"#);
        let topic = "$hw/events/device/thermo/twin/update";
        assert_eq!(t.on_topic(topic, &up("21")).dirty, ["thermo"]);
        let stamp = |t: &Twins| t.get("thermo").unwrap().twins["temperature"].actual.clone().unwrap();
        let before = stamp(&t);
        let out = t.on_topic(topic, &up("21"));
        assert!(out.dirty.is_empty() && out.report.is_empty(), "{out:?}");
        assert!(payload(&out, "/twin/update/document").is_none());
        assert_eq!(stamp(&t).value, before.value);
        assert!(stamp(&t).metadata.unwrap().timestamp >= before.metadata.unwrap().timestamp);
        let out = t.on_topic(topic, &up("22"));
        let doc = payload(&out, "/twin/update/document").unwrap();
        assert_eq!(doc["twin"]["temperature"]["last"]["actual"]["value"], "21");
        assert_eq!(doc["twin"]["temperature"]["current"]["actual"]["value"], "22");
        assert_eq!(t.get("thermo").unwrap().twins["temperature"].actual_version.unwrap().edge, 2);
    }

    #[test]
    fn a_mapper_update_answers_documents_and_reports_only_changes() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        t.apply_device(&device("20"), Some(&model()));
        let up = r#"{"event_id":"e1","timestamp":1,"twin":{"temperature":{"actual":{"value":"20"}}}}"#;
        let out = t.on_topic("$hw/events/device/thermo/twin/update", up);
        let result = payload(&out, "/twin/update/result").unwrap();
        assert_eq!(result["event_id"], "e1");
        assert_eq!(result["twin"]["temperature"]["actual"]["value"], "20");
        assert!(payload(&out, "/twin/update/document").is_some());
        assert!(payload(&out, "/twin/update/delta").is_none(), "actual meets expected: no delta");
        assert_eq!(out.report.len(), 1);
        assert_eq!(out.report[0].1["temperature"].actual_value(), Some("20"));
        // An empty expected value (a DMI mapper's report of a property
        // without a desired one) leaves the expected value alone.
        let out = t.on_topic(
            "$hw/events/device/thermo/twin/update",
            r#"{"twin":{"humidity":{"expected":{"value":""},"actual":{"value":"40"}}}}"#,
        );
        assert_eq!(out.report[0].1["humidity"].expected, None);
        // A mapper's stale observed desired value does not undo the cloud's.
        let out = t.on_topic(
            "$hw/events/device/thermo/twin/update",
            r#"{"twin":{"temperature":{"expected":{"value":"19"},"actual":{"value":"20"}}}}"#,
        );
        assert!(out.refused.is_none());
        assert_eq!(t.get("thermo").unwrap().twins["temperature"].expected_value(), Some("20"));
        // The same value again: answered, not reported.
        let out = t.on_topic("$hw/events/device/thermo/twin/update", up);
        assert!(payload(&out, "/twin/update/result").is_some());
        assert!(out.report.is_empty());
        let got = t.on_topic("$hw/events/device/thermo/twin/get", r#"{"event_id":"g"}"#);
        let got = payload(&got, "/twin/get/result").unwrap();
        assert_eq!(got["event_id"], "g");
        assert_eq!(got["twin"]["temperature"]["expected"]["value"], "20");
    }

    #[test]
    fn bad_requests_get_kubeedge_error_results() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        t.apply_device(&device("20"), None);
        let cases = [
            ("$hw/events/device/thermo/twin/update", "{not json", 400, "Unmarshal update request body failed"),
            ("$hw/events/device/nosuch/twin/update", r#"{"event_id":"x","twin":{}}"#, 404, "not existed"),
            ("$hw/events/device/thermo/twin/update", r#"{"event_id":"x"}"#, 400, "key:twin does not exist"),
            ("$hw/events/device/thermo/twin/update", r#"{"twin":{"a b":{}}}"#, 400, "The key of twin"),
            (
                "$hw/events/device/thermo/twin/update",
                r#"{"twin":{"t":{"actual":{"value":"a;b"}}}}"#,
                400,
                "The value of twin",
            ),
            (
                "$hw/events/device/thermo/twin/update",
                r#"{"twin":{"t":{"actual":{"value":"x"},"metadata":{"type":"int"}}}}"#,
                400,
                "not int",
            ),
            (
                "$hw/events/device/thermo/twin/update",
                r#"{"twin":{"t":{"actual":{"value":"x"},"metadata":{"type":"quaternion"}}}}"#,
                400,
                "type is not allowed",
            ),
            (
                "$hw/events/device/thermo/twin/update",
                r#"{"twin":{"t":{"actual":{"value":"yes"},"metadata":{"type":"boolean"}}}}"#,
                400,
                "true or false",
            ),
            ("$hw/events/device/nosuch/twin/get", r#"{"event_id":"x"}"#, 404, "Device nosuch not found"),
        ];
        for (topic, body, code, reason) in cases {
            let out = t.on_topic(topic, body);
            let (_, p) = &out.publish[0];
            let p: Value = serde_json::from_str(p).unwrap();
            assert_eq!(p["code"], code, "{topic} {body}");
            assert!(p["reason"].as_str().unwrap().contains(reason), "{topic} {body}: {p}");
            assert!(out.report.is_empty() && out.dirty.is_empty());
        }
        // A twin's stored type holds for later updates (the model says int).
        let mut typed = Twins::new("edge-1", BTreeMap::new());
        typed.apply_device(&device("20"), Some(&model()));
        let out = typed
            .on_topic("$hw/events/device/thermo/twin/update", r#"{"twin":{"temperature":{"actual":{"value":"2.5"}}}}"#);
        assert!(out.refused.as_deref().is_some_and(|r| r.contains("not int")), "{out:?}");
        // Twins without end are refused past the cap, all or nothing.
        let many: serde_json::Map<String, Value> =
            (0..=MAX_TWINS).map(|i| (format!("t{i}"), json!({"actual": {"value": "1"}}))).collect();
        let out = t.on_topic("$hw/events/device/thermo/twin/update", &json!({"twin": many}).to_string());
        assert!(out.refused.as_deref().is_some_and(|r| r.contains("at most")), "{:?}", out.refused);
        assert_eq!(t.get("thermo").unwrap().twins.len(), 2);
        // Nothing else changed.
        assert_eq!(t.get("thermo").unwrap().twins["temperature"].actual, None);
        // Another node's membership, and an unknown state, are refused quietly.
        assert!(t.on_topic("$hw/events/node/edge-2/membership/get", "{}").refused.is_some());
        assert!(t.on_topic("$hw/events/device/thermo/state/update", r#"{"state":"melting"}"#).refused.is_some());
    }

    #[test]
    fn state_membership_and_removal() {
        let mut t = Twins::new("edge-1", BTreeMap::new());
        t.apply_device(&device("20"), None);
        let out = t.on_topic("$hw/events/device/thermo/state/update", r#"{"event_id":"s","state":"online"}"#);
        let r = payload(&out, "/state/update/result").unwrap();
        assert_eq!(r["device"]["state"], "online");
        assert_eq!(out.state.len(), 1);
        let got = t.on_topic("$hw/events/node/edge-1/membership/get", r#"{"event_id":"m"}"#);
        let got = payload(&got, "/membership/get/result").unwrap();
        assert_eq!(got["devices"][0]["state"], "online");
        assert_eq!(got["event_id"], "m");
        let out = t.remove_device("thermo");
        assert_eq!(payload(&out, "/membership/updated").unwrap()["removed_devices"][0]["id"], "thermo");
        assert!(t.is_empty());
    }
}
