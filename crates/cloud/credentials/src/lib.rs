//! Who may join, and who may stay connected: join tokens and node
//! certificates, recorded in the store so that both can be listed and
//! revoked.
//!
//! - **Join tokens** (KubeEdge's `{caHash}.{jwt}`, signed with the CA key by
//!   `edgehive-pki`) each carry an id, and are accepted only while the cloud
//!   keeps a record of that id: a Kubernetes bootstrap token Secret
//!   (`kube-system/bootstrap-token-{id}`, [`records::TokenRecord`]).
//!   Deleting the record revokes the token; expired records are cleaned up
//!   ([`Credentials::keep_tokens`], which also keeps the token KubeEdge's
//!   tools read in `kubeedge/tokensecret` fresh).
//! - **Node certificates**: every certificate the join service issues is
//!   recorded per node (`edgehive-nodes/{node}`, [`records::NodeRecord`]):
//!   the serials still accepted. CloudHub and the join service's renewal
//!   accept a node's certificate only while its serial is there
//!   ([`Credentials::check_certificate`]), so revoking a node
//!   ([`Credentials::revoke_node`]) locks it out at once, and a certificate
//!   replaced by a later join stops working.
//! - **No takeover**: a token does not get a certificate for a node that is
//!   registered and holds a live certificate, unless the token names that
//!   node in its `rejoin-nodes` (an admin's `edgehive token create --rejoin
//!   NODE`), or the Node is deleted first ([`Credentials::authorize_join`]).
//!
//! **Architecture Invariant:** this crate decides and records; it serves
//! nothing. The join service and CloudHub ask it; `edgehive token` writes
//! the same records through the API ([`records`] are the shapes both use).

mod credentials;
mod keeper;
pub mod records;

pub use credentials::{Credentials, JoinGrant, Refusal};
pub use keeper::{CHECK_INTERVAL, KUBEEDGE_TOKEN_SECRET, REFRESH, Schedule};
pub use records::TokenSpec;
