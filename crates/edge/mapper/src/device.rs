//! A DMI `Device` read into what the mapper drives: the protocol's
//! connection settings and, per property, where its value lives and how
//! often to read and report it. Bad settings are refused here, before any
//! connection, with a message that names the field.
//!
//! Field names are KubeEdge's Modbus mapper's: protocol `configData`
//! `{ip, port, slaveID}`; visitor `configData` `{register, offset, limit,
//! scale, isSwap, isRegisterSwap, dataType}`. KubeEdge sends every number
//! as a float wrapper, so integers are accepted as floats with no fraction
//! (and as numeric strings).

use std::net::SocketAddr;
use std::time::Duration;

use edgehive_dmi::api;
use edgehive_dmi::convert::customized_to_json;
use serde_json::{Map, Value};

/// Protocol name of the Modbus TCP mapper.
pub const MODBUS: &str = "modbus";
/// Protocol name of the in-memory virtual devices (for demos).
pub const VIRTUAL: &str = "virtualprotocol";

/// The shortest collect or report cycle accepted (a device is not polled
/// in a busy loop whatever its spec says).
pub const MIN_CYCLE: Duration = Duration::from_millis(50);
/// The cycle when the spec gives none (KubeEdge's mapper default, 1 s).
pub const DEFAULT_CYCLE: Duration = Duration::from_secs(1);

/// Why a device's settings were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("device {device:?}: {field}: {detail}")]
pub struct ConfigError {
    /// The device.
    pub device: String,
    /// The field, e.g. `spec.protocol.configData.port`.
    pub field: String,
    /// What is wrong.
    pub detail: String,
}

/// A Modbus register table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterKind {
    /// 16-bit, read-write.
    Holding,
    /// 16-bit, read-only.
    Input,
    /// 1 bit, read-write.
    Coil,
    /// 1 bit, read-only.
    DiscreteInput,
}

/// How a register's words are read as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// Unsigned integer of `limit` words (the default).
    Int,
    /// IEEE 754 single (limit 2) or double (limit 4).
    Float,
    /// A coil or a non-zero register.
    Boolean,
}

/// Where a Modbus property's value lives.
#[derive(Debug, Clone, PartialEq)]
pub struct ModbusVisitor {
    /// The table.
    pub register: RegisterKind,
    /// The first register (0-based).
    pub offset: u16,
    /// How many registers (1 to 4) or coils (1).
    pub limit: u16,
    /// Multiplies the raw value (a write divides by it).
    pub scale: f64,
    /// Swap the two bytes of each register.
    pub is_swap: bool,
    /// Reverse the order of the registers.
    pub is_register_swap: bool,
    /// How the words are read.
    pub data_type: DataType,
}

/// A virtual property: a value that moves between `min` and `max`, or the
/// desired value once one was written.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualVisitor {
    /// Lowest generated value.
    pub min: f64,
    /// Highest generated value.
    pub max: f64,
    /// Whole numbers only.
    pub integer: bool,
}

/// Where a property's value lives.
#[derive(Debug, Clone, PartialEq)]
pub enum Visitor {
    /// In a Modbus register.
    Modbus(ModbusVisitor),
    /// In memory.
    Virtual(VirtualVisitor),
}

/// How a device is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Modbus TCP.
    ModbusTcp {
        /// The device's address.
        addr: SocketAddr,
        /// The unit id.
        slave: u8,
    },
    /// Nothing to reach.
    Virtual,
}

/// One property of a device.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyConfig {
    /// The property's name (the twin's name).
    pub name: String,
    /// Where its value lives.
    pub visitor: Visitor,
    /// How often it is read.
    pub collect: Duration,
    /// How often it is reported to the edge.
    pub report: Duration,
    /// The desired value from the spec, if any.
    pub desired: Option<String>,
    /// Where each reading is pushed (MQTT or HTTP), besides the edge.
    pub push: Option<api::PushMethod>,
}

/// A device the mapper drives.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    /// Its name.
    pub name: String,
    /// How it is reached.
    pub connection: Connection,
    /// Its properties.
    pub properties: Vec<PropertyConfig>,
}

struct Fields<'a> {
    device: &'a str,
    prefix: String,
    map: Map<String, Value>,
}

