//! What the DMI module knows, as plain data: the devices and models the
//! edge has (object JSON, keyed by name as KubeEdge v1.15 does), the
//! registered mappers, and the rate limiter. No I/O: the module and the
//! gRPC handlers drive it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::api;
use crate::convert::{self, device_model_name, device_protocol, model_protocol};

/// A registered mapper as KubeEdge stores it in the meta table (the JSON
/// of Go's `pb.MapperInfo`: `address` is bytes, so base64).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MapperRecord {
    /// The mapper's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// The DMI version it speaks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The protocol it drives (one mapper per protocol).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// Its socket, base64 in the JSON (Go's `[]byte`).
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub address: Vec<u8>,
    /// Its state ("ok").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
}

mod b64 {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    pub(super) fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

impl From<&api::MapperInfo> for MapperRecord {
    fn from(m: &api::MapperInfo) -> Self {
        MapperRecord {
            name: m.name.clone(),
            version: m.version.clone(),
            api_version: m.api_version.clone(),
            protocol: m.protocol.clone(),
            address: m.address.clone(),
            state: m.state.clone(),
        }
    }
}

impl MapperRecord {
    /// The socket path.
    pub fn socket(&self) -> String {
        String::from_utf8_lossy(&self.address).into_owned()
    }
}

/// Mappers kept at once: a node runs one per protocol, a handful. Every
/// registration is a record here and a row in the edge database, so a
/// caller inventing names must not grow them without end.
pub(crate) const MAX_MAPPERS: usize = 64;

/// A registration refused: 64 other names are registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyMappers;

/// What a registration changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Registered {
    /// How many mappers are registered now.
    pub count: usize,
    /// Mappers dropped because the new one took their protocol.
    pub displaced: Vec<String>,
}

/// A device as the cache keeps it: what every report needs at hand, and
/// the object as compact JSON text, parsed only when a mapper registers
/// (a parsed `Value` costs ~14 KB a device; the text ~1 KB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedDevice {
    /// `spec.protocol.protocolName`.
    pub protocol: String,
    /// `spec.deviceModelRef.name`.
    pub model: String,
    /// The names of `spec.properties`.
    pub properties: std::sync::Arc<[Box<str>]>,
    json: Box<str>,
}

