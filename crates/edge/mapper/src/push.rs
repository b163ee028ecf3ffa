//! Telemetry pushed straight from the mapper to a property's `pushMethod`
//! (an MQTT broker or an HTTP endpoint), as mapper-framework's publishers
//! do — not through the edge's cloud link.
//!
//! The body, on both, is one JSON object per reading:
//! `{"deviceName","propertyName","value","timestamp"}` (milliseconds).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use edgehive_dmi::api;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

/// Deadline of an HTTP push when the spec gives none.
const HTTP_TIMEOUT: Duration = Duration::from_secs(3);

/// One reading to push.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading<'a> {
    /// The device.
    pub device_name: &'a str,
    /// The property.
    pub property_name: &'a str,
    /// The value, as reported.
    pub value: &'a str,
    /// When it was read (ms since the epoch).
    pub timestamp: i64,
}

/// Pushes readings; keeps one MQTT connection per broker.
#[derive(Debug)]
pub struct Pusher {
    mqtt: Mutex<HashMap<String, rumqttc::AsyncClient>>,
    cancel: CancellationToken,
}

impl Pusher {
    /// A pusher whose broker connections end with `cancel`.
    pub fn new(cancel: CancellationToken) -> Pusher {
        Pusher { mqtt: Mutex::default(), cancel }
    }

    /// Pushes `reading` where `method` says; failures are logged (a
    /// reading is not worth holding up the device's loop).
    pub async fn push(&self, method: &api::PushMethod, reading: &Reading<'_>) {
        let Ok(body) = serde_json::to_vec(reading) else { return };
        if let Some(h) = &method.http
            && let Err(e) = push_http(h, body.clone()).await
        {
            tracing::warn!(device = reading.device_name, property = reading.property_name, error = %e, "HTTP push failed");
        }
        if let Some(m) = &method.mqtt
            && let Err(e) = self.push_mqtt(m, body).await
        {
            tracing::warn!(device = reading.device_name, property = reading.property_name, error = %e, "MQTT push failed");
        }
    }

    async fn push_mqtt(&self, m: &api::PushMethodMqtt, body: Vec<u8>) -> Result<(), String> {
        let client = {
            let mut clients = self.mqtt.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match clients.get(&m.address) {
                Some(c) => c.clone(),
                None => {
                    let (host, port) = host_port(&m.address, &["tcp://", "mqtt://"], 1883)?;
                    let id = format!("edgehive-mapper-{}", fastrand::u32(..));
                    let mut opts = rumqttc::MqttOptions::new(id, host, port);
                    opts.set_keep_alive(Duration::from_secs(30));
                    let (client, mut events) = rumqttc::AsyncClient::new(opts, 64);
                    let cancel = self.cancel.clone();
                    let address = m.address.clone();
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                _ = cancel.cancelled() => return,
                                e = events.poll() => if let Err(e) = e {
                                    tracing::debug!(broker = %address, error = %e, "MQTT push connection");
                                    tokio::time::sleep(Duration::from_secs(1)).await;
                                },
                            }
                        }
                    });
                    clients.insert(m.address.clone(), client.clone());
                    client
                }
            }
        };
        let qos = match m.qos {
            0 => rumqttc::QoS::AtMostOnce,
            1 => rumqttc::QoS::AtLeastOnce,
            _ => rumqttc::QoS::ExactlyOnce,
        };
        // try_publish: a broker that is down fills the queue; readings are
        // dropped rather than stalling the device.
        client.try_publish(&m.topic, qos, m.retained, body).map_err(|e| e.to_string())
    }
}

/// `host:port` out of `scheme://host:port` or `host`.
fn host_port(address: &str, schemes: &[&str], default_port: u16) -> Result<(String, u16), String> {
    let rest = schemes.iter().find_map(|s| address.strip_prefix(s)).unwrap_or(address);
    let rest = rest.split('/').next().unwrap_or_default();
    if rest.is_empty() {
        return Err(format!("{address:?} has no host"));
    }
    match rest.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_owned(), p.parse().map_err(|_| format!("{address:?}: bad port"))?)),
        None => Ok((rest.to_owned(), default_port)),
    }
}

async fn push_http(h: &api::PushMethodHttp, body: Vec<u8>) -> Result<(), String> {
    let (host, _) = host_port(&h.hostname, &["http://"], 80)?;
    let port = u16::try_from(h.port).ok().filter(|p| *p > 0).unwrap_or(80);
    let timeout = u64::try_from(h.timeout).ok().filter(|t| *t > 0).map_or(HTTP_TIMEOUT, Duration::from_millis);
    let path = if h.requestpath.starts_with('/') { h.requestpath.clone() } else { format!("/{}", h.requestpath) };
    let request = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(|e| e.to_string())?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = http::Request::post(path)
            .header(http::header::HOST, format!("{host}:{port}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        if resp.status().is_success() { Ok(()) } else { Err(format!("HTTP {}", resp.status())) }
    };
    tokio::time::timeout(timeout, request).await.map_err(|_| format!("no answer within {timeout:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(host_port("tcp://127.0.0.1:1884", &["tcp://"], 1883).unwrap(), ("127.0.0.1".into(), 1884));
        assert_eq!(host_port("broker", &["tcp://"], 1883).unwrap(), ("broker".into(), 1883));
        assert_eq!(host_port("http://h/x", &["http://"], 80).unwrap(), ("h".into(), 80));
        assert!(host_port("tcp://", &["tcp://"], 1883).is_err());
        assert!(host_port("tcp://h:port", &["tcp://"], 1883).is_err());
    }
}
