//! Reading and writing a property's value on its device: Modbus TCP
//! through tokio-modbus, or the in-memory virtual device. The value
//! conversions (words to a scaled number and back) are plain functions.

use std::collections::HashMap;
use std::time::Duration;

use tokio_modbus::prelude::{Reader as _, Slave, Writer as _};

use crate::device::{Connection, DataType, ModbusVisitor, RegisterKind, VirtualVisitor, Visitor};

/// Deadline of one Modbus connect, read or write.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a read or write failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The device could not be reached (the next call reconnects).
    #[error("device unreachable: {0}")]
    Unreachable(String),
    /// The device answered with a Modbus exception.
    #[error("device refused: {0}")]
    Exception(String),
    /// The value does not fit the register.
    #[error("bad value: {0}")]
    Value(String),
    /// The register cannot be written.
    #[error("{0} is read-only")]
    ReadOnly(&'static str),
}

/// Decodes `words` read from registers into the property's value.
pub fn decode_words(v: &ModbusVisitor, words: &[u16]) -> String {
    let mut words: Vec<u16> = words.to_vec();
    if v.is_swap {
        words.iter_mut().for_each(|w| *w = w.swap_bytes());
    }
    if v.is_register_swap {
        words.reverse();
    }
    let raw = words.iter().fold(0u64, |acc, w| (acc << 16) | u64::from(*w));
    let value = match (v.data_type, words.len()) {
        (DataType::Boolean, _) => return (raw != 0).to_string(),
        (DataType::Float, 2) => f64::from(f32::from_bits(raw as u32)),
        (DataType::Float, _) => f64::from_bits(raw),
        (DataType::Int, _) => raw as f64,
    };
    format_number(value * v.scale)
}

/// Encodes a desired value into register words (the scale reversed).
pub fn encode_words(v: &ModbusVisitor, value: &str) -> Result<Vec<u16>, DriverError> {
    let n: f64 = match value.trim() {
        "true" | "on" => 1.0,
        "false" | "off" => 0.0,
        s => s.parse().map_err(|_| DriverError::Value(format!("{value:?} is not a number")))?,
    };
    let raw = n / v.scale;
    let bits = u32::from(v.limit) * 16;
    let mut words: Vec<u16> = match v.data_type {
        DataType::Float if v.limit == 2 => {
            let b = (raw as f32).to_bits();
            vec![(b >> 16) as u16, b as u16]
        }
        DataType::Float => {
            let b = raw.to_bits();
            (0..4).rev().map(|i| (b >> (16 * i)) as u16).collect()
        }
        _ => {
            let r = raw.round();
            let max = if bits >= 64 { u64::MAX as f64 } else { ((1u64 << bits) - 1) as f64 };
            if !(0.0..=max).contains(&r) {
                return Err(DriverError::Value(format!("{value} (raw {r}) does not fit {} register(s)", v.limit)));
            }
            let r = r as u64;
            (0..u32::from(v.limit)).rev().map(|i| (r >> (16 * i)) as u16).collect()
        }
    };
    if v.is_register_swap {
        words.reverse();
    }
    if v.is_swap {
        words.iter_mut().for_each(|w| *w = w.swap_bytes());
    }
    Ok(words)
}

/// A number as a twin value: whole numbers without a fraction, others in
/// their shortest form with float noise rounded away.
pub fn format_number(x: f64) -> String {
    let rounded = (x * 1e9).round() / 1e9;
    if rounded.fract() == 0.0 && rounded.abs() < 1e15 { format!("{}", rounded as i64) } else { format!("{rounded}") }
}

/// A device's connection: reads and writes its properties.
#[derive(Debug)]
pub enum Driver {
    /// Modbus TCP (connected at first use, again after a failure).
    Modbus(ModbusDriver),
    /// In memory.
    Virtual(VirtualDriver),
}

impl Driver {
    /// The driver for a device's connection.
    pub fn new(c: &Connection) -> Driver {
        match c {
            Connection::ModbusTcp { addr, slave } => {
                Driver::Modbus(ModbusDriver { addr: *addr, slave: *slave, ctx: None })
            }
            Connection::Virtual => Driver::Virtual(VirtualDriver::default()),
        }
    }

    /// Reads a property.
    pub async fn read(&mut self, property: &str, v: &Visitor) -> Result<String, DriverError> {
        match (self, v) {
            (Driver::Modbus(d), Visitor::Modbus(v)) => d.read(v).await,
            (Driver::Virtual(d), Visitor::Virtual(v)) => Ok(d.read(property, v)),
            _ => Err(DriverError::Value("visitor of another protocol".into())),
        }
    }

    /// Writes a property's desired value.
    pub async fn write(&mut self, property: &str, v: &Visitor, value: &str) -> Result<(), DriverError> {
        match (self, v) {
            (Driver::Modbus(d), Visitor::Modbus(v)) => d.write(v, value).await,
            (Driver::Virtual(d), Visitor::Virtual(_)) => {
                d.values.insert(property.to_owned(), value.to_owned());
                Ok(())
            }
            _ => Err(DriverError::Value("visitor of another protocol".into())),
        }
    }
}

/// One Modbus TCP device.
pub struct ModbusDriver {
    addr: std::net::SocketAddr,
    slave: u8,
    ctx: Option<tokio_modbus::client::Context>,
}

impl std::fmt::Debug for ModbusDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModbusDriver")
            .field("addr", &self.addr)
            .field("slave", &self.slave)
            .field("connected", &self.ctx.is_some())
            .finish()
    }
}

