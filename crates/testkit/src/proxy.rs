//! A fault-injecting TCP proxy for link tests.
//!
//! [`FaultProxy`] listens on `127.0.0.1:0` and forwards every connection it
//! accepts to one upstream address. A test points a client at
//! [`FaultProxy::addr`] and then breaks the link with [`FaultProxy::set_fault`]
//! (delay, blackhole, refuse, drop after a byte budget) or
//! [`FaultProxy::reset_all`], and heals it again with [`Fault::None`].
//!
//! Every task the proxy spawns ends when the proxy is dropped; each direction
//! of each connection buffers at most 16 KiB.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// The most bytes one direction of one connection holds at a time.
const CHUNK: usize = 16 * 1024;

/// What the proxy does to the bytes (and connections) it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Pass bytes both ways.
    None,
    /// Forward each chunk after this delay, in order.
    Delay(Duration),
    /// Keep connections open but forward nothing either way: bytes are read
    /// and discarded. New connections are accepted but not connected upstream
    /// until the fault clears.
    Blackhole,
    /// Close open connections and close new ones right after accept (a cut
    /// link, or the far side down).
    Refuse,
    /// Forward this many more bytes per direction of each connection, then
    /// behave as [`Fault::Blackhole`] for that connection.
    DropAfter(u64),
}

/// The counters shared between the proxy handle and its tasks.
#[derive(Debug, Default)]
struct Counters {
    /// Open proxied connections.
    open: AtomicUsize,
    /// Connections accepted so far.
    accepted: AtomicU64,
}

/// The receivers every connection task watches.
#[derive(Debug, Clone)]
struct Signals {
    /// The current fault.
    fault: watch::Receiver<Fault>,
    /// Bumped by [`FaultProxy::reset_all`].
    reset: watch::Receiver<u64>,
    /// Set (or closed) when the proxy is dropped.
    stop: watch::Receiver<bool>,
}

