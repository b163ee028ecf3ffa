//! Kubernetes Device/DeviceModel JSON (`devices.kubeedge.io/v1beta1`) to
//! the DMI protobuf messages, as KubeEdge's `dtcommon.ConvertDevice` and
//! `ConvertDeviceModel` do — and back from `Any` to JSON for a mapper.
//!
//! KubeEdge marshals the object and unmarshals the JSON into the protobuf
//! struct (Go's JSON matches names case-insensitively, so `hostName` fills
//! `hostname`), then packs each `configData` value into an `Any` holding a
//! well-known wrapper: a string a `StringValue`, a boolean a `BoolValue`,
//! every number a `FloatValue` (Go decodes JSON numbers as float64). A
//! nested object or array in `configData` fails the conversion. We keep
//! the failure and the wrappers, but send an integer as `Int32Value` (or
//! `Int64Value` when it does not fit): a float32 loses integers above
//! 2^24, and mapper-framework decodes all three wrappers to the same JSON.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::api::{self, wrappers};

/// `type_url` prefix of the well-known wrappers.
const TYPE_PREFIX: &str = "type.googleapis.com/google.protobuf.";

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConvertError {
    /// The object is not a JSON object, or has no name.
    #[error("not a {kind} object: {detail}")]
    Shape {
        /// `Device` or `DeviceModel`.
        kind: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A `configData` value has no protobuf wrapper (an object, an array,
    /// null).
    #[error("configData {key:?}: {detail}")]
    ConfigData {
        /// The key.
        key: String,
        /// What was wrong.
        detail: String,
    },
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn i64_at(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(|n| n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))).unwrap_or_default()
}

fn bool_at(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or_default()
}

/// The object's `metadata.name` (empty if none).
pub fn object_name(obj: &Value) -> &str {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

/// A Device's protocol (`spec.protocol.protocolName`).
pub fn device_protocol(device: &Value) -> &str {
    device.pointer("/spec/protocol/protocolName").and_then(Value::as_str).unwrap_or_default()
}

/// A Device's model (`spec.deviceModelRef.name`).
pub fn device_model_name(device: &Value) -> &str {
    device.pointer("/spec/deviceModelRef/name").and_then(Value::as_str).unwrap_or_default()
}

/// A DeviceModel's protocol (`spec.protocol`).
pub fn model_protocol(model: &Value) -> &str {
    model.pointer("/spec/protocol").and_then(Value::as_str).unwrap_or_default()
}

/// Packs one JSON value into an `Any`.
pub fn value_to_any(key: &str, v: &Value) -> Result<api::Any, ConvertError> {
    let pack = |name: &str, bytes: Vec<u8>| api::Any { type_url: format!("{TYPE_PREFIX}{name}"), value: bytes };
    use prost::Message as _;
    Ok(match v {
        Value::String(s) => pack("StringValue", wrappers::StringValue { value: s.clone() }.encode_to_vec()),
        Value::Bool(b) => pack("BoolValue", wrappers::BoolValue { value: *b }.encode_to_vec()),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => match i32::try_from(i) {
                Ok(i) => pack("Int32Value", wrappers::Int32Value { value: i }.encode_to_vec()),
                Err(_) => pack("Int64Value", wrappers::Int64Value { value: i }.encode_to_vec()),
            },
            (None, Some(f)) => pack("FloatValue", wrappers::FloatValue { value: f as f32 }.encode_to_vec()),
            (None, None) => {
                return Err(ConvertError::ConfigData {
                    key: key.to_owned(),
                    detail: format!("number {n} out of range"),
                });
            }
        },
        Value::Null | Value::Array(_) | Value::Object(_) => {
            return Err(ConvertError::ConfigData {
                key: key.to_owned(),
                detail: "only strings, numbers and booleans can be sent to a mapper".into(),
            });
        }
    })
}

/// Unpacks an `Any` holding a well-known wrapper into JSON (what
/// mapper-framework's `DecodeAnyValue` does before it parses configData).
pub fn any_to_value(any: &api::Any) -> Result<Value, String> {
    use prost::Message as _;
    let name = any.type_url.rsplit('/').next().unwrap_or_default();
    let bad = |e: prost::DecodeError| format!("{name}: {e}");
    let b = any.value.as_slice();
    Ok(match name {
        "google.protobuf.StringValue" => Value::from(wrappers::StringValue::decode(b).map_err(bad)?.value),
        "google.protobuf.BoolValue" => Value::from(wrappers::BoolValue::decode(b).map_err(bad)?.value),
        "google.protobuf.Int32Value" => Value::from(wrappers::Int32Value::decode(b).map_err(bad)?.value),
        "google.protobuf.Int64Value" => Value::from(wrappers::Int64Value::decode(b).map_err(bad)?.value),
        "google.protobuf.FloatValue" => {
            let f = wrappers::FloatValue::decode(b).map_err(bad)?.value;
            // Through the shortest decimal form, so 0.1f32 is 0.1, not 0.10000000149.
            let f: f64 = f.to_string().parse().unwrap_or(f64::from(f));
            serde_json::Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("{name}: {f} is not finite"))?
        }
        "google.protobuf.DoubleValue" => {
            let f = wrappers::DoubleValue::decode(b).map_err(bad)?.value;
            serde_json::Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("{name}: {f} is not finite"))?
        }
        other => return Err(format!("unsupported Any type {other:?}")),
    })
}

