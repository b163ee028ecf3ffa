//! The EventBus's configuration: KubeEdge's `modules.eventBus` keys with
//! KubeEdge v1.15's defaults (`pkg/apis/componentconfig/edgecore/v1alpha2`,
//! `types.go` and `default.go`), as a plain struct the binary fills from
//! edgecore.yaml.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;

/// Which brokers the EventBus uses (`mqttMode`).
///
/// KubeEdge compares the numbers (`mode <= 1` runs the internal broker,
/// `mode >= 1` connects to the external one), so the codes matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MqttMode {
    /// 0: only the broker embedded in the edge.
    Internal,
    /// 1: the embedded broker and the external one; publishes go to both.
    Both,
    /// 2 (the default): only the external broker.
    #[default]
    External,
}

impl MqttMode {
    /// The mode of a `mqttMode` number, `None` for any other number.
    ///
    /// ```
    /// use edgehive_eventbus::MqttMode;
    /// assert_eq!(MqttMode::from_code(0), Some(MqttMode::Internal));
    /// assert_eq!(MqttMode::from_code(2), Some(MqttMode::External));
    /// assert_eq!(MqttMode::from_code(3), None);
    /// ```
    pub fn from_code(code: i64) -> Option<MqttMode> {
        match code {
            0 => Some(MqttMode::Internal),
            1 => Some(MqttMode::Both),
            2 => Some(MqttMode::External),
            _ => None,
        }
    }

    /// The `mqttMode` number.
    pub fn code(self) -> u8 {
        match self {
            MqttMode::Internal => 0,
            MqttMode::Both => 1,
            MqttMode::External => 2,
        }
    }

    /// True when the embedded broker runs (modes 0 and 1).
    pub fn uses_internal(self) -> bool {
        self != MqttMode::External
    }

    /// True when the external broker is used (modes 1 and 2).
    pub fn uses_external(self) -> bool {
        self != MqttMode::Internal
    }
}

/// `modules.eventBus.eventBusTLS`: the files of mutual TLS with the
/// external broker, used when its URL is `ssl://`, `tls://`, `tcps://` or
/// `mqtts://` (as paho uses its TLS settings only for those schemes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTls {
    /// `tlsMqttCAFile` (`/etc/kubeedge/ca/rootCA.crt`): the CA (PEM) the
    /// broker's certificate must chain to, for the host in the URL.
    pub ca_file: PathBuf,
    /// `tlsMqttCertFile` (`/etc/kubeedge/certs/server.crt`): the client
    /// certificate (PEM chain) shown to the broker.
    pub cert_file: PathBuf,
    /// `tlsMqttPrivateKeyFile` (`/etc/kubeedge/certs/server.key`): its key.
    pub key_file: PathBuf,
}

impl Default for BrokerTls {
    fn default() -> Self {
        BrokerTls {
            ca_file: PathBuf::from("/etc/kubeedge/ca/rootCA.crt"),
            cert_file: PathBuf::from("/etc/kubeedge/certs/server.crt"),
            key_file: PathBuf::from("/etc/kubeedge/certs/server.key"),
        }
    }
}

/// `modules.eventBus` of edgecore.yaml (KubeEdge v1.15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBusConfig {
    /// `enable` (true): a disabled EventBus is registered but not started.
    pub enable: bool,
    /// `mqttMode` (2, external).
    pub mqtt_mode: MqttMode,
    /// `mqttQOS` (0): the QoS of publishes to the embedded broker. Publishes
    /// to the external broker are QoS 1 whatever this says, as in KubeEdge
    /// (`eventbus.go` `pubMQTT`). 2 is taken as 1 on the embedded broker.
    pub mqtt_qos: u8,
    /// `mqttRetain` (false): the retain flag of publishes to the embedded
    /// broker (those to the external broker are never retained, as in KubeEdge).
    pub mqtt_retain: bool,
    /// `mqttSessionQueueSize` (100): how many publishes wait for a broker
    /// (each client's request queue; the embedded broker's per-connection
    /// outgoing queue). Values below 1 are taken as 1.
    pub mqtt_session_queue_size: usize,
    /// `mqttServerInternal` (`tcp://127.0.0.1:1884`): where the embedded broker listens.
    pub mqtt_server_internal: String,
    /// `mqttServerExternal` (`tcp://127.0.0.1:1883`): the external broker.
    pub mqtt_server_external: String,
    /// `mqttSubClientID` (empty: `hub-client-sub-{time}` as KubeEdge makes it).
    pub mqtt_sub_client_id: String,
    /// `mqttPubClientID` (empty: `hub-client-pub-{time}`).
    pub mqtt_pub_client_id: String,
    /// `mqttUsername` (empty: none) for the external broker.
    pub mqtt_username: String,
    /// `mqttPassword` (empty: none); sent only with a username, as paho does.
    pub mqtt_password: String,
    /// `eventBusTLS` when `enable` is true. A TLS broker URL without it is
    /// refused: KubeEdge then skips checking the broker's certificate,
    /// which edgehive never does.
    pub tls: Option<BrokerTls>,
}

