//! Kubernetes object semantics, for objects held as JSON: what every writer
//! of the store (the API server, the controllers, edges through
//! EdgeController) applies the same way.
//!
//! - [`defaults`]: Kubernetes' defaults for new objects, in place;
//! - [`validation`]: Kubernetes' validation, with its field paths and
//!   messages (it validates what it is given: default first);
//! - [`admit`]: the two together as a write needs them — defaults, then the
//!   decode check and validation of the defaulted object;
//! - [`conversion`]: between a stored form and another version served over it
//!   (events.k8s.io/v1 Events over the core Events);
//! - [`openapi`]: the OpenAPI v3 component schemas of a group-version (for `kubectl explain`);
//! - [`patch`]: JSON patch, JSON merge patch and strategic merge patch;
//! - [`cron`]: CronJob schedules: parsed as Kubernetes parses them, and when they fire;
//! - [`status`]: failures as Kubernetes `Status` errors ([`status::ApiError`]);
//! - [`structural`]: CRD structural schemas: their check, and pruning,
//!   defaulting and validation of custom objects against them;
//! - [`quantity`]: resource quantities (`100m`, `1Gi`);
//! - [`scheduling`]: where a pod may run: node selector and affinity,
//!   taints and tolerations, requests against allocatable, anti-affinity.
//!
//! What is namespaced, and the names of each kind, come from one table: the
//! store's [`edgehive_store::resources`].
//!
//! **Architecture Invariant:** no HTTP stack and no I/O: this crate knows
//! status codes (the `http` crate's types), never a connection; the
//! controllers use it instead of the API server (checked by the architecture
//! test).

pub mod admit;
pub mod apply;
pub mod conversion;
pub mod cron;
pub mod defaults;
pub mod openapi;
pub mod patch;
pub mod quantity;
pub mod scheduling;
pub mod status;
pub mod structural;
pub mod validation;