/// `configData` as a JSON object (for a mapper to parse).
pub fn customized_to_json(c: Option<&api::CustomizedValue>) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, any) in c.map(|c| &c.data).into_iter().flatten() {
        out.insert(k.clone(), any_to_value(any).map_err(|e| format!("configData {k:?}: {e}"))?);
    }
    Ok(out)
}

fn customized(v: Option<&Value>) -> Result<Option<api::CustomizedValue>, ConvertError> {
    let Some(obj) = v.and_then(Value::as_object) else { return Ok(None) };
    let mut data = HashMap::with_capacity(obj.len());
    for (k, v) in obj {
        data.insert(k.clone(), value_to_any(k, v)?);
    }
    Ok(Some(api::CustomizedValue { data }))
}

fn twin_property(v: Option<&Value>) -> Option<api::TwinProperty> {
    let v = v.filter(|v| v.is_object())?;
    let metadata = v
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    Some(api::TwinProperty { value: str_at(v, "value").to_owned(), metadata })
}

fn push_method(v: Option<&Value>) -> Option<api::PushMethod> {
    let v = v.filter(|v| v.is_object())?;
    let http = v.get("http").filter(|h| h.is_object()).map(|h| api::PushMethodHttp {
        hostname: str_at(h, "hostName").to_owned(),
        port: i64_at(h, "port"),
        requestpath: str_at(h, "requestPath").to_owned(),
        timeout: i64_at(h, "timeout"),
    });
    let mqtt = v.get("mqtt").filter(|m| m.is_object()).map(|m| api::PushMethodMqtt {
        address: str_at(m, "address").to_owned(),
        topic: str_at(m, "topic").to_owned(),
        qos: i32::try_from(i64_at(m, "qos")).unwrap_or_default(),
        retained: bool_at(m, "retained"),
    });
    let db_method = v.pointer("/dbMethod/influxdb2").filter(|i| i.is_object()).map(|i| api::DbMethod {
        influxdb2: Some(api::DbMethodInfluxdb2 {
            influxdb2_client_config: i.get("influxdb2ClientConfig").map(|c| api::Influxdb2ClientConfig {
                url: str_at(c, "url").to_owned(),
                org: str_at(c, "org").to_owned(),
                bucket: str_at(c, "bucket").to_owned(),
            }),
            influxdb2_data_config: i.get("influxdb2DataConfig").map(|d| api::Influxdb2DataConfig {
                measurement: str_at(d, "measurement").to_owned(),
                tag: d
                    .get("tag")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
                    .unwrap_or_default(),
                field_key: str_at(d, "fieldKey").to_owned(),
            }),
        }),
    });
    Some(api::PushMethod { http, mqtt, db_method })
}