impl Fields<'_> {
    fn err(&self, key: &str, detail: impl Into<String>) -> ConfigError {
        ConfigError { device: self.device.to_owned(), field: format!("{}.{key}", self.prefix), detail: detail.into() }
    }

    fn number(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(|| self.err(key, "not a number")),
            Some(Value::String(s)) => {
                s.trim().parse().map(Some).map_err(|_| self.err(key, format!("{s:?} is not a number")))
            }
            Some(other) => Err(self.err(key, format!("{other} is not a number"))),
        }
    }

    fn integer(&self, key: &str, min: f64, max: f64) -> Result<Option<u32>, ConfigError> {
        let Some(n) = self.number(key)? else { return Ok(None) };
        if n.fract() != 0.0 || n < min || n > max {
            return Err(self.err(key, format!("{n} is not a whole number from {min} to {max}")));
        }
        Ok(Some(n as u32))
    }

    fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(other) => Err(self.err(key, format!("{other} is not a boolean"))),
        }
    }

    fn string(&self, key: &str) -> Option<&str> {
        self.map.get(key).and_then(Value::as_str)
    }
}

fn fields<'a>(device: &'a str, prefix: &str, c: Option<&api::CustomizedValue>) -> Result<Fields<'a>, ConfigError> {
    let map = customized_to_json(c).map_err(|detail| ConfigError {
        device: device.to_owned(),
        field: prefix.to_owned(),
        detail,
    })?;
    Ok(Fields { device, prefix: prefix.to_owned(), map })
}

fn cycle(ms: i64) -> Duration {
    if ms <= 0 { DEFAULT_CYCLE } else { Duration::from_millis(ms.unsigned_abs()).max(MIN_CYCLE) }
}

