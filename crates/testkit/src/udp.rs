//! A UDP relay for QUIC link tests: the datagram counterpart of
//! [`crate::proxy::FaultProxy`].
//!
//! [`UdpRelay`] binds `127.0.0.1:0`; datagrams from its client (whoever sent
//! to it last) go to the upstream address, and the upstream's datagrams go
//! back to that client. A test can drop everything both ways (a link gone
//! dark, a server that died without a word) and point the relay at another
//! upstream (the server restarted on another port), so that the client's
//! next packets reach a server that has never seen its connection.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;
use tokio::sync::watch;

/// What the relay does with datagrams.
#[derive(Debug, Clone, Copy)]
struct Route {
    upstream: SocketAddr,
    blackhole: bool,
}

/// A UDP relay on `127.0.0.1` in front of one upstream address. Dropping it
/// stops it.
#[derive(Debug)]
pub struct UdpRelay {
    addr: SocketAddr,
    route: watch::Sender<Route>,
    dropped: Arc<Mutex<u64>>,
}

impl UdpRelay {
    /// Starts a relay to `upstream` that passes datagrams both ways.
    pub async fn start(upstream: SocketAddr) -> io::Result<UdpRelay> {
        let front = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let back = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = front.local_addr()?;
        let (route, rx) = watch::channel(Route { upstream, blackhole: false });
        let dropped = Arc::new(Mutex::new(0));
        tokio::spawn(relay(front, back, rx, Arc::clone(&dropped)));
        Ok(UdpRelay { addr, route, dropped })
    }

    /// The address the client sends to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every datagram both ways (`true`), or passes them again.
    pub fn set_blackhole(&self, on: bool) {
        self.route.send_modify(|r| r.blackhole = on);
    }

    /// Sends the client's datagrams to `upstream` from now on, and takes
    /// replies only from it.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.route.send_modify(|r| r.upstream = upstream);
    }

    /// Datagrams dropped so far (blackholed, or from another address than
    /// the upstream).
    pub fn dropped(&self) -> u64 {
        *self.dropped.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Ends when the relay is dropped (its route's sender closes).
async fn relay(front: UdpSocket, back: UdpSocket, mut route: watch::Receiver<Route>, dropped: Arc<Mutex<u64>>) {
    let mut client = None;
    let (mut up, mut down) = (vec![0u8; 65536], vec![0u8; 65536]);
    let drop_one = || *dropped.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    loop {
        tokio::select! {
            changed = route.changed() => if changed.is_err() { return },
            r = front.recv_from(&mut up) => {
                let Ok((n, from)) = r else { continue };
                client = Some(from);
                let Route { upstream, blackhole } = *route.borrow();
                if blackhole {
                    drop_one();
                } else {
                    let _ = back.send_to(&up[..n], upstream).await;
                }
            }
            r = back.recv_from(&mut down) => {
                let Ok((n, from)) = r else { continue };
                let Route { upstream, blackhole } = *route.borrow();
                match client {
                    Some(to) if !blackhole && from == upstream => {
                        let _ = front.send_to(&down[..n], to).await;
                    }
                    _ => drop_one(),
                }
            }
        }
    }
}
