//! A Kubernetes-compatible HTTPS API over the edgehive store, so that people
//! keep using `kubectl` (and client libraries such as the `kube` crate).
//!
//! At first start [`ApiServer::bind`] creates a CA, a serving certificate and
//! an admin client certificate, and writes a kubeconfig kubectl can use as it
//! is. Requests need a client certificate from that CA or a service account
//! token (401 otherwise); the `system:masters` group may do anything, anyone
//! else what RBAC (`rbac.authorization.k8s.io/v1`, with Kubernetes' default
//! roles) allows them.
//!
//! Served: discovery (legacy and aggregated), OpenAPI v2 and v3 with the
//! schemas of every served kind (`kubectl explain`, kubectl's validation),
//! strict/warn/ignore field validation, and for every resource in
//! [`edgehive_store::resources::ALL`] the verbs get, list, watch, create,
//! update, patch (JSON, merge, strategic merge), delete and deletecollection,
//! with Table output for kubectl, the `status` subresource and (Deployments,
//! ReplicaSets, StatefulSets) the `scale` subresource. Errors are Kubernetes
//! `Status` objects.

mod body;
mod context;
mod conversion;
mod crd;
mod discovery;
mod eviction;
mod fieldvalidation;
mod handlers;
mod metrics;
mod metrics_api;
mod namespaces;
mod patching;
mod protobuf;
mod rbac;
mod response;
mod reviews;
mod route;
mod scale;
mod server;
mod service_ranges;
mod serviceaccounts;
mod services;
mod streams;
pub mod table;
mod tokenrequest;

// Kubernetes object semantics (defaults, validation, patches, Status
// errors) live in edgehive-registry, shared with the controllers.
pub(crate) use edgehive_registry::{admit, defaults, patch, status, validation};

pub use context::User;
pub use server::{ApiServer, ApiServerConfig, ServeError, default_sans};
pub use service_ranges::{NodePortRange, ServiceIpRange};
pub use services::ServiceConfig;
pub use streams::{EdgeStreamError, EdgeStreams, REPLY_DEADLINE};

/// Runs the Kubernetes protobuf decoder on `bytes` and drops the result: the entry of the
/// `protobuf_decode` fuzz target in `fuzz/`. Not part of the API.
#[doc(hidden)]
pub fn decode_protobuf_for_fuzzing(bytes: &[u8]) {
    let _ = protobuf::decode(bytes);
}
