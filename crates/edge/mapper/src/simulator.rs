//! A Modbus TCP device simulator: holding and input registers, coils and
//! discrete inputs in memory, served with tokio-modbus's server. It stands
//! in for a real device in demos (`edgehive mapper simulate`) and tests.
//! Every write is logged and counted, and the tables can be read and set
//! from the process that runs it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_modbus::{ExceptionCode, Request, Response};
use tokio_util::sync::CancellationToken;

/// The simulator's tables.
#[derive(Debug, Default)]
pub struct Tables {
    /// Holding registers (read-write words).
    pub holding: BTreeMap<u16, u16>,
    /// Input registers (read-only words).
    pub input: BTreeMap<u16, u16>,
    /// Coils (read-write bits).
    pub coils: BTreeMap<u16, bool>,
    /// Discrete inputs (read-only bits).
    pub discrete: BTreeMap<u16, bool>,
    /// Writes taken so far.
    pub writes: u64,
}

/// A handle on the simulator's tables, shared with its server.
#[derive(Debug, Clone, Default)]
pub struct Device(Arc<Mutex<Tables>>);

impl Device {
    /// The tables, locked.
    pub fn tables(&self) -> MutexGuard<'_, Tables> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A holding register's value (0 when never set).
    pub fn holding(&self, addr: u16) -> u16 {
        self.tables().holding.get(&addr).copied().unwrap_or(0)
    }

    /// Sets a holding register, as the device itself would (a sensor).
    pub fn set_holding(&self, addr: u16, value: u16) {
        self.tables().holding.insert(addr, value);
    }

    /// A coil's value.
    pub fn coil(&self, addr: u16) -> bool {
        self.tables().coils.get(&addr).copied().unwrap_or(false)
    }
}

fn words(map: &BTreeMap<u16, u16>, addr: u16, n: u16) -> Result<Vec<u16>, ExceptionCode> {
    let end = addr.checked_add(n).ok_or(ExceptionCode::IllegalDataAddress)?;
    Ok((addr..end).map(|a| map.get(&a).copied().unwrap_or(0)).collect())
}

fn bits(map: &BTreeMap<u16, bool>, addr: u16, n: u16) -> Result<Vec<bool>, ExceptionCode> {
    let end = addr.checked_add(n).ok_or(ExceptionCode::IllegalDataAddress)?;
    Ok((addr..end).map(|a| map.get(&a).copied().unwrap_or(false)).collect())
}

impl tokio_modbus::server::Service for Device {
    type Request = Request<'static>;
    type Response = Response;
    type Exception = ExceptionCode;
    type Future = std::future::Ready<Result<Response, ExceptionCode>>;

    fn call(&self, req: Request<'static>) -> Self::Future {
        let mut t = self.tables();
        let answer = match req {
            Request::ReadHoldingRegisters(a, n) => words(&t.holding, a, n).map(Response::ReadHoldingRegisters),
            Request::ReadInputRegisters(a, n) => words(&t.input, a, n).map(Response::ReadInputRegisters),
            Request::ReadCoils(a, n) => bits(&t.coils, a, n).map(Response::ReadCoils),
            Request::ReadDiscreteInputs(a, n) => bits(&t.discrete, a, n).map(Response::ReadDiscreteInputs),
            Request::WriteSingleRegister(a, w) => {
                t.holding.insert(a, w);
                t.writes += 1;
                tracing::info!(register = a, value = w, "holding register written");
                Ok(Response::WriteSingleRegister(a, w))
            }
            Request::WriteMultipleRegisters(a, ws) => {
                for (i, w) in ws.iter().enumerate() {
                    t.holding.insert(a.wrapping_add(i as u16), *w);
                }
                t.writes += 1;
                tracing::info!(register = a, values = ?ws, "holding registers written");
                Ok(Response::WriteMultipleRegisters(a, ws.len() as u16))
            }
            Request::WriteSingleCoil(a, b) => {
                t.coils.insert(a, b);
                t.writes += 1;
                tracing::info!(coil = a, value = b, "coil written");
                Ok(Response::WriteSingleCoil(a, b))
            }
            Request::WriteMultipleCoils(a, bs) => {
                for (i, b) in bs.iter().enumerate() {
                    t.coils.insert(a.wrapping_add(i as u16), *b);
                }
                t.writes += 1;
                Ok(Response::WriteMultipleCoils(a, bs.len() as u16))
            }
            _ => Err(ExceptionCode::IllegalFunction),
        };
        std::future::ready(answer)
    }
}

/// Serves `device` on `addr` until `cancel`; returns the bound address
/// once listening.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    device: Device,
    cancel: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let server = tokio_modbus::server::tcp::Server::new(listener);
    let task = tokio::spawn(async move {
        let on_connected = move |stream, peer| {
            let device = device.clone();
            async move { tokio_modbus::server::tcp::accept_tcp_connection(stream, peer, |_| Ok(Some(device.clone()))) }
        };
        let on_error = |e| tracing::warn!(error = %e, "simulator connection failed");
        tokio::select! {
            () = cancel.cancelled() => {}
            r = server.serve(&on_connected, on_error) => {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "simulator stopped");
                }
            }
        }
    });
    Ok((bound, task))
}