impl CachedDevice {
    /// Reads what the cache keeps of a Device object.
    pub fn new(obj: &Value) -> CachedDevice {
        let properties = obj
            .pointer("/spec/properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("name").and_then(Value::as_str).map(Box::from))
            .collect();
        CachedDevice {
            protocol: device_protocol(obj).to_owned(),
            model: device_model_name(obj).to_owned(),
            properties,
            json: obj.to_string().into_boxed_str(),
        }
    }

    /// The Device object.
    pub fn object(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// The devices, models and mappers.
///
/// **Invariant:** at most one mapper record per protocol — the one that
/// registered last, which alone gets that protocol's devices.
#[derive(Debug, Default)]
pub struct DmiCache {
    devices: HashMap<String, CachedDevice>,
    models: HashMap<String, Value>,
    /// By mapper name.
    mappers: BTreeMap<String, MapperRecord>,
    /// The socket of the mapper that registered last for each protocol.
    sockets: HashMap<String, String>,
}

/// What a mapper registration answers.
#[derive(Debug, Default)]
pub struct RegisterData {
    /// The devices of the mapper's protocol.
    pub devices: Vec<api::Device>,
    /// Their models (each once).
    pub models: Vec<api::DeviceModel>,
    /// Devices left out, with the reason.
    pub skipped: Vec<(String, String)>,
}

impl DmiCache {
    /// Stores or replaces a device; returns the one it replaced.
    pub fn put_device(&mut self, obj: &Value) -> Option<CachedDevice> {
        let name = convert::object_name(obj).to_owned();
        self.devices.insert(name, CachedDevice::new(obj))
    }

    /// Removes a device.
    pub fn remove_device(&mut self, name: &str) -> Option<CachedDevice> {
        self.devices.remove(name)
    }

    /// A device by name.
    pub fn device(&self, name: &str) -> Option<&CachedDevice> {
        self.devices.get(name)
    }

    /// Stores or replaces a model; returns the one it replaced.
    pub fn put_model(&mut self, obj: Value) -> Option<Value> {
        let name = convert::object_name(&obj).to_owned();
        self.models.insert(name, obj)
    }

    /// Removes a model.
    pub fn remove_model(&mut self, name: &str) -> Option<Value> {
        self.models.remove(name)
    }

    /// Records a mapper (replacing one of the same name, and any other
    /// holding its protocol); returns how many are registered.
    pub fn put_mapper(&mut self, m: MapperRecord) -> usize {
        self.insert_mapper(m).count
    }

    /// A mapper's registration: as [`DmiCache::put_mapper`], but a new name
    /// past the 64th is refused (a known name always re-registers).
    pub fn register_mapper(&mut self, m: MapperRecord) -> Result<Registered, TooManyMappers> {
        // A mapper this one would displace frees its place.
        let displaces = self.mappers.values().any(|o| o.protocol == m.protocol && o.name != m.name);
        if !self.mappers.contains_key(&m.name) && !displaces && self.mappers.len() >= MAX_MAPPERS {
            return Err(TooManyMappers);
        }
        Ok(self.insert_mapper(m))
    }

    fn insert_mapper(&mut self, m: MapperRecord) -> Registered {
        let displaced: Vec<String> = self
            .mappers
            .values()
            .filter(|o| o.protocol == m.protocol && o.name != m.name)
            .map(|o| o.name.clone())
            .collect();
        for name in &displaced {
            self.mappers.remove(name);
        }
        // The same mapper under another protocol now: it no longer serves
        // the old one (it was that protocol's only record).
        if let Some(old) = self.mappers.get(&m.name)
            && old.protocol != m.protocol
        {
            self.sockets.remove(&old.protocol);
        }
        self.sockets.insert(m.protocol.clone(), m.socket());
        self.mappers.insert(m.name.clone(), m);
        Registered { count: self.mappers.len(), displaced }
    }

    /// The socket of the mapper for `protocol` (the latest registered, if
    /// several claim it).
    pub fn mapper_socket(&self, protocol: &str) -> Option<String> {
        self.sockets.get(protocol).cloned()
    }

    /// True if a mapper of `protocol` is registered.
    pub fn has_mapper(&self, protocol: &str) -> bool {
        self.sockets.contains_key(protocol)
    }

    /// The devices of `protocol` and their models, converted, for a
    /// mapper's registration (KubeEdge leaves out a device whose model is
    /// unknown or that does not convert; so do we, and say so).
    pub fn register_data(&self, protocol: &str) -> RegisterData {
        let mut out = RegisterData::default();
        let mut sent_models = std::collections::HashSet::new();
        let mut names: Vec<&String> = self.devices.keys().collect();
        names.sort();
        for name in names {
            let cached = &self.devices[name];
            if cached.protocol != protocol {
                continue;
            }
            let model_name = cached.model.as_str();
            let Some(model) = self.models.get(model_name) else {
                out.skipped.push((name.clone(), format!("device model {model_name:?} is unknown")));
                continue;
            };
            let obj = cached.object();
            let (device, model) = match (convert::convert_device(&obj), convert::convert_device_model(model)) {
                (Ok(d), Ok(m)) => (d, m),
                (Err(e), _) | (_, Err(e)) => {
                    out.skipped.push((name.clone(), e.to_string()));
                    continue;
                }
            };
            out.devices.push(device);
            if sent_models.insert(model_name.to_owned()) {
                out.models.push(model);
            }
        }
        out
    }

    /// How many mappers are registered.
    pub fn mapper_count(&self) -> usize {
        self.mappers.len()
    }

    /// A model's protocol by name.
    pub fn model_protocol(&self, name: &str) -> Option<&str> {
        self.models.get(name).map(model_protocol)
    }
}

/// A token bucket: `rate` tokens a second up to `burst`.
///
/// KubeEdge's DMI server shares one `rate.NewLimiter(rate.Every(1000ms),
/// 100)` among all calls, so past the first hundred a node takes one report
/// a second across all its devices. We keep that for registrations and give
/// reports their own bucket ([`crate::DmiConfig::report_qps`]).
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { rate: rate.max(0.0), burst, tokens: burst, last: now }
    }

    /// Takes a token if there is one at `now`.
    pub fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = now;
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until a token is there (for logs).
    pub fn wait(&self) -> Duration {
        if self.tokens >= 1.0 || self.rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bucket_allows_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1.0, 3, t0);
        assert!((0..3).all(|_| b.allow(t0)));
        assert!(!b.allow(t0));
        assert!(!b.allow(t0 + Duration::from_millis(500)));
        assert!(b.allow(t0 + Duration::from_millis(1000)));
        assert!(!b.allow(t0 + Duration::from_millis(1000)));
        // Idle time refills only up to the burst.
        let later = t0 + Duration::from_secs(100);
        assert!((0..3).all(|_| b.allow(later)));
        assert!(!b.allow(later));
    }

