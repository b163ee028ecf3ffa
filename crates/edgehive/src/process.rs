//! What every long-running command shares: the shutdown signal, the bus's
//! own metrics, and (on the edge) the `/metrics` endpoint.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The content type of the metrics exposition (OpenMetrics text, as
/// prometheus-client encodes it).
#[cfg(feature = "edge")]
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Registers beehive's queue depths in `registry` under the prefix
/// `beehive`, one gauge per module, read from the bus at each scrape.
pub(crate) fn register_bus(bus: edgehive_beehive::Context, registry: &mut Registry) {
    registry.sub_registry_with_prefix("beehive").register_collector(Box::new(BusMetrics(bus)));
}

/// The bus's queue depths, read at each scrape.
#[derive(Debug)]
struct BusMetrics(edgehive_beehive::Context);

impl Collector for BusMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let stats = self.0.stats();
        let mut family = encoder.encode_descriptor(
            "queue_depth",
            "Messages waiting in a module's mailbox.",
            None,
            MetricType::Gauge,
        )?;
        for m in &stats.modules {
            let depth = ConstGauge::new(i64::try_from(m.queue_depth).unwrap_or(i64::MAX));
            depth.encode(family.encode_family(&[("module", &*m.name)])?)?;
        }
        Ok(())
    }
}

/// Most metrics connections served at once; more wait in the listen backlog.
#[cfg(feature = "edge")]
const METRICS_CONNECTIONS: usize = 4;

/// How long one metrics connection may take, request to answer.
#[cfg(feature = "edge")]
const METRICS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `registry` at `GET /metrics` on `listener` with hyper's HTTP/1.1
/// server until `stop`: one request per connection, each connection done
/// within [`METRICS_DEADLINE`], at most [`METRICS_CONNECTIONS`] at once;
/// any other request gets 404.
#[cfg(feature = "edge")]
pub(crate) async fn serve_metrics(
    listener: tokio::net::TcpListener,
    registry: std::sync::Arc<Registry>,
    stop: tokio_util::sync::CancellationToken,
) {
    use std::sync::Arc;

    let permits = Arc::new(tokio::sync::Semaphore::new(METRICS_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            () = stop.cancelled() => return,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, remote) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, most likely: wait a little rather than spin.
                    tracing::warn!(error = %e, "metrics: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let answer = metrics_answer(&req, &registry);
                async move { Ok::<_, std::convert::Infallible>(answer) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            match tokio::time::timeout(METRICS_DEADLINE, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(%remote, error = %e, "metrics: connection failed"),
                Err(_) => tracing::debug!(%remote, "metrics: connection took too long; closed"),
            }
        });
    }
}

/// The answer to one request of the metrics endpoint.
#[cfg(feature = "edge")]
fn metrics_answer<B>(
    req: &hyper::Request<B>,
    registry: &Registry,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    use hyper::{Method, StatusCode, header};

    let (status, content_type, body) = if req.method() == Method::GET && req.uri().path() == "/metrics" {
        let mut text = String::new();
        // Writing to a String fails only if a collector does; what was
        // written until then is served.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, registry) {
            tracing::warn!(error = %e, "metrics: encoding failed");
        }
        (StatusCode::OK, OPENMETRICS, text)
    } else {
        (StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "only GET /metrics is served here\n".to_owned())
    };
    let mut answer = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)));
    *answer.status_mut() = status;
    answer.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    answer
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(all(test, feature = "edge"))]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::sync::Arc;

    use prometheus_client::metrics::counter::Counter;

    use super::*;

    /// One raw HTTP/1.1 request; the whole answer as text.
    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut conn = std::net::TcpStream::connect(addr).expect("connect");
        conn.set_read_timeout(Some(std::time::Duration::from_secs(10))).expect("read timeout");
        conn.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        conn.read_to_string(&mut answer).expect("read the answer");
        answer
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_endpoint_serves_the_registry_and_nothing_else() {
        let counter = Counter::<u64>::default();
        counter.inc_by(3);
        let mut registry = Registry::with_prefix("edgehive");
        registry.sub_registry_with_prefix("test").register("things", "Things counted", counter);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(serve_metrics(listener, Arc::new(registry), stop.clone()));

        let (metrics, other, post) = tokio::task::spawn_blocking(move || {
            (
                get(addr, "GET /metrics HTTP/1.1\r\nHost: edge\r\n\r\n"),
                get(addr, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n"),
                get(addr, "POST /metrics HTTP/1.1\r\nHost: edge\r\nContent-Length: 0\r\n\r\n"),
            )
        })
        .await
        .expect("the client");
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(metrics.to_ascii_lowercase().contains(&format!("content-type: {OPENMETRICS}\r\n")), "{metrics}");
        assert!(metrics.contains("\r\n\r\n# HELP edgehive_test_things Things counted.\n"), "{metrics}");
        assert!(metrics.contains("\nedgehive_test_things_total 3\n# EOF\n"), "{metrics}");
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        assert!(post.starts_with("HTTP/1.1 404 Not Found\r\n"), "{post}");

        stop.cancel();
        serving.await.expect("the server ends when told");
    }
}