/// A Device object (`devices.kubeedge.io/v1beta1`) as the DMI `Device`.
pub fn convert_device(obj: &Value) -> Result<api::Device, ConvertError> {
    let shape = |detail: &str| ConvertError::Shape { kind: "Device", detail: detail.to_owned() };
    if !obj.is_object() {
        return Err(shape("not a JSON object"));
    }
    let name = object_name(obj);
    if name.is_empty() {
        return Err(shape("metadata.name is empty"));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let protocol = spec.get("protocol").cloned().unwrap_or(Value::Null);
    let protocol = api::ProtocolConfig {
        protocol_name: str_at(&protocol, "protocolName").to_owned(),
        config_data: customized(protocol.get("configData"))?,
    };
    let mut properties = Vec::new();
    for p in spec.get("properties").and_then(Value::as_array).into_iter().flatten() {
        let visitors = p.get("visitors").filter(|v| v.is_object()).map(|v| -> Result<_, ConvertError> {
            Ok(api::VisitorConfig {
                protocol_name: str_at(v, "protocolName").to_owned(),
                config_data: customized(v.get("configData"))?,
            })
        });
        properties.push(api::DeviceProperty {
            name: str_at(p, "name").to_owned(),
            desired: twin_property(p.get("desired")),
            visitors: visitors.transpose()?,
            report_cycle: i64_at(p, "reportCycle"),
            collect_cycle: i64_at(p, "collectCycle"),
            report_to_cloud: bool_at(p, "reportToCloud"),
            push_method: push_method(p.get("pushMethod")),
        });
    }
    let twins = obj
        .pointer("/status/twins")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| api::Twin {
            property_name: str_at(t, "propertyName").to_owned(),
            observed_desired: twin_property(t.get("observedDesired")),
            reported: twin_property(t.get("reported")),
        })
        .collect();
    Ok(api::Device {
        name: name.to_owned(),
        namespace: obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_owned(),
        spec: Some(api::DeviceSpec {
            device_model_reference: device_model_name(obj).to_owned(),
            protocol: Some(protocol),
            properties,
        }),
        status: Some(api::DeviceStatus { twins }),
    })
}