impl Default for EventBusConfig {
    fn default() -> Self {
        EventBusConfig {
            enable: true,
            mqtt_mode: MqttMode::External,
            mqtt_qos: 0,
            mqtt_retain: false,
            mqtt_session_queue_size: 100,
            mqtt_server_internal: "tcp://127.0.0.1:1884".to_owned(),
            mqtt_server_external: "tcp://127.0.0.1:1883".to_owned(),
            mqtt_sub_client_id: String::new(),
            mqtt_pub_client_id: String::new(),
            mqtt_username: String::new(),
            mqtt_password: String::new(),
            tls: None,
        }
    }
}

/// A configuration the EventBus cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A broker URL that is not `tcp://host:port` (or `mqtt://`).
    #[error("modules.eventBus.{key}: {reason} (got {url:?})")]
    BadUrl {
        /// The key: `mqttServerExternal` or `mqttServerInternal`.
        key: &'static str,
        /// The value.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `mqttQOS` above 2.
    #[error("modules.eventBus.mqttQOS: {0} is not a QoS (0, 1 or 2)")]
    BadQos(u8),
    /// A TLS broker without `eventBusTLS`, or its files do not load.
    #[error("modules.eventBus.eventBusTLS: {0}")]
    Tls(String),
}

/// Where a broker is: host and port of a `tcp://` URL, and whether it
/// speaks TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerAddr {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
}

impl BrokerAddr {
    /// Parses `tcp://host:port` (paho's form; `mqtt://` is taken as a synonym,
    /// and a missing port is 1883), or a TLS broker's `ssl://`, `tls://`,
    /// `tcps://` or `mqtts://` (a missing port is 8883). `ws://` and
    /// `wss://` are refused: WebSocket brokers are not implemented.
    pub(crate) fn parse(key: &'static str, url: &str) -> Result<BrokerAddr, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl { key, url: url.to_owned(), reason: reason.to_owned() };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("expected tcp://host:port"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "tcp" | "mqtt" => false,
            "ssl" | "tls" | "tcps" | "mqtts" => true,
            "ws" | "wss" => {
                return Err(bad("WebSocket brokers are not implemented; use tcp:// or ssl://"));
            }
            _ => return Err(bad("unknown scheme; expected tcp://host:port")),
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(bad("expected tcp://host:port"));
        }
        // An IPv6 literal is bracketed: tcp://[::1]:1883.
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '[' in the host"))?;
            (host, after.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
            None if tls => 8883,
            None => 1883,
        };
        Ok(BrokerAddr { host: host.to_owned(), port, tls })
    }

    /// The address to listen on (the embedded broker). Resolves a name such
    /// as `localhost` once, taking the first address.
    pub(crate) fn socket_addr(&self, key: &'static str, url: &str) -> Result<SocketAddr, ConfigError> {
        let bad = |reason: String| ConfigError::BadUrl { key, url: url.to_owned(), reason };
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| bad(format!("cannot resolve the host: {e}")))?
            .next()
            .ok_or_else(|| bad("the host has no address".to_owned()))
    }
}