/// A TCP proxy on `127.0.0.1` in front of one upstream address, with faults
/// that a test switches at run time.
///
/// Dropping it stops the proxy: the listener closes and every connection it
/// holds is closed on both sides.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    reset: watch::Sender<u64>,
    stop: watch::Sender<bool>,
    counters: Arc<Counters>,
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:0` that forwards to `upstream`, with
    /// [`Fault::None`].
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (fault, fault_rx) = watch::channel(Fault::None);
        let (reset, reset_rx) = watch::channel(0u64);
        let (stop, stop_rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let signals = Signals { fault: fault_rx, reset: reset_rx, stop: stop_rx };
        tokio::spawn(accept_loop(listener, upstream, signals, Arc::clone(&counters)));
        Ok(FaultProxy { addr, fault, reset, stop, counters })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the fault; it applies to open and new connections alike.
    ///
    /// Setting [`Fault::DropAfter`] again gives every connection a fresh budget.
    pub fn set_fault(&self, f: Fault) {
        self.fault.send_replace(f);
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// Resets every open connection now, on both sides; new connections are
    /// still accepted.
    pub fn reset_all(&self) {
        self.reset.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// The number of open proxied connections.
    pub fn connections(&self) -> usize {
        self.counters.open.load(Ordering::SeqCst)
    }

    /// The number of connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // The tasks also see the senders close; the explicit flag says why.
        self.stop.send_replace(true);
    }
}

/// Resolves once the proxy is stopped (or dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // `wait_for` fails only when the sender is gone, which is a stop as well.
    let _ = stop.wait_for(|s| *s).await;
}

/// Accepts connections until the proxy stops, one task each.
async fn accept_loop(listener: TcpListener, upstream: SocketAddr, mut signals: Signals, counters: Arc<Counters>) {
    loop {
        let accepted = tokio::select! {
            biased;
            () = stopped(&mut signals.stop) => return,
            a = listener.accept() => a,
        };
        let Ok((client, _)) = accepted else {
            // A failed accept (the client gave up, or no descriptors left):
            // back off a little rather than spin.
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        counters.accepted.fetch_add(1, Ordering::SeqCst);
        if *signals.fault.borrow() == Fault::Refuse {
            abort(&client);
            continue;
        }
        // Each connection watches the signals from here on: a reset after
        // this accept applies to it.
        let mut conn_signals = signals.clone();
        conn_signals.reset.mark_unchanged();
        let guard = OpenGuard::new(Arc::clone(&counters));
        tokio::spawn(async move {
            let _guard = guard;
            connection(client, upstream, conn_signals).await;
        });
    }
}

/// Counts one open connection while it lives.
#[derive(Debug)]
struct OpenGuard(Arc<Counters>);

impl OpenGuard {
    fn new(counters: Arc<Counters>) -> Self {
        counters.open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(counters)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Closes a stream with a reset rather than an orderly shutdown.
fn abort(stream: &TcpStream) {
    // Best effort: without the option the drop is an orderly close, which
    // the peer also sees.
    let _ = stream.set_zero_linger();
}

/// Resolves when the connection must be cut: the proxy stops, `reset_all`
/// is called, or the fault turns to [`Fault::Refuse`].
async fn cut(signals: &mut Signals) {
    let Signals { fault, reset, stop } = signals;
    tokio::select! {
        () = stopped(stop) => {}
        _ = reset.changed() => {}
        _ = fault.wait_for(|f| *f == Fault::Refuse) => {}
    }
}

/// Runs one proxied connection to its end.
async fn connection(mut client: TcpStream, upstream: SocketAddr, mut signals: Signals) {
    let Some(mut server) = connect_upstream(&mut client, upstream, &mut signals).await else {
        abort(&client);
        return;
    };
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let up = pump(&mut client_read, &mut server_write, signals.fault.clone());
    let down = pump(&mut server_read, &mut client_write, signals.fault.clone());
    let graceful = tokio::select! {
        biased;
        () = cut(&mut signals) => false,
        r = async { tokio::try_join!(up, down) } => r.is_ok(),
    };
    if !graceful {
        abort(&client);
        abort(&server);
    }
}

/// Connects upstream once the fault lets it, discarding what the client sends
/// meanwhile. `None` if the connection is to be closed instead.
async fn connect_upstream(client: &mut TcpStream, upstream: SocketAddr, signals: &mut Signals) -> Option<TcpStream> {
    let mut sink = vec![0u8; CHUNK];
    loop {
        let fault = *signals.fault.borrow_and_update();
        match fault {
            Fault::Refuse => return None,
            Fault::Blackhole => {
                let mut fault_rx = signals.fault.clone();
                tokio::select! {
                    () = cut(signals) => return None,
                    changed = fault_rx.changed() => changed.ok()?,
                    read = client.read(&mut sink) => match read {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    },
                }
            }
            Fault::None | Fault::Delay(_) | Fault::DropAfter(_) => {
                return tokio::select! {
                    () = cut(signals) => None,
                    s = TcpStream::connect(upstream) => s.ok(),
                };
            }
        }
    }
}

/// Why a pump gave up.
fn stopped_error() -> io::Error {
    io::Error::other("fault proxy stopped")
}

/// One direction of a connection under the current fault.
struct Pump {
    fault: watch::Receiver<Fault>,
    /// The fault in force, as last seen.
    current: Fault,
    /// Bytes still to forward under [`Fault::DropAfter`].
    budget: u64,
}

impl Pump {
    fn new(mut fault: watch::Receiver<Fault>) -> Self {
        let current = *fault.borrow_and_update();
        let mut pump = Pump { fault, current, budget: 0 };
        pump.take(current);
        pump
    }

    /// Adopts a new fault; a new [`Fault::DropAfter`] brings a new budget.
    fn take(&mut self, f: Fault) {
        self.current = f;
        if let Fault::DropAfter(n) = f {
            self.budget = n;
        }
    }

    /// Picks up a fault switched since the last look.
    fn refresh(&mut self) -> io::Result<()> {
        if self.fault.has_changed().map_err(|_| stopped_error())? {
            let f = *self.fault.borrow_and_update();
            self.take(f);
        }
        Ok(())
    }

    /// Waits for the fault to switch, and adopts it.
    async fn next_fault(&mut self) -> io::Result<()> {
        self.fault.changed().await.map_err(|_| stopped_error())?;
        let f = *self.fault.borrow_and_update();
        self.take(f);
        Ok(())
    }

    /// Whether bytes are being discarded now.
    fn holding(&self) -> bool {
        match self.current {
            Fault::Blackhole | Fault::Refuse => true,
            Fault::DropAfter(_) => self.budget == 0,
            Fault::None | Fault::Delay(_) => false,
        }
    }

    /// Forwards (or discards) one chunk read at `read_at`; an empty chunk is
    /// the end of the stream, forwarded as a write shutdown once the fault
    /// lets bytes through.
    async fn deliver<W: AsyncWrite + Unpin>(&mut self, w: &mut W, chunk: &[u8], read_at: Instant) -> io::Result<()> {
        loop {
            self.refresh()?;
            if self.holding() {
                if !chunk.is_empty() {
                    return Ok(()); // discarded
                }
                // Hold the end of the stream until the link heals.
                self.next_fault().await?;
                continue;
            }
            if let Fault::Delay(d) = self.current {
                tokio::select! {
                    () = tokio::time::sleep_until(read_at + d) => {}
                    switched = self.next_fault() => {
                        switched?;
                        continue; // look again under the new fault
                    }
                }
            }
            if chunk.is_empty() {
                return w.shutdown().await;
            }
            let n = match self.current {
                Fault::DropAfter(_) => {
                    let n = usize::try_from(self.budget).map_or(chunk.len(), |b| b.min(chunk.len()));
                    self.budget -= n as u64;
                    n
                }
                _ => chunk.len(),
            };
            return w.write_all(&chunk[..n]).await;
        }
    }
}

/// Copies `r` to `w` under the fault until the end of the stream (forwarded
/// as a shutdown) or an error.
async fn pump<R, W>(r: &mut R, w: &mut W, fault: watch::Receiver<Fault>) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut pump = Pump::new(fault);
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = tokio::select! {
            read = r.read(&mut buf) => read?,
            switched = pump.next_fault() => {
                switched?;
                continue;
            }
        };
        pump.deliver(w, &buf[..n], Instant::now()).await?;
        if n == 0 {
            return Ok(());
        }
    }
}