/// A DeviceModel object as the DMI `DeviceModel`.
pub fn convert_device_model(obj: &Value) -> Result<api::DeviceModel, ConvertError> {
    let shape = |detail: &str| ConvertError::Shape { kind: "DeviceModel", detail: detail.to_owned() };
    if !obj.is_object() {
        return Err(shape("not a JSON object"));
    }
    let name = object_name(obj);
    if name.is_empty() {
        return Err(shape("metadata.name is empty"));
    }
    let properties = obj
        .pointer("/spec/properties")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| api::ModelProperty {
            name: str_at(p, "name").to_owned(),
            description: str_at(p, "description").to_owned(),
            r#type: str_at(p, "type").to_owned(),
            access_mode: str_at(p, "accessMode").to_owned(),
            minimum: str_at(p, "minimum").to_owned(),
            maximum: str_at(p, "maximum").to_owned(),
            unit: str_at(p, "unit").to_owned(),
        })
        .collect();
    Ok(api::DeviceModel {
        name: name.to_owned(),
        namespace: obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_owned(),
        spec: Some(api::DeviceModelSpec { properties, commands: Vec::new() }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn modbus_device() -> Value {
        json!({
            "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": "thermo", "namespace": "default"},
            "spec": {
                "deviceModelRef": {"name": "thermo-model"},
                "nodeName": "edge-1",
                "protocol": {"protocolName": "modbus", "configData": {"ip": "127.0.0.1", "port": 502, "slaveID": 1}},
                "properties": [{
                    "name": "temperature",
                    "desired": {"value": "20", "metadata": {"type": "int"}},
                    "visitors": {"protocolName": "modbus", "configData": {
                        "register": "HoldingRegister", "offset": 2, "limit": 1, "scale": 0.1, "isSwap": false}},
                    "collectCycle": 1000, "reportCycle": 2000, "reportToCloud": true,
                    "pushMethod": {"mqtt": {"address": "tcp://127.0.0.1:1883", "topic": "t", "qos": 1, "retained": true},
                                   "http": {"hostName": "http://h", "port": 80, "requestPath": "/p", "timeout": 5}}
                }]
            },
            "status": {"twins": [{"propertyName": "temperature", "reported": {"value": "19"}, "observedDesired": {"value": "20"}}]}
        })
    }

    #[test]
    fn a_device_converts_as_kubeedge_does_and_its_config_comes_back() {
        let d = convert_device(&modbus_device()).unwrap();
        assert_eq!(d.name, "thermo");
        let spec = d.spec.as_ref().unwrap();
        assert_eq!(spec.device_model_reference, "thermo-model");
        let protocol = spec.protocol.as_ref().unwrap();
        assert_eq!(protocol.protocol_name, "modbus");
        let cfg = customized_to_json(protocol.config_data.as_ref()).unwrap();
        assert_eq!(Value::Object(cfg), json!({"ip": "127.0.0.1", "port": 502, "slaveID": 1}));
        let p = &spec.properties[0];
        assert_eq!((p.collect_cycle, p.report_cycle, p.report_to_cloud), (1000, 2000, true));
        assert_eq!(p.desired.as_ref().unwrap().value, "20");
        let v = customized_to_json(p.visitors.as_ref().unwrap().config_data.as_ref()).unwrap();
        assert_eq!(
            Value::Object(v),
            json!({"register": "HoldingRegister", "offset": 2, "limit": 1, "scale": 0.1, "isSwap": false})
        );
        let push = p.push_method.as_ref().unwrap();
        assert_eq!(push.mqtt.as_ref().unwrap().qos, 1);
        assert_eq!(push.http.as_ref().unwrap().requestpath, "/p");
        let twin = &d.status.as_ref().unwrap().twins[0];
        assert_eq!(twin.reported.as_ref().unwrap().value, "19");
        // Wire type: the wrappers KubeEdge uses.
        let any = &protocol.config_data.as_ref().unwrap().data["ip"];
        assert_eq!(any.type_url, "type.googleapis.com/google.protobuf.StringValue");
        let big = value_to_any("n", &json!(1u64 << 40)).unwrap();
        assert!(big.type_url.ends_with("Int64Value"));
        assert_eq!(any_to_value(&big).unwrap(), json!(1u64 << 40));
    }

    #[test]
    fn nested_config_or_a_nameless_object_is_refused() {
        let mut d = modbus_device();
        d["spec"]["protocol"]["configData"]["nested"] = json!({"a": 1});
        assert!(matches!(convert_device(&d), Err(ConvertError::ConfigData { .. })));
        assert!(convert_device(&json!({"spec": {}})).is_err());
        assert!(convert_device(&json!("x")).is_err());
        assert!(convert_device_model(&json!({"metadata": {}})).is_err());
        let unknown = api::Any { type_url: "type.googleapis.com/evil.Thing".into(), value: vec![1, 2] };
        assert!(any_to_value(&unknown).is_err());
        let garbage =
            api::Any { type_url: "type.googleapis.com/google.protobuf.StringValue".into(), value: vec![0xff] };
        assert!(any_to_value(&garbage).is_err());
    }

    #[test]
    fn a_model_converts() {
        let m = json!({"metadata": {"name": "thermo-model", "namespace": "default"},
            "spec": {"protocol": "modbus", "properties": [{"name": "temperature", "type": "INT", "accessMode": "ReadWrite", "minimum": "0", "maximum": "100", "unit": "C"}]}});
        let pb = convert_device_model(&m).unwrap();
        assert_eq!(model_protocol(&m), "modbus");
        let p = &pb.spec.unwrap().properties[0];
        assert_eq!((p.r#type.as_str(), p.access_mode.as_str(), p.maximum.as_str()), ("INT", "ReadWrite", "100"));
    }
}
