//! The etcd backend, over etcd's v3 JSON gateway (`/v3/kv/*`, `/v3/watch`):
//! plain HTTP/1.1 and JSON with base64 keys and values, so no gRPC stack is
//! needed. Keys are the Kubernetes layout (`/registry/{resource}/{ns}/{name}`)
//! and a key's revision is etcd's `mod_revision`, as in Kubernetes.
//!
//! Writes are single-key transactions comparing `mod_revision` (or
//! `create_revision == 0` for a create). One watch on `/registry/` with
//! `prev_kv` feeds the change feed; writes by other cloud replicas arrive through it
//! too. If the watch falls behind etcd's compaction the feed is reset, which
//! ends every watch with `Expired` so that clients list again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ChangeFeed;
use super::{Change, KeyValue, Page, WriteError};
use crate::error::{Result, StoreError};
use crate::resources::KEY_ROOT;

/// Deadline of one unary request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Largest response body read (a range page of big objects).
const MAX_RESPONSE: usize = 256 << 20;

/// The etcd backend.
pub(crate) struct Etcd {
    client: Client<HttpConnector, Full<Bytes>>,
    endpoints: Vec<String>,
    current: AtomicUsize,
    stop: CancellationToken,
    closed: AtomicBool,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd").field("endpoints", &self.endpoints).finish_non_exhaustive()
    }
}

fn de_u64<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => s.parse().map_err(serde::de::Error::custom),
        Value::Number(n) => n.as_u64().ok_or_else(|| serde::de::Error::custom("not a u64")),
        Value::Null => Ok(0),
        other => Err(serde::de::Error::custom(format!("unexpected {other}"))),
    }
}

#[derive(Debug, Default, Deserialize)]
struct Header {
    #[serde(default, deserialize_with = "de_u64")]
    revision: u64,
}

#[derive(Debug, Default, Deserialize)]
struct Kv {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
    #[serde(default, deserialize_with = "de_u64")]
    mod_revision: u64,
}

impl Kv {
    fn decode(self) -> Result<KeyValue> {
        let key = B64.decode(&self.key).map_err(|e| StoreError::backend("decode etcd key", e))?;
        let key = String::from_utf8(key).map_err(|e| StoreError::backend("decode etcd key", e))?;
        let value = B64.decode(&self.value).map_err(|e| StoreError::backend("decode etcd value", e))?;
        Ok(KeyValue { key, value: Bytes::from(value), mod_rev: self.mod_revision })
    }
}

#[derive(Debug, Default, Deserialize)]
struct RangeResponse {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    kvs: Vec<Kv>,
    #[serde(default)]
    more: bool,
}

#[derive(Debug, Default, Deserialize)]
struct DeleteResponse {
    #[serde(default)]
    prev_kvs: Vec<Kv>,
}

#[derive(Debug, Default, Deserialize)]
struct TxnOp {
    #[serde(default)]
    response_range: Option<RangeResponse>,
    #[serde(default)]
    response_delete_range: Option<DeleteResponse>,
}

#[derive(Debug, Default, Deserialize)]
struct TxnResponse {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    succeeded: bool,
    #[serde(default)]
    responses: Vec<TxnOp>,
}

#[derive(Debug, Default, Deserialize)]
struct WatchEvent {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    kv: Kv,
    #[serde(default)]
    prev_kv: Option<Kv>,
}

#[derive(Debug, Default, Deserialize)]
struct WatchResult {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    created: bool,
    #[serde(default)]
    canceled: bool,
    #[serde(default, deserialize_with = "de_u64")]
    compact_revision: u64,
    #[serde(default)]
    cancel_reason: String,
    #[serde(default)]
    events: Vec<WatchEvent>,
}

#[derive(Debug, Deserialize)]
struct WatchMessage {
    #[serde(default)]
    result: Option<WatchResult>,
    #[serde(default)]
    error: Option<Value>,
}

fn b64(s: impl AsRef<[u8]>) -> String {
    B64.encode(s)
}

fn is_compacted(message: &str) -> bool {
    message.contains("compacted")
}

impl Etcd {
    pub(crate) async fn open(endpoints: &[String], feed: Arc<dyn ChangeFeed>) -> Result<Arc<Etcd>> {
        if endpoints.is_empty() {
            return Err(StoreError::BadRequest("no etcd endpoints configured".into()));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(60)).build(connector);
        let etcd = Arc::new(Etcd {
            client,
            endpoints: endpoints.iter().map(|e| e.trim_end_matches('/').to_string()).collect(),
            current: AtomicUsize::new(0),
            stop: CancellationToken::new(),
            closed: AtomicBool::new(false),
        });
        let rev = etcd.current_rev().await?;
        feed.prime(rev, rev, Vec::new());
        let watcher = Arc::clone(&etcd);
        tokio::spawn(async move { watcher.feed(feed, rev).await });
        Ok(etcd)
    }