/// Reads a DMI device for a mapper of `protocol`.
pub fn parse_device(d: &api::Device, protocol: &str) -> Result<DeviceConfig, ConfigError> {
    let name = d.name.as_str();
    let err = |field: &str, detail: &str| ConfigError {
        device: name.to_owned(),
        field: field.to_owned(),
        detail: detail.to_owned(),
    };
    if name.is_empty() {
        return Err(err("name", "empty"));
    }
    let spec = d.spec.as_ref().ok_or_else(|| err("spec", "missing"))?;
    let proto = spec.protocol.as_ref().ok_or_else(|| err("spec.protocol", "missing"))?;
    if proto.protocol_name != protocol {
        return Err(err(
            "spec.protocol.protocolName",
            &format!("{:?} is not this mapper's protocol {protocol:?}", proto.protocol_name),
        ));
    }
    let pf = fields(name, "spec.protocol.configData", proto.config_data.as_ref())?;
    let connection = match protocol {
        MODBUS => {
            let ip = pf.string("ip").ok_or_else(|| pf.err("ip", "missing"))?;
            let ip: std::net::IpAddr = ip.parse().map_err(|_| pf.err("ip", format!("{ip:?} is not an IP address")))?;
            let port = pf.integer("port", 1.0, 65535.0)?.unwrap_or(502);
            let slave = pf.integer("slaveID", 0.0, 255.0)?.unwrap_or(1);
            Connection::ModbusTcp { addr: SocketAddr::new(ip, port as u16), slave: slave as u8 }
        }
        VIRTUAL => Connection::Virtual,
        other => return Err(err("spec.protocol.protocolName", &format!("{other:?} is not supported"))),
    };
    let mut properties = Vec::with_capacity(spec.properties.len());
    for (i, p) in spec.properties.iter().enumerate() {
        let prefix = format!("spec.properties[{i}].visitors.configData");
        if p.name.is_empty() {
            return Err(err(&format!("spec.properties[{i}].name"), "empty"));
        }
        let vf = fields(name, &prefix, p.visitors.as_ref().and_then(|v| v.config_data.as_ref()))?;
        let data_type = match vf.string("dataType").map(str::to_ascii_lowercase).as_deref() {
            None | Some("" | "int" | "integer" | "uint") => DataType::Int,
            Some("float" | "double") => DataType::Float,
            Some("boolean" | "bool") => DataType::Boolean,
            Some(other) => return Err(vf.err("dataType", format!("{other:?} is not int, float or boolean"))),
        };
        let visitor = match protocol {
            MODBUS => {
                let register = match vf.string("register") {
                    Some("HoldingRegister") => RegisterKind::Holding,
                    Some("InputRegister") => RegisterKind::Input,
                    Some("CoilRegister") => RegisterKind::Coil,
                    Some("DiscreteInputRegister") => RegisterKind::DiscreteInput,
                    Some(other) => {
                        return Err(vf.err(
                            "register",
                            format!(
                                "{other:?} is not HoldingRegister, InputRegister, CoilRegister or DiscreteInputRegister"
                            ),
                        ));
                    }
                    None => return Err(vf.err("register", "missing")),
                };
                let offset = vf.integer("offset", 0.0, 65535.0)?.unwrap_or(0) as u16;
                let bits = matches!(register, RegisterKind::Coil | RegisterKind::DiscreteInput);
                let limit = vf.integer("limit", 1.0, if bits { 1.0 } else { 4.0 })?.unwrap_or(1) as u16;
                if data_type == DataType::Float && !bits && limit != 2 && limit != 4 {
                    return Err(vf.err("limit", "a float is 2 (single) or 4 (double) registers"));
                }
                let scale = vf.number("scale")?.unwrap_or(1.0);
                if !scale.is_finite() || scale == 0.0 {
                    return Err(vf.err("scale", "must be a finite number other than 0"));
                }
                Visitor::Modbus(ModbusVisitor {
                    register,
                    offset,
                    limit,
                    scale,
                    is_swap: vf.boolean("isSwap")?,
                    is_register_swap: vf.boolean("isRegisterSwap")?,
                    data_type: if bits { DataType::Boolean } else { data_type },
                })
            }
            _ => {
                let min = vf.number("min")?.unwrap_or(0.0);
                let max = vf.number("max")?.unwrap_or(100.0);
                if !(min.is_finite() && max.is_finite() && min <= max) {
                    return Err(vf.err("max", "min and max must be numbers with min <= max"));
                }
                Visitor::Virtual(VirtualVisitor { min, max, integer: data_type != DataType::Float })
            }
        };
        properties.push(PropertyConfig {
            name: p.name.clone(),
            visitor,
            collect: cycle(p.collect_cycle),
            report: cycle(if p.report_cycle > 0 { p.report_cycle } else { p.collect_cycle }),
            desired: p.desired.as_ref().map(|d| d.value.clone()).filter(|v| !v.is_empty()),
            push: p.push_method.clone(),
        });
    }
    Ok(DeviceConfig { name: name.to_owned(), connection, properties })
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_dmi::convert::convert_device;
    use serde_json::json;

    fn dev(protocol_cfg: Value, visitor: Value) -> api::Device {
        convert_device(&json!({
            "metadata": {"name": "d"},
            "spec": {"deviceModelRef": {"name": "m"},
                "protocol": {"protocolName": "modbus", "configData": protocol_cfg},
                "properties": [{"name": "t", "visitors": {"protocolName": "modbus", "configData": visitor},
                    "collectCycle": 10, "desired": {"value": "5"}}]}
        }))
        .unwrap()
    }

    #[test]
    fn kubeedge_modbus_settings_are_read() {
        let d = dev(
            json!({"ip": "127.0.0.1", "port": 1502.0, "slaveID": 3}),
            json!({"register": "HoldingRegister", "offset": 4, "limit": 2, "scale": 0.5, "isSwap": true, "isRegisterSwap": "true"}),
        );
        let c = parse_device(&d, MODBUS).unwrap();
        assert_eq!(c.connection, Connection::ModbusTcp { addr: "127.0.0.1:1502".parse().unwrap(), slave: 3 });
        let p = &c.properties[0];
        assert_eq!(p.collect, MIN_CYCLE, "10 ms is raised to the floor");
        assert_eq!(p.report, MIN_CYCLE, "no report cycle: the collect cycle");
        assert_eq!(p.desired.as_deref(), Some("5"));
        let Visitor::Modbus(v) = &p.visitor else { panic!() };
        assert_eq!(
            (v.register, v.offset, v.limit, v.scale, v.is_swap, v.is_register_swap),
            (RegisterKind::Holding, 4, 2, 0.5, true, true)
        );
    }

    #[test]
    fn bad_settings_name_their_field() {
        let cases = [
            (json!({"ip": "nope"}), json!({"register": "HoldingRegister"}), "configData.ip"),
            (json!({"ip": "127.0.0.1", "port": 70000}), json!({"register": "HoldingRegister"}), "configData.port"),
            (json!({"ip": "127.0.0.1", "port": "x"}), json!({"register": "HoldingRegister"}), "configData.port"),
            (json!({"ip": "127.0.0.1"}), json!({"register": "Bogus"}), "register"),
            (json!({"ip": "127.0.0.1"}), json!({}), "register"),
            (json!({"ip": "127.0.0.1"}), json!({"register": "CoilRegister", "limit": 2}), "limit"),
            (json!({"ip": "127.0.0.1"}), json!({"register": "HoldingRegister", "scale": 0}), "scale"),
            (json!({"ip": "127.0.0.1"}), json!({"register": "HoldingRegister", "offset": -1}), "offset"),
        ];
        for (p, v, field) in cases {
            let e = parse_device(&dev(p.clone(), v.clone()), MODBUS).unwrap_err();
            assert!(e.field.ends_with(field), "{p} {v}: {e}");
        }
        let e = parse_device(&dev(json!({"ip": "127.0.0.1"}), json!({"register": "HoldingRegister"})), VIRTUAL)
            .unwrap_err();
        assert!(e.field.ends_with("protocolName"), "{e}");
    }
}
