//! The service account controller, as Kubernetes' (`pkg/controller/serviceaccount`,
//! `syncNamespace`): every namespace that exists and is not terminating has
//! a `default` ServiceAccount — one created through the API, one a cloud
//! module created directly in the store (`kubeedge`, `edgehive-nodes`), and
//! one whose `default` was deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use edgehive_store::informer::{Change, inform};
use edgehive_store::resources::{NAMESPACES, SERVICE_ACCOUNTS};
use edgehive_store::{ListOptions, Object, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// The service account every namespace has.
pub(crate) const DEFAULT: &str = "default";

/// How long a namespace whose service account could not be made waits
/// before the next try.
const RETRY: Duration = Duration::from_secs(1);

/// Whether content may be created in `ns`: not being deleted (Kubernetes'
/// controller asks for phase `Active`; a namespace written directly to the
/// store may have no phase at all).
fn active(ns: &Object) -> bool {
    let phase = ns.value().ok().and_then(|v| v.pointer("/status/phase")).and_then(Value::as_str);
    !ns.is_terminating() && phase != Some("Terminating")
}

/// Creates `default` in `namespace` unless it is there or the namespace is
/// gone or terminating.
pub(crate) async fn ensure_default(store: &Store, namespace: &str) -> Result<(), StoreError> {
    match store.get(&NAMESPACES, "", namespace).await {
        Ok(ns) if active(&ns) => {}
        Ok(_) | Err(StoreError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    match store.get(&SERVICE_ACCOUNTS, namespace, DEFAULT).await {
        Ok(_) => return Ok(()),
        Err(StoreError::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    let sa =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT, "namespace": namespace}});
    match store.create(&SERVICE_ACCOUNTS, sa).await {
        Ok(_) => {
            tracing::info!(namespace, "created the namespace's default service account");
            Ok(())
        }
        Err(StoreError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every namespace's name.
async fn all_namespaces(store: &Store) -> Result<Vec<String>, StoreError> {
    let list = store.list(&NAMESPACES, &ListOptions::default()).await?;
    Ok(list.items.iter().map(|o| o.name().to_string()).collect())
}

/// The controller: runs until `stop`. Namespaces are looked at when they
/// appear or change, and again when a `default` is deleted; a namespace
/// whose service account could not be made is tried again.
pub(crate) async fn run(store: Store, stop: CancellationToken) {
    let (ns_tx, mut namespaces) = mpsc::channel(256);
    let (sa_tx, mut accounts) = mpsc::channel(256);
    let watches = [
        tokio::spawn(inform(store.clone(), "serviceaccounts", &NAMESPACES, ns_tx, stop.clone())),
        tokio::spawn(inform(store.clone(), "serviceaccounts", &SERVICE_ACCOUNTS, sa_tx, stop.clone())),
    ];
    let mut failed: BTreeSet<String> = BTreeSet::new();
    async move {
        loop {
            let todo: Vec<String> = tokio::select! {
                _ = stop.cancelled() => break,
                change = namespaces.recv() => match change {
                    Some(Change::Upsert { object, .. }) => vec![object.name().to_string()],
                    Some(Change::Relisted { objects, .. }) => objects.iter().map(|o| o.name().to_string()).collect(),
                    Some(Change::Deleted(_)) => continue,
                    None => break,
                },
                change = accounts.recv() => match change {
                    Some(Change::Deleted(sa)) if sa.name() == DEFAULT => vec![sa.namespace().to_string()],
                    // A relist may stand for deletions the watch never saw.
                    Some(Change::Relisted { .. }) => match all_namespaces(&store).await {
                        Ok(all) => all,
                        Err(e) => {
                            tracing::warn!(error = %e, "list namespaces");
                            continue;
                        }
                    },
                    Some(_) => continue,
                    None => break,
                },
                _ = tokio::time::sleep(RETRY), if !failed.is_empty() => std::mem::take(&mut failed).into_iter().collect(),
            };
            for ns in todo {
                if let Err(e) = ensure_default(&store, &ns).await {
                    tracing::warn!(namespace = %ns, error = %e, "create the namespace's default service account");
                    failed.insert(ns);
                }
            }
        }
    }
    .instrument(tracing::info_span!("serviceaccounts"))
    .await;
    for w in watches {
        let _ = w.await;
    }
}