    /// POSTs `body` to `path` on the current endpoint, moving to the next one
    /// on a connection failure.
    async fn call(&self, path: &str, body: &Value) -> Result<Bytes> {
        let payload = Bytes::from(serde_json::to_vec(body).map_err(|e| StoreError::backend("encode etcd request", e))?);
        let mut last = String::new();
        for _ in 0..self.endpoints.len() {
            let idx = self.current.load(Ordering::Relaxed) % self.endpoints.len();
            let url = format!("{}{path}", self.endpoints[idx]);
            let req = http::Request::post(&url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(payload.clone()))
                .map_err(|e| StoreError::backend("build etcd request", e))?;
            let sent = tokio::time::timeout(REQUEST_DEADLINE, async {
                let resp = self.client.request(req).await?;
                let status = resp.status();
                let body = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE)
                    .collect()
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?
                    .to_bytes();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
            })
            .await;
            match sent {
                Ok(Ok((status, body))) if status.is_success() => return Ok(body),
                Ok(Ok((status, body))) => {
                    let message = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|v| {
                            v.get("message").or_else(|| v.get("error")).and_then(Value::as_str).map(str::to_string)
                        })
                        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
                    if is_compacted(&message) {
                        return Err(StoreError::Expired(format!("etcd: {message}")));
                    }
                    return Err(StoreError::Backend(format!("etcd {path}: {status}: {message}")));
                }
                Ok(Err(e)) => last = format!("{url}: {e}"),
                Err(_) => last = format!("{url}: no answer in {REQUEST_DEADLINE:?}"),
            }
            tracing::warn!(endpoint = %self.endpoints[idx], error = %last, "etcd endpoint failed; trying the next");
            self.current.store(idx + 1, Ordering::Relaxed);
        }
        Err(StoreError::Unavailable(format!("etcd: {last}")))
    }

    async fn call_json<T: serde::de::DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        let bytes = self.call(path, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| StoreError::backend(&format!("decode etcd {path} response"), e))
    }

    pub(crate) async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let r: RangeResponse = self.call_json("/v3/kv/range", &json!({"key": b64(key)})).await?;
        r.kvs.into_iter().next().map(Kv::decode).transpose()
    }

    pub(crate) async fn range(&self, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
        let mut req = json!({"key": b64(start), "range_end": b64(end)});
        if limit > 0 {
            req["limit"] = json!(limit.to_string());
        }
        if let Some(rev) = at {
            req["revision"] = json!(rev.to_string());
        }
        let r: RangeResponse = self.call_json("/v3/kv/range", &req).await?;
        let items = r.kvs.into_iter().map(Kv::decode).collect::<Result<Vec<_>>>()?;
        Ok(Page { items, rev: at.unwrap_or(r.header.revision), more: r.more })
    }

    async fn txn(&self, compare: Value, success: Value, key: &str) -> Result<TxnResponse, WriteError> {
        let req =
            json!({"compare": [compare], "success": [success], "failure": [{"request_range": {"key": b64(key)}}]});
        Ok(self.call_json("/v3/kv/txn", &req).await?)
    }

    /// The key's current state from a failed transaction's range.
    fn stale(resp: TxnResponse) -> WriteError {
        let found = resp.responses.into_iter().find_map(|r| r.response_range).and_then(|r| r.kvs.into_iter().next());
        match found.map(Kv::decode) {
            Some(Ok(kv)) => WriteError::Stale(kv),
            Some(Err(e)) => WriteError::Failed(e),
            None => WriteError::Missing,
        }
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<u64, WriteError> {
        let resp = self
            .txn(
                json!({"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}),
                json!({"request_put": {"key": b64(key), "value": b64(&value)}}),
                key,
            )
            .await?;
        if resp.succeeded { Ok(resp.header.revision) } else { Err(WriteError::Exists) }
    }

    pub(crate) async fn update(&self, key: &str, value: Bytes, expected: u64) -> Result<u64, WriteError> {
        let resp = self
            .txn(
                json!({"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": expected.to_string()}),
                json!({"request_put": {"key": b64(key), "value": b64(&value)}}),
                key,
            )
            .await?;
        if resp.succeeded { Ok(resp.header.revision) } else { Err(Self::stale(resp)) }
    }

    pub(crate) async fn delete(&self, key: &str, expected: Option<u64>) -> Result<(u64, KeyValue), WriteError> {
        // Without a precondition, compare against the revision just read so
        // the returned last value is exactly the one deleted.
        let expected = match expected {
            Some(e) => e,
            None => self.get(key).await?.ok_or(WriteError::Missing)?.mod_rev,
        };
        let resp = self
            .txn(
                json!({"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": expected.to_string()}),
                json!({"request_delete_range": {"key": b64(key), "prev_kv": true}}),
                key,
            )
            .await?;
        if !resp.succeeded {
            return Err(Self::stale(resp));
        }
        let rev = resp.header.revision;
        let prev = resp
            .responses
            .into_iter()
            .find_map(|r| r.response_delete_range)
            .and_then(|d| d.prev_kvs.into_iter().next())
            .ok_or(WriteError::Missing)?
            .decode()?;
        Ok((rev, prev))
    }

    pub(crate) async fn current_rev(&self) -> Result<u64> {
        let r: RangeResponse =
            self.call_json("/v3/kv/range", &json!({"key": b64(KEY_ROOT), "count_only": true})).await?;
        Ok(r.header.revision)
    }

    pub(crate) async fn compact(&self, rev: u64) -> Result<()> {
        match self.call("/v3/kv/compaction", &json!({"revision": rev.to_string()})).await {
            Ok(_) => Ok(()),
            // Compacting to a revision already compacted is not an error here.
            Err(StoreError::Expired(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.stop.cancel();
    }

    /// Feeds the change feed from one etcd watch on `/registry/`, reconnecting with
    /// backoff, until closed.
    async fn feed(self: Arc<Self>, feed: Arc<dyn ChangeFeed>, mut rev: u64) {
        let mut backoff = Duration::from_millis(100);
        while !self.closed.load(Ordering::Relaxed) {
            let outcome = tokio::select! {
                _ = self.stop.cancelled() => return,
                r = self.watch_once(&*feed, &mut rev) => r,
            };
            match outcome {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(StoreError::Expired(reason)) => {
                    // History we had not seen is gone: start over from now.
                    match self.current_rev().await {
                        Ok(now) => {
                            tracing::error!(from = rev, now, %reason, "etcd watch fell behind compaction; every watch is restarted");
                            feed.reset(now, &reason);
                            rev = now;
                        }
                        Err(e) => tracing::warn!(error = %e, "etcd unreachable after a compacted watch"),
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, from = rev, "etcd watch ended; reconnecting");
                    tokio::select! {
                        _ = self.stop.cancelled() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn watch_once(&self, feed: &dyn ChangeFeed, rev: &mut u64) -> Result<()> {
        let end = super::prefix_end(KEY_ROOT);
        let body = json!({"create_request": {
            "key": b64(KEY_ROOT), "range_end": b64(&end), "start_revision": (*rev + 1).to_string(),
            "prev_kv": true, "progress_notify": true,
        }});
        let idx = self.current.load(Ordering::Relaxed) % self.endpoints.len();
        let req = http::Request::post(format!("{}/v3/watch", self.endpoints[idx]))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| StoreError::backend("build etcd watch", e))?;
        let resp = tokio::time::timeout(REQUEST_DEADLINE, self.client.request(req))
            .await
            .map_err(|_| {
                self.current.store(idx + 1, Ordering::Relaxed);
                StoreError::Unavailable("etcd watch: no answer".into())
            })?
            .map_err(|e| {
                self.current.store(idx + 1, Ordering::Relaxed);
                StoreError::backend("etcd watch", e)
            })?;
        if !resp.status().is_success() {
            return Err(StoreError::Backend(format!("etcd watch: {}", resp.status())));
        }
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| StoreError::backend("read etcd watch", e))?;
            let Ok(data) = frame.into_data() else { continue };
            buf.extend_from_slice(&data);
            let mut consumed = 0;
            let mut stream = serde_json::Deserializer::from_slice(&buf).into_iter::<WatchMessage>();
            loop {
                match stream.next() {
                    Some(Ok(m)) => {
                        consumed = stream.byte_offset();
                        self.handle(feed, rev, m)?;
                    }
                    Some(Err(e)) if e.is_eof() => break,
                    Some(Err(e)) => return Err(StoreError::backend("decode etcd watch", e)),
                    None => break,
                }
            }
            buf.drain(..consumed);
            if buf.len() > MAX_RESPONSE {
                return Err(StoreError::Backend("etcd watch message too large".into()));
            }
        }
        Err(StoreError::Unavailable("etcd watch stream ended".into()))
    }

    fn handle(&self, feed: &dyn ChangeFeed, rev: &mut u64, msg: WatchMessage) -> Result<()> {
        if let Some(err) = msg.error {
            let text = err.to_string();
            if is_compacted(&text) {
                return Err(StoreError::Expired(text));
            }
            return Err(StoreError::Backend(format!("etcd watch: {text}")));
        }
        let Some(result) = msg.result else { return Ok(()) };
        if result.canceled {
            if result.compact_revision > 0 {
                return Err(StoreError::Expired(format!(
                    "etcd compacted to {} past our revision {}",
                    result.compact_revision, rev
                )));
            }
            return Err(StoreError::Backend(format!("etcd watch canceled: {}", result.cancel_reason)));
        }
        let mut changes = Vec::with_capacity(result.events.len());
        for ev in result.events {
            let kv = ev.kv.decode()?;
            let prev = ev.prev_kv.map(Kv::decode).transpose()?;
            let deleted = ev.kind == "DELETE";
            *rev = (*rev).max(kv.mod_rev);
            changes.push(Change { rev: kv.mod_rev, key: kv.key, value: (!deleted).then_some(kv.value), prev });
        }
        if changes.is_empty() {
            if result.created {
                return Ok(());
            }
            // A progress notification: everything up to here has been sent.
            *rev = (*rev).max(result.header.revision);
            feed.progress(result.header.revision);
        } else {
            feed.publish(changes);
        }
        Ok(())
    }
}