impl EventBusConfig {
    /// Checks what can be checked before the module starts: the broker URLs
    /// the mode uses (the internal one must resolve), the QoS, and for a
    /// TLS broker that `eventBusTLS` is set and its files load.
    ///
    /// ```
    /// use edgehive_eventbus::EventBusConfig;
    /// assert!(EventBusConfig::default().validate().is_ok());
    /// let bad = EventBusConfig { mqtt_server_external: "ws://broker:80".into(), ..Default::default() };
    /// assert!(bad.validate().unwrap_err().to_string().contains("mqttServerExternal"));
    /// let tls = EventBusConfig { mqtt_server_external: "ssl://broker:8883".into(), ..Default::default() };
    /// assert!(tls.validate().unwrap_err().to_string().contains("eventBusTLS"));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.mqtt_qos > 2 {
            return Err(ConfigError::BadQos(self.mqtt_qos));
        }
        if self.mqtt_mode.uses_external() {
            let addr = BrokerAddr::parse("mqttServerExternal", &self.mqtt_server_external)?;
            match (&self.tls, addr.tls) {
                (None, true) => {
                    return Err(ConfigError::Tls(format!(
                        "mqttServerExternal {:?} is a TLS broker: set eventBusTLS.enable and its CA, certificate and key files",
                        self.mqtt_server_external
                    )));
                }
                // The files load now, or the configuration is refused.
                (Some(files), true) => {
                    crate::external::client_tls(files)?;
                }
                _ => {}
            }
        }
        if self.mqtt_mode.uses_internal() {
            let addr = BrokerAddr::parse("mqttServerInternal", &self.mqtt_server_internal)?;
            if addr.tls {
                return Err(ConfigError::BadUrl {
                    key: "mqttServerInternal",
                    url: self.mqtt_server_internal.clone(),
                    reason: "the embedded broker listens on tcp:// only".into(),
                });
            }
            addr.socket_addr("mqttServerInternal", &self.mqtt_server_internal)?;
        }
        Ok(())
    }

    /// The request queue size, at least 1.
    pub(crate) fn queue_size(&self) -> usize {
        self.mqtt_session_queue_size.max(1)
    }
}

/// KubeEdge's default client id when none is configured:
/// `{prefix}{the first 10 digits of the Unix time in milliseconds}`
/// (`mqtt/client.go` `InitSubClient`), i.e. the time in seconds for dates
/// after 2001.
pub(crate) fn default_client_id(prefix: &str, now_millis: i64) -> String {
    let digits = now_millis.to_string();
    let end = digits.len().min(10);
    format!("{prefix}{}", &digits[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_as_paho_takes_them() {
        let a = BrokerAddr::parse("k", "tcp://127.0.0.1:1883").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 1883));
        let a = BrokerAddr::parse("k", "mqtt://broker.local").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("broker.local", 1883));
        let a = BrokerAddr::parse("k", "tcp://[::1]:1884/").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 1884));
        let a = BrokerAddr::parse("k", "ssl://broker.local").unwrap();
        assert_eq!((a.host.as_str(), a.port, a.tls), ("broker.local", 8883, true));
        assert!(!BrokerAddr::parse("k", "tcp://h:1").unwrap().tls);
        for bad in ["127.0.0.1:1883", "wss://h:8883", "tcp://", "tcp://h:0", "tcp://h:x", "tcp://h:1/p", "foo://h:1"] {
            assert!(BrokerAddr::parse("mqttServerExternal", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_kubeedge_s() {
        let c = EventBusConfig::default();
        assert_eq!(c.mqtt_mode.code(), 2);
        assert_eq!((c.mqtt_qos, c.mqtt_retain, c.mqtt_session_queue_size), (0, false, 100));
        assert_eq!(c.mqtt_server_external, "tcp://127.0.0.1:1883");
        assert_eq!(c.mqtt_server_internal, "tcp://127.0.0.1:1884");
        assert!(c.validate().is_ok());
        assert_eq!(EventBusConfig { mqtt_qos: 3, ..c.clone() }.validate(), Err(ConfigError::BadQos(3)));
        let internal = EventBusConfig {
            mqtt_mode: MqttMode::Internal,
            mqtt_server_internal: "tcp://no-such-host.invalid:1".into(),
            ..c
        };
        assert!(internal.validate().unwrap_err().to_string().contains("mqttServerInternal"));
    }

    #[test]
    fn default_client_ids_take_ten_digits() {
        assert_eq!(default_client_id("hub-client-sub-", 1_764_000_000_123), "hub-client-sub-1764000000");
        assert_eq!(default_client_id("hub-client-pub-", 42), "hub-client-pub-42");
    }
}