    #[test]
    fn mapper_records_are_kubeedges_json() {
        let r = MapperRecord {
            name: "modbus-mapper".into(),
            version: "v1".into(),
            api_version: "v1beta1".into(),
            protocol: "modbus".into(),
            address: b"/run/m.sock".to_vec(),
            state: "ok".into(),
        };
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["address"], "L3J1bi9tLnNvY2s=");
        assert_eq!(j["api_version"], "v1beta1");
        assert_eq!(serde_json::from_value::<MapperRecord>(j).unwrap(), r);
    }

    #[test]
    fn the_mapper_registered_last_serves_its_protocol() {
        let mut c = DmiCache::default();
        let m = |name: &str, sock: &str| MapperRecord {
            name: name.into(),
            protocol: "modbus".into(),
            address: sock.as_bytes().to_vec(),
            ..MapperRecord::from(&api::MapperInfo::default())
        };
        c.put_mapper(m("z-mapper", "z.sock"));
        c.put_mapper(m("a-mapper", "a.sock"));
        assert_eq!(c.mapper_socket("modbus").as_deref(), Some("a.sock"));
        c.put_mapper(m("z-mapper", "z2.sock"));
        assert_eq!(c.mapper_socket("modbus").as_deref(), Some("z2.sock"));
        assert!(!c.has_mapper("opcua"));
        assert_eq!(c.mapper_count(), 1, "a-mapper lost the protocol and its record");
    }

    #[test]
    fn mappers_are_capped_and_a_protocol_has_one_record() {
        let mut c = DmiCache::default();
        let m = |name: &str, protocol: &str| MapperRecord {
            name: name.into(),
            protocol: protocol.into(),
            address: format!("{name}.sock").into_bytes(),
            ..MapperRecord::from(&api::MapperInfo::default())
        };
        for i in 0..MAX_MAPPERS {
            assert!(c.register_mapper(m(&format!("m{i}"), &format!("p{i}"))).is_ok());
        }
        assert_eq!(c.register_mapper(m("extra", "px")), Err(TooManyMappers));
        // A known name re-registers, even under a new protocol: the old one
        // is no longer served.
        let r = c.register_mapper(m("m0", "moved")).unwrap();
        assert_eq!(r, Registered { count: MAX_MAPPERS, displaced: vec![] });
        assert!(!c.has_mapper("p0"));
        // A new name for a held protocol takes it over and frees the place.
        let r = c.register_mapper(m("new", "p1")).unwrap();
        assert_eq!(r, Registered { count: MAX_MAPPERS, displaced: vec!["m1".to_owned()] });
        assert_eq!(c.mapper_socket("p1").as_deref(), Some("new.sock"));
        assert_eq!(c.register_mapper(m("extra", "px")), Err(TooManyMappers));
    }

    #[test]
    fn a_registration_gets_its_protocols_devices_with_their_models_once() {
        let mut c = DmiCache::default();
        let model = json!({"metadata": {"name": "m"}, "spec": {"protocol": "modbus"}});
        c.put_model(model);
        for (name, proto, model) in
            [("a", "modbus", "m"), ("b", "modbus", "m"), ("c", "opcua", "m"), ("d", "modbus", "gone")]
        {
            c.put_device(&json!({"metadata": {"name": name}, "spec": {"deviceModelRef": {"name": model}, "protocol": {"protocolName": proto}}}));
        }
        let data = c.register_data("modbus");
        let names: Vec<&str> = data.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(data.models.len(), 1);
        assert_eq!(data.skipped.len(), 1, "d's model is unknown");
    }
}
