//! A Kubernetes-compatible HTTPS API over the edgehive store, so that people
//! keep using `kubectl` (and client libraries such as the `kube` crate).
//!
//! At first start [`ApiServer::bind`] creates a CA, a serving certificate and
//! an admin client certificate, and writes a kubeconfig kubectl can use as it
//! is. Requests need a client certificate from that CA (401 otherwise); the
//! `system:masters` group may do anything, anyone else gets 403.
//!
//! Served: discovery (legacy and aggregated), OpenAPI v3 stubs for
//! kubectl's field validation, and for every resource in
//! [`edgehive_store::resources::ALL`] the verbs get, list, watch, create,
//! update, patch (JSON, merge, strategic merge), delete and deletecollection,
//! with Table output for kubectl. Errors are Kubernetes `Status` objects.

mod body;
pub mod defaults;
mod discovery;
mod handlers;
mod metrics;
mod namespaces;
pub mod patch;
mod patching;
mod protobuf;
mod route;
mod server;
mod serviceaccounts;
pub mod status;
pub mod table;
pub mod validation;

pub use server::{ApiServer, ApiServerConfig, MetricsSource, ServeError, User, default_sans};
