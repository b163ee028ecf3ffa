//! EventBus: bridges MQTT (an external broker, or an embedded one) and
//! beehive with KubeEdge v1.15's topics (`edge/pkg/eventbus`).
//!
//! - MQTT in: a message on a subscribed topic goes to group `twin` when the
//!   topic is a device or node topic (`$hw/events/device/…`,
//!   `$hw/events/node/…`; resource = the topic in base64url, operation
//!   `response`), otherwise to group `hub`, that is to the cloud (resource =
//!   the topic, operation `upload`). Source `bus`, group `user`, the payload
//!   as a JSON string in both.
//! - Bus in (module `eventbus`): `publish` (from DeviceTwin or the cloud),
//!   `message`, `get_result` on `auth_info`, and `subscribe`/`unsubscribe`,
//!   which are kept in the edge database's `sub_topics` table and made again
//!   at every connect.
//! - `mqttMode` 2 (the default) uses an external broker, 0 the embedded
//!   one (listening on `mqttServerInternal`; `src/broker.rs`), 1 both.
//!
//! Bad input — a payload that is not UTF-8 or is over [`MAX_PAYLOAD_BYTES`],
//! a bus message without a valid topic or with the wrong content — is
//! dropped with one log line naming the node and the module, and counted in
//! `edgehive_eventbus_dropped_total{reason}`; nothing else is disturbed.
//!
//! **Architecture Invariant:** the EventBus reaches the other edge modules
//! only through beehive, and speaks MQTT only (no cloud connection: what
//! goes to the cloud goes through EdgeHub, group `hub`).

mod backoff;
mod broker;
mod bus;
mod config;
mod external;
mod metrics;
mod store;
mod topics;

pub use broker::MAX_CONNECTIONS;
pub use bus::EventBus;
pub use config::{BrokerTls, ConfigError, EventBusConfig, MqttMode};
pub use metrics::EventBusMetrics;
pub use store::StoreError;
pub use topics::{MAX_PAYLOAD_BYTES, MAX_STORED_TOPICS, SUB_TOPICS, twin_resource};
