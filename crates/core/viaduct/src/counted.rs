//! Bytes on the wire, counted under TLS: what a link really costs (frames,
//! pings, TLS records and their handshakes), for operators and benches.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes written and read, added to by every connection given it.
#[derive(Debug, Default)]
pub struct WireBytes {
    /// Bytes written to the wire.
    pub sent: Counter,
    /// Bytes read from the wire.
    pub received: Counter,
}

impl WireBytes {
    /// (sent, received) so far.
    pub fn get(&self) -> (u64, u64) {
        (self.sent.get(), self.received.get())
    }
}

/// A transport whose reads and writes are counted in a [`WireBytes`].
pub(crate) struct Counted<S> {
    inner: S,
    bytes: Arc<WireBytes>,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, bytes: Arc<WireBytes>) -> Counted<S> {
        Counted { inner, bytes }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            self.bytes.received.inc_by(n as u64);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.bytes.sent.inc_by(*n as u64);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            self.bytes.sent.inc_by(*n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