async fn within<T, E: std::fmt::Display>(f: impl Future<Output = Result<T, E>>) -> Result<T, DriverError> {
    match tokio::time::timeout(IO_TIMEOUT, f).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(DriverError::Unreachable(e.to_string())),
        Err(_) => Err(DriverError::Unreachable(format!("no answer within {IO_TIMEOUT:?}"))),
    }
}

impl ModbusDriver {
    async fn context(&mut self) -> Result<&mut tokio_modbus::client::Context, DriverError> {
        if self.ctx.is_none() {
            let ctx = within(tokio_modbus::client::tcp::connect_slave(self.addr, Slave(self.slave))).await?;
            self.ctx = Some(ctx);
        }
        self.ctx.as_mut().ok_or_else(|| DriverError::Unreachable("not connected".into()))
    }

    /// Drops the connection after a transport failure.
    fn check<T>(&mut self, r: Result<Result<T, tokio_modbus::ExceptionCode>, DriverError>) -> Result<T, DriverError> {
        match r {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(code)) => Err(DriverError::Exception(format!("{code:?}"))),
            Err(e) => {
                self.ctx = None;
                Err(e)
            }
        }
    }

    async fn read(&mut self, v: &ModbusVisitor) -> Result<String, DriverError> {
        let (offset, limit) = (v.offset, v.limit);
        let ctx = self.context().await?;
        match v.register {
            RegisterKind::Holding => {
                let r = within(ctx.read_holding_registers(offset, limit)).await;
                let words = self.check(r)?;
                Ok(decode_words(v, &words))
            }
            RegisterKind::Input => {
                let r = within(ctx.read_input_registers(offset, limit)).await;
                let words = self.check(r)?;
                Ok(decode_words(v, &words))
            }
            RegisterKind::Coil => {
                let r = within(ctx.read_coils(offset, limit)).await;
                let bits = self.check(r)?;
                Ok(bits.first().copied().unwrap_or_default().to_string())
            }
            RegisterKind::DiscreteInput => {
                let r = within(ctx.read_discrete_inputs(offset, limit)).await;
                let bits = self.check(r)?;
                Ok(bits.first().copied().unwrap_or_default().to_string())
            }
        }
    }

    async fn write(&mut self, v: &ModbusVisitor, value: &str) -> Result<(), DriverError> {
        match v.register {
            RegisterKind::Holding => {
                let words = encode_words(v, value)?;
                let ctx = self.context().await?;
                let r = if let [w] = words[..] {
                    within(ctx.write_single_register(v.offset, w)).await
                } else {
                    within(ctx.write_multiple_registers(v.offset, &words)).await
                };
                self.check(r)
            }
            RegisterKind::Coil => {
                let on = encode_words(v, value)?.iter().any(|w| *w != 0);
                let ctx = self.context().await?;
                let r = within(ctx.write_single_coil(v.offset, on)).await;
                self.check(r)
            }
            RegisterKind::Input => Err(DriverError::ReadOnly("InputRegister")),
            RegisterKind::DiscreteInput => Err(DriverError::ReadOnly("DiscreteInputRegister")),
        }
    }
}

/// In-memory devices: each property reads the value last written to it,
/// or else a value that walks between the visitor's `min` and `max`.
#[derive(Debug, Default)]
pub struct VirtualDriver {
    values: HashMap<String, String>,
}

impl VirtualDriver {
    fn read(&mut self, property: &str, v: &VirtualVisitor) -> String {
        if let Some(value) = self.values.get(property) {
            return value.clone();
        }
        let x = v.min + fastrand::f64() * (v.max - v.min);
        format_number(if v.integer { x.round() } else { x })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visitor(limit: u16, scale: f64, data_type: DataType) -> ModbusVisitor {
        ModbusVisitor {
            register: RegisterKind::Holding,
            offset: 0,
            limit,
            scale,
            is_swap: false,
            is_register_swap: false,
            data_type,
        }
    }

    #[test]
    fn words_decode_with_scale_and_swaps_and_encode_back() {
        let v = visitor(1, 0.1, DataType::Int);
        assert_eq!(decode_words(&v, &[215]), "21.5");
        assert_eq!(encode_words(&v, "30").unwrap(), [300]);
        assert_eq!(decode_words(&visitor(1, 1.0, DataType::Int), &[7]), "7");
        let mut v2 = visitor(2, 1.0, DataType::Int);
        assert_eq!(decode_words(&v2, &[0x0001, 0x0002]), (0x0001_0002u64).to_string());
        v2.is_register_swap = true;
        assert_eq!(decode_words(&v2, &[0x0002, 0x0001]), (0x0001_0002u64).to_string());
        assert_eq!(encode_words(&v2, &0x0001_0002u64.to_string()).unwrap(), [0x0002, 0x0001]);
        v2.is_swap = true;
        assert_eq!(encode_words(&v2, &0x0001_0002u64.to_string()).unwrap(), [0x0200, 0x0100]);
        assert_eq!(decode_words(&v2, &[0x0200, 0x0100]), (0x0001_0002u64).to_string());
        let f = visitor(2, 1.0, DataType::Float);
        let words = encode_words(&f, "1.5").unwrap();
        assert_eq!(decode_words(&f, &words), "1.5");
    }

    #[test]
    fn values_that_do_not_fit_are_refused() {
        let v = visitor(1, 1.0, DataType::Int);
        assert!(encode_words(&v, "65536").is_err());
        assert!(encode_words(&v, "-1").is_err());
        assert!(encode_words(&v, "warm").is_err());
        assert_eq!(encode_words(&v, "65535").unwrap(), [65535]);
    }
}
