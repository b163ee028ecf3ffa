//! The store's conformance suite: every test runs on SQLite and on a real
//! etcd, and checks the semantics Kubernetes clients rely on.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Harness, Kind, configmap, pod};
use edgehive_store::resources::{CONFIGMAPS, EVENTS, NODES, PODS};
use edgehive_store::selector::{FieldSelector, LabelSelector};
use edgehive_store::watch::{REVISION_WAIT, TooLargeResourceVersion};
use edgehive_store::{
    DeleteOptions, DeleteOutcome, EventType, ListOptions, StoreError, WatchEnd, WatchFilter, WatchOptions, WatchStart,
};
use edgehive_testkit::eventually;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

on_both_backends!(
    create_assigns_identity_and_rejects_duplicates,
    generate_name_picks_a_free_name,
    dry_run_create_prepares_without_writing,
    generation_is_kept_by_the_kinds_that_have_one,
    update_is_optimistic,
    a_callers_error_ends_an_update_and_writes_nothing,
    concurrent_read_modify_writes_lose_nothing,
    delete_checks_preconditions,
    pods_are_deleted_gracefully,
    grace_runs_out,
    events_expire_after_their_time_to_live,
    finalizers_hold_deletion,
    list_filters_by_namespace_labels_and_fields,
    list_pages_are_a_consistent_snapshot,
    paging_with_a_selector_fills_pages,
    compaction_expires_old_revisions,
    watch_delivers_changes_in_order,
    watch_selector_transitions,
    watch_initial_state_then_changes,
    watch_too_old_is_expired,
    reads_wait_for_a_revision_not_reached,
    watch_bookmarks_report_progress,
    thousand_watchers_share_one_encoding,
    slow_watcher_is_ended_alone,
    oversize_objects_are_refused,
    data_survives_a_restart,
    second_replica_sees_writes,
    corrupt_rows_are_reported_and_skipped,
);

/// A read-modify-write whose function refuses, with an error type of the
/// caller's own, ends at once: nothing is written, the error comes back as
/// it is, and the store's own errors (a missing object) convert into it.
async fn a_callers_error_ends_an_update_and_writes_nothing(kind: Kind) {
    #[derive(Debug, PartialEq)]
    enum Mine {
        Refused(String),
        Store(String),
    }
    impl From<StoreError> for Mine {
        fn from(e: StoreError) -> Mine {
            Mine::Store(e.to_string())
        }
    }
    let h = Harness::new(kind).await;
    let s = &h.store;
    let created = s.create(&CONFIGMAPS, configmap("default", "c", json!({"k": "v"}))).await.unwrap();
    let mut calls = 0;
    let refused = s
        .update_with(&CONFIGMAPS, "default", "c", |_| {
            calls += 1;
            Err(Mine::Refused("no".into()))
        })
        .await;
    assert_eq!(refused.unwrap_err(), Mine::Refused("no".into()));
    assert_eq!(calls, 1, "not retried");
    assert_eq!(s.get(&CONFIGMAPS, "default", "c").await.unwrap().rev(), created.rev(), "nothing written");
    let missing = s.update_with(&CONFIGMAPS, "default", "nope", |_| Ok::<_, Mine>(None)).await;
    assert!(matches!(missing, Err(Mine::Store(m)) if m.contains("not found")));
}

fn name_set(items: &[edgehive_store::Object]) -> Vec<String> {
    items.iter().map(|o| o.name().to_string()).collect()
}

async fn create_assigns_identity_and_rejects_duplicates(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let a = s.create(&CONFIGMAPS, configmap("default", "a", json!({"k": "v"}))).await.unwrap();
    let v = a.value().unwrap();
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["kind"], "ConfigMap");
    assert_eq!(v["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(edgehive_store::parse_rfc3339(v["metadata"]["creationTimestamp"].as_str().unwrap()).is_some());
    assert_eq!(v["metadata"]["resourceVersion"], a.rev().to_string());
    assert_eq!(v["metadata"].get("generation"), None, "ConfigMaps have no generation in Kubernetes");
    let b = s.create(&NODES, json!({"metadata": {"name": "n1"}})).await.unwrap();
    assert!(b.rev() > a.rev(), "revisions are global and strictly increasing");
    assert_eq!(b.namespace(), "");
    match s.create(&CONFIGMAPS, configmap("default", "a", json!({}))).await {
        Err(StoreError::AlreadyExists { name, .. }) => assert_eq!(name, "a"),
        other => panic!("duplicate create: {other:?}"),
    }
    let got = s.get(&CONFIGMAPS, "default", "a").await.unwrap();
    assert_eq!(got.json().unwrap(), a.json().unwrap(), "get returns what create returned");
    assert!(matches!(s.get(&CONFIGMAPS, "default", "zz").await, Err(StoreError::NotFound { .. })));
    assert!(matches!(s.get(&CONFIGMAPS, "other", "a").await, Err(StoreError::NotFound { .. })));
    s.close().await;
}

async fn generate_name_picks_a_free_name(kind: Kind) {
    let h = Harness::new(kind).await;
    let mut names = BTreeSet::new();
    for _ in 0..20 {
        let obj = json!({"metadata": {"generateName": "web-", "namespace": "default"}});
        let o = h.store.create(&CONFIGMAPS, obj).await.unwrap();
        assert!(o.name().starts_with("web-") && o.name().len() == 9, "{}", o.name());
        names.insert(o.name().to_string());
    }
    assert_eq!(names.len(), 20);
    h.store.close().await;
}

async fn dry_run_create_prepares_without_writing(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let before = s.current_rev().await.unwrap();
    let v = s.create_dry_run(&CONFIGMAPS, configmap("default", "a", json!({"k": "v"}))).await.unwrap();
    assert_eq!((v["apiVersion"].as_str(), v["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
    assert_eq!(v["metadata"]["uid"].as_str().unwrap().len(), 36, "{v}");
    assert!(edgehive_store::parse_rfc3339(v["metadata"]["creationTimestamp"].as_str().unwrap()).is_some(), "{v}");
    assert_eq!(v["metadata"].get("resourceVersion"), None, "nothing stored, so no resourceVersion: {v}");
    assert_eq!(v["metadata"].get("generation"), None, "{v}");
    assert!(matches!(s.get(&CONFIGMAPS, "default", "a").await, Err(StoreError::NotFound { .. })));
    assert_eq!(s.current_rev().await.unwrap(), before, "a dry run writes nothing");
    let p = s.create_dry_run(&PODS, pod("default", "p", None, json!({}))).await.unwrap();
    assert_eq!(p["metadata"]["generation"], 1, "{p}");
    // A generated name is picked; a taken one is refused as create refuses it.
    let g = s.create_dry_run(&CONFIGMAPS, json!({"metadata": {"generateName": "web-", "namespace": "default"}})).await;
    assert!(g.unwrap()["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    s.create(&CONFIGMAPS, configmap("default", "a", json!({}))).await.unwrap();
    match s.create_dry_run(&CONFIGMAPS, configmap("default", "a", json!({}))).await {
        Err(StoreError::AlreadyExists { name, .. }) => assert_eq!(name, "a"),
        other => panic!("dry run of a taken name: {other:?}"),
    }
    s.close().await;
}

/// Pods (since Kubernetes 1.33) and custom resources have a generation that
/// moves with their spec and when their deletion starts; ConfigMaps have none.
async fn generation_is_kept_by_the_kinds_that_have_one(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let generation = |o: &edgehive_store::Object| o.value().unwrap()["metadata"].get("generation").cloned();
    let p = s.create(&PODS, pod("default", "p", Some("edge-1"), json!({}))).await.unwrap();
    assert_eq!(generation(&p), Some(json!(1)));
    let labelled = s
        .update_with::<_, StoreError>(&PODS, "default", "p", |cur| {
            let mut v = cur.to_value()?;
            v["metadata"]["labels"] = json!({"a": "b"});
            v["status"] = json!({"phase": "Running"});
            Ok(Some(v))
        })
        .await
        .unwrap();
    assert_eq!(generation(&labelled), Some(json!(1)), "metadata and status leave it");
    let changed = s
        .update_with::<_, StoreError>(&PODS, "default", "p", |cur| {
            let mut v = cur.to_value()?;
            v["spec"]["activeDeadlineSeconds"] = json!(60);
            Ok(Some(v))
        })
        .await
        .unwrap();
    assert_eq!(generation(&changed), Some(json!(2)), "the spec moves it");
    let marked = s.delete(&PODS, "default", "p", &DeleteOptions::default()).await.unwrap();
    assert_eq!(generation(marked.object()), Some(json!(3)), "the start of a graceful deletion moves it");
    let shorter = DeleteOptions { grace_period_seconds: Some(5), ..DeleteOptions::default() };
    let shortened = s.delete(&PODS, "default", "p", &shorter).await.unwrap();
    assert_eq!(generation(shortened.object()), Some(json!(3)), "a shorter grace does not");

    let cm = s.create(&CONFIGMAPS, configmap("default", "c", json!({"k": "1"}))).await.unwrap();
    assert_eq!(generation(&cm), None);
    let mut v = cm.to_value().unwrap();
    v["data"]["k"] = json!("2");
    v["metadata"]["generation"] = json!(5);
    assert_eq!(generation(&s.update(&CONFIGMAPS, v).await.unwrap()), None, "a writer cannot give it one");
    s.close().await;
}

async fn update_is_optimistic(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let a = s.create(&CONFIGMAPS, configmap("default", "a", json!({"k": "1"}))).await.unwrap();
    let mut v = a.to_value().unwrap();
    v["data"]["k"] = json!("2");
    let b = s.update(&CONFIGMAPS, v.clone()).await.unwrap();
    assert!(b.rev() > a.rev());
    assert_eq!(b.value().unwrap()["data"]["k"], "2");
    // The same stale resourceVersion again: Conflict, and nothing changes.
    v["data"]["k"] = json!("3");
    match s.update(&CONFIGMAPS, v).await {
        Err(StoreError::Conflict { reason, .. }) => assert!(reason.contains("has been modified"), "{reason}"),
        other => panic!("stale update: {other:?}"),
    }
    assert_eq!(s.get(&CONFIGMAPS, "default", "a").await.unwrap().value().unwrap()["data"]["k"], "2");
    // Without a resourceVersion: unconditional. Identity fields are kept.
    let mut u = json!({"metadata": {"name": "a", "namespace": "default", "uid": "forged", "creationTimestamp": "2001-01-01T00:00:00Z"}, "data": {"k": "4"}});
    let c = s.update(&CONFIGMAPS, u.clone()).await.unwrap();
    assert_eq!(c.uid(), a.uid());
    assert_eq!(
        c.value().unwrap()["metadata"]["creationTimestamp"],
        a.value().unwrap()["metadata"]["creationTimestamp"]
    );
    assert_eq!(c.value().unwrap()["metadata"].get("generation"), None, "a ConfigMap never gets a generation");
    // A no-op update writes nothing.
    u["metadata"]["resourceVersion"] = json!(c.rev().to_string());
    let d = s.update(&CONFIGMAPS, u).await.unwrap();
    assert_eq!(d.rev(), c.rev());
    // Updating what does not exist.
    assert!(matches!(
        s.update(&CONFIGMAPS, configmap("default", "ghost", json!({}))).await,
        Err(StoreError::NotFound { .. })
    ));
    s.close().await;
}

async fn concurrent_read_modify_writes_lose_nothing(kind: Kind) {
    let h = Harness::new(kind).await;
    h.store.create(&CONFIGMAPS, configmap("default", "counter", json!({"n": "0"}))).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let s = h.store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                s.update_with::<_, StoreError>(&CONFIGMAPS, "default", "counter", |cur| {
                    let mut v = cur.to_value()?;
                    let n: u64 = v["data"]["n"].as_str().unwrap().parse().unwrap();
                    v["data"]["n"] = json!((n + 1).to_string());
                    Ok(Some(v))
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let v = h.store.get(&CONFIGMAPS, "default", "counter").await.unwrap();
    assert_eq!(v.value().unwrap()["data"]["n"], "200");
    h.store.close().await;
}

async fn delete_checks_preconditions(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let a = s.create(&CONFIGMAPS, configmap("default", "a", json!({}))).await.unwrap();
    let wrong_uid = DeleteOptions { uid: Some("nope".into()), ..DeleteOptions::default() };
    match s.delete(&CONFIGMAPS, "default", "a", &wrong_uid).await {
        Err(StoreError::Conflict { reason, .. }) => assert!(reason.contains("UID in precondition: nope")),
        other => panic!("{other:?}"),
    }
    let wrong_rv = DeleteOptions { resource_version: Some(a.rev() + 100), ..DeleteOptions::default() };
    assert!(matches!(s.delete(&CONFIGMAPS, "default", "a", &wrong_rv).await, Err(StoreError::Conflict { .. })));
    s.get(&CONFIGMAPS, "default", "a").await.unwrap();
    let right =
        DeleteOptions { uid: a.uid().map(str::to_string), resource_version: Some(a.rev()), ..DeleteOptions::default() };
    match s.delete(&CONFIGMAPS, "default", "a", &right).await.unwrap() {
        DeleteOutcome::Deleted(o) => {
            assert!(o.rev() > a.rev());
            assert_eq!(o.uid(), a.uid());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(s.get(&CONFIGMAPS, "default", "a").await, Err(StoreError::NotFound { .. })));
    assert!(matches!(
        s.delete(&CONFIGMAPS, "default", "a", &DeleteOptions::default()).await,
        Err(StoreError::NotFound { .. })
    ));
    s.close().await;
}

async fn pods_are_deleted_gracefully(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    s.create(&PODS, pod("default", "bound", Some("edge-1"), json!({}))).await.unwrap();
    s.create(&PODS, pod("default", "pending", None, json!({}))).await.unwrap();
    // Not bound to a node: deleted at once.
    assert!(matches!(
        s.delete(&PODS, "default", "pending", &DeleteOptions::default()).await.unwrap(),
        DeleteOutcome::Deleted(_)
    ));
    // Bound: marked, with the pod's grace period (30 s by default).
    let marked = match s.delete(&PODS, "default", "bound", &DeleteOptions::default()).await.unwrap() {
        DeleteOutcome::Pending(o) => o,
        other => panic!("{other:?}"),
    };
    let v = marked.value().unwrap();
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);
    let at = edgehive_store::parse_rfc3339(v["metadata"]["deletionTimestamp"].as_str().unwrap()).unwrap();
    let left = at - time::OffsetDateTime::now_utc();
    assert!(left > time::Duration::seconds(25) && left <= time::Duration::seconds(31), "{left}");
    assert!(s.get(&PODS, "default", "bound").await.unwrap().is_terminating());
    // Deleting again with a longer grace changes nothing; the node confirms with 0.
    let again = DeleteOptions { grace_period_seconds: Some(60), ..DeleteOptions::default() };
    let same = s.delete(&PODS, "default", "bound", &again).await.unwrap();
    assert_eq!(same.object().rev(), marked.rev());
    let confirm = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
    assert!(matches!(s.delete(&PODS, "default", "bound", &confirm).await.unwrap(), DeleteOutcome::Deleted(_)));
    assert!(matches!(s.get(&PODS, "default", "bound").await, Err(StoreError::NotFound { .. })));
    s.close().await;
}

async fn grace_runs_out(kind: Kind) {
    let h = Harness::new(kind).await;
    h.store.create(&PODS, pod("default", "p", Some("edge-1"), json!({}))).await.unwrap();
    let opts = DeleteOptions { grace_period_seconds: Some(1), ..DeleteOptions::default() };
    assert!(matches!(h.store.delete(&PODS, "default", "p", &opts).await.unwrap(), DeleteOutcome::Pending(_)));
    let mut gone = false;
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < end {
        if matches!(h.store.get(&PODS, "default", "p").await, Err(StoreError::NotFound { .. })) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the pod is removed once its grace period has run out");
    h.store.close().await;
}

async fn events_expire_after_their_time_to_live(kind: Kind) {
    let h = Harness::with(kind, |c| c.event_ttl = Some(Duration::from_secs(2))).await;
    let s = &h.store;
    let at = |secs: i64| edgehive_store::rfc3339(time::OffsetDateTime::now_utc() + time::Duration::seconds(secs));
    let event = |name: &str, last: String| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Started",
            "lastTimestamp": last})
    };
    // One written once; one that says it was last seen a day from now (a
    // clock ahead: it expires all the same); one written again and again.
    s.create(&EVENTS, event("once", at(0))).await.unwrap();
    s.create(&EVENTS, event("ahead", at(86_400))).await.unwrap();
    s.create(&EVENTS, event("busy", at(0))).await.unwrap();
    let gone = |name: &'static str| async move {
        matches!(s.get(&EVENTS, "default", name).await, Err(StoreError::NotFound { .. }))
    };
    let end = tokio::time::Instant::now() + WAIT;
    let mut n = 0;
    while !(gone("once").await && gone("ahead").await) {
        assert!(tokio::time::Instant::now() < end, "the Events past their time to live are removed");
        // Counted up: each write starts its time to live again.
        s.update_with::<_, StoreError>(&EVENTS, "default", "busy", |cur| {
            let mut v = cur.to_value()?;
            n += 1;
            v["count"] = json!(n);
            Ok(Some(v))
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.get(&EVENTS, "default", "busy").await.expect("an Event written within its time to live stays");
    s.close().await;
}

async fn finalizers_hold_deletion(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let mut cm = configmap("default", "held", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    s.create(&CONFIGMAPS, cm).await.unwrap();
    let pending = s.delete(&CONFIGMAPS, "default", "held", &DeleteOptions::default()).await.unwrap();
    assert!(matches!(pending, DeleteOutcome::Pending(_)));
    assert!(s.get(&CONFIGMAPS, "default", "held").await.unwrap().is_terminating());
    // Other changes keep it; removing the last finalizer completes the delete.
    s.update_with::<_, StoreError>(&CONFIGMAPS, "default", "held", |cur| {
        let mut v = cur.to_value()?;
        v["metadata"]["labels"] = json!({"x": "y"});
        Ok(Some(v))
    })
    .await
    .unwrap();
    s.get(&CONFIGMAPS, "default", "held").await.unwrap();
    s.update_with::<_, StoreError>(&CONFIGMAPS, "default", "held", |cur| {
        let mut v = cur.to_value()?;
        v["metadata"]["finalizers"] = json!([]);
        Ok(Some(v))
    })
    .await
    .unwrap();
    assert!(matches!(s.get(&CONFIGMAPS, "default", "held").await, Err(StoreError::NotFound { .. })));
    s.close().await;
}

async fn list_filters_by_namespace_labels_and_fields(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    s.create(&PODS, pod("a", "web-1", Some("n1"), json!({"app": "web", "tier": "front"}))).await.unwrap();
    s.create(&PODS, pod("a", "web-2", Some("n2"), json!({"app": "web"}))).await.unwrap();
    s.create(&PODS, pod("b", "db-1", Some("n1"), json!({"app": "db"}))).await.unwrap();
    s.create(&PODS, pod("b", "free", None, json!({}))).await.unwrap();
    s.update_with::<_, StoreError>(&PODS, "b", "db-1", |cur| {
        let mut v = cur.to_value()?;
        v["status"]["phase"] = json!("Running");
        Ok(Some(v))
    })
    .await
    .unwrap();
    let list = |ns: Option<&str>, labels: &str, fields: &str| ListOptions {
        namespace: ns.map(str::to_string),
        labels: LabelSelector::parse(labels).unwrap(),
        fields: FieldSelector::parse(fields).unwrap(),
        ..ListOptions::default()
    };
    let cases: &[(Option<&str>, &str, &str, &[&str])] = &[
        (None, "", "", &["web-1", "web-2", "db-1", "free"]),
        (Some("a"), "", "", &["web-1", "web-2"]),
        (None, "app=web", "", &["web-1", "web-2"]),
        (None, "app!=web", "", &["db-1", "free"]),
        (None, "app in (db,web),tier", "", &["web-1"]),
        (None, "!app", "", &["free"]),
        (None, "", "spec.nodeName=n1", &["web-1", "db-1"]),
        (None, "", "spec.nodeName=", &["free"]),
        (None, "", "status.phase=Running", &["db-1"]),
        (None, "", "status.phase!=Running,metadata.namespace=b", &["free"]),
        (None, "", "metadata.name=web-2", &["web-2"]),
        (Some("a"), "", "metadata.name=web-2", &["web-2"]),
        (Some("a"), "app=db", "metadata.name=web-2", &[]),
        (Some("b"), "", "metadata.name=web-2", &[]),
        (Some("a"), "", "metadata.name=web", &[]),
        (Some("b"), "app=web", "", &[]),
    ];
    for (ns, labels, fields, want) in cases {
        let got = s.list(&PODS, &list(*ns, labels, fields)).await.unwrap();
        let mut got = name_set(&got.items);
        got.sort();
        let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "ns={ns:?} labels={labels:?} fields={fields:?}");
    }
    match s.list(&PODS, &list(None, "", "spec.unknown=x")).await {
        Err(StoreError::BadRequest(m)) => assert_eq!(m, "field label not supported: spec.unknown"),
        other => panic!("{other:?}"),
    }
    s.close().await;
}

async fn list_pages_are_a_consistent_snapshot(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    for i in 0..25 {
        s.create(&CONFIGMAPS, configmap("default", &format!("cm-{i:02}"), json!({"i": i.to_string()}))).await.unwrap();
    }
    let mut opts = ListOptions { namespace: Some("default".into()), limit: 10, ..ListOptions::default() };
    let first = s.list(&CONFIGMAPS, &opts).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let snapshot = first.rev;
    // Changes after the first page must not show in the later ones.
    s.delete(&CONFIGMAPS, "default", "cm-15", &DeleteOptions::default()).await.unwrap();
    s.create(&CONFIGMAPS, configmap("default", "cm-15a", json!({}))).await.unwrap();
    s.update_with::<_, StoreError>(&CONFIGMAPS, "default", "cm-20", |cur| {
        let mut v = cur.to_value()?;
        v["data"]["i"] = json!("changed");
        Ok(Some(v))
    })
    .await
    .unwrap();
    let mut names = name_set(&first.items);
    let mut token = first.continue_token.clone();
    let mut pages = 1;
    while let Some(t) = token {
        opts.continue_token = Some(t);
        let page = s.list(&CONFIGMAPS, &opts).await.unwrap();
        assert_eq!(page.rev, snapshot, "every page is read at the first page's revision");
        for o in &page.items {
            if o.name() == "cm-20" {
                assert_eq!(o.value().unwrap()["data"]["i"], "20", "the snapshot's version");
            }
        }
        names.extend(name_set(&page.items));
        token = page.continue_token;
        pages += 1;
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, want);
    // A fresh list sees the changes.
    let now = s.list(&CONFIGMAPS, &ListOptions::default()).await.unwrap();
    let now = name_set(&now.items);
    assert!(now.contains(&"cm-15a".to_string()) && !now.contains(&"cm-15".to_string()));
    // Garbage tokens are refused.
    opts.continue_token = Some("not-a-token".into());
    assert!(matches!(s.list(&CONFIGMAPS, &opts).await, Err(StoreError::BadRequest(_))));
    s.close().await;
}

async fn paging_with_a_selector_fills_pages(kind: Kind) {
    let h = Harness::new(kind).await;
    for i in 0..200 {
        let labels = if i % 10 == 0 { json!({"pick": "yes"}) } else { json!({}) };
        h.store.create(&PODS, pod("default", &format!("p-{i:03}"), None, labels)).await.unwrap();
    }
    let mut opts =
        ListOptions { labels: LabelSelector::parse("pick=yes").unwrap(), limit: 7, ..ListOptions::default() };
    let mut all = Vec::new();
    loop {
        let page = h.store.list(&PODS, &opts).await.unwrap();
        if page.continue_token.is_some() {
            assert_eq!(page.items.len(), 7, "pages are full until the last");
        }
        all.extend(name_set(&page.items));
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => break,
        }
    }
    let want: Vec<String> = (0..200).step_by(10).map(|i| format!("p-{i:03}")).collect();
    assert_eq!(all, want);
    h.store.close().await;
}

async fn compaction_expires_old_revisions(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    for i in 0..5 {
        s.create(&CONFIGMAPS, configmap("default", &format!("c{i}"), json!({}))).await.unwrap();
    }
    let page = s.list(&CONFIGMAPS, &ListOptions { limit: 2, ..ListOptions::default() }).await.unwrap();
    let token = page.continue_token.clone().unwrap();
    s.create(&CONFIGMAPS, configmap("default", "later", json!({}))).await.unwrap();
    let now = s.current_rev().await.unwrap();
    s.compact(now).await.unwrap();
    let opts = ListOptions { continue_token: Some(token), limit: 2, ..ListOptions::default() };
    match s.list(&CONFIGMAPS, &opts).await {
        Err(StoreError::Expired(m)) => assert!(m.contains("continue parameter is too old"), "{m}"),
        other => panic!("expected Expired, got {other:?}"),
    }
    let exact = ListOptions { resource_version: Some(page.rev), exact: true, ..ListOptions::default() };
    assert!(matches!(s.list(&CONFIGMAPS, &exact).await, Err(StoreError::Expired(_))));
    // The current state is untouched.
    assert_eq!(s.list(&CONFIGMAPS, &ListOptions::default()).await.unwrap().items.len(), 6);
    s.close().await;
}

async fn next_event(w: &mut edgehive_store::Watch) -> edgehive_store::WatchEvent {
    tokio::time::timeout(WAIT, w.next()).await.expect("a watch event in time").expect("watch open")
}

async fn watch_delivers_changes_in_order(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let from = s.create(&CONFIGMAPS, configmap("default", "before", json!({}))).await.unwrap().rev();
    let filter = WatchFilter { namespace: Some("default".into()), ..WatchFilter::all(&CONFIGMAPS) };
    let mut w = s.watch(WatchOptions { filter, start: WatchStart::After(from), bookmarks: false }).await.unwrap();
    let a = s.create(&CONFIGMAPS, configmap("default", "a", json!({"v": "1"}))).await.unwrap();
    s.create(&CONFIGMAPS, configmap("other", "x", json!({}))).await.unwrap();
    let mut v = a.to_value().unwrap();
    v["data"]["v"] = json!("2");
    let b = s.update(&CONFIGMAPS, v).await.unwrap();
    let d = s.delete(&CONFIGMAPS, "default", "a", &DeleteOptions::default()).await.unwrap();
    let e1 = next_event(&mut w).await;
    assert_eq!((e1.ty, e1.rev, e1.object().unwrap().name()), (EventType::Added, a.rev(), "a"));
    let e2 = next_event(&mut w).await;
    assert_eq!((e2.ty, e2.rev), (EventType::Modified, b.rev()));
    assert_eq!(e2.object().unwrap().value().unwrap()["data"]["v"], "2");
    let e3 = next_event(&mut w).await;
    assert_eq!((e3.ty, e3.rev), (EventType::Deleted, d.object().rev()));
    let last: Value = serde_json::from_slice(e3.object().unwrap().json().unwrap()).unwrap();
    assert_eq!(last["data"]["v"], "2", "DELETED carries the last state");
    assert_eq!(last["metadata"]["resourceVersion"], d.object().rev().to_string());
    let line: Value = serde_json::from_slice(&e3.line(&CONFIGMAPS).unwrap()).unwrap();
    assert_eq!(line["type"], "DELETED");
    assert!(w.try_next().is_none(), "no event from another namespace");
    s.close().await;
}

async fn watch_selector_transitions(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let a = s.create(&PODS, pod("default", "p", None, json!({"app": "web"}))).await.unwrap();
    let filter = WatchFilter { labels: LabelSelector::parse("role=front").unwrap(), ..WatchFilter::all(&PODS) };
    let mut w = s.watch(WatchOptions { filter, start: WatchStart::After(a.rev()), bookmarks: false }).await.unwrap();
    let set_role = |role: Option<&'static str>| {
        move |cur: &edgehive_store::Object| {
            let mut v = cur.to_value()?;
            match role {
                Some(r) => v["metadata"]["labels"]["role"] = json!(r),
                None => {
                    v["metadata"]["labels"].as_object_mut().unwrap().remove("role");
                }
            }
            Ok(Some(v))
        }
    };
    s.update_with::<_, StoreError>(&PODS, "default", "p", set_role(Some("front"))).await.unwrap();
    s.update_with::<_, StoreError>(&PODS, "default", "p", set_role(Some("back"))).await.unwrap();
    let e1 = next_event(&mut w).await;
    assert_eq!(e1.ty, EventType::Added, "starts to match");
    let e2 = next_event(&mut w).await;
    assert_eq!(e2.ty, EventType::Deleted, "stops matching");
    let obj: Value = serde_json::from_slice(e2.object().unwrap().json().unwrap()).unwrap();
    assert_eq!(obj["metadata"]["labels"]["role"], "front", "the last state that matched");
    assert_eq!(obj["metadata"]["resourceVersion"], e2.rev.to_string());
    s.update_with::<_, StoreError>(&PODS, "default", "p", set_role(None)).await.unwrap();
    s.update_with::<_, StoreError>(&PODS, "default", "p", set_role(Some("front"))).await.unwrap();
    assert_eq!(next_event(&mut w).await.ty, EventType::Added);
    s.close().await;
}

async fn watch_initial_state_then_changes(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    for n in ["a", "b"] {
        s.create(&CONFIGMAPS, configmap("default", n, json!({}))).await.unwrap();
    }
    let opts = WatchOptions {
        filter: WatchFilter::all(&CONFIGMAPS),
        start: WatchStart::InitialState { end_bookmark: true },
        bookmarks: true,
    };
    let mut w = s.watch(opts).await.unwrap();
    let e1 = next_event(&mut w).await;
    let e2 = next_event(&mut w).await;
    assert_eq!((e1.ty, e2.ty), (EventType::Added, EventType::Added));
    let mut seen = vec![e1.object().unwrap().name().to_string(), e2.object().unwrap().name().to_string()];
    seen.sort();
    assert_eq!(seen, ["a", "b"]);
    let end = next_event(&mut w).await;
    assert!(end.ty == EventType::Bookmark && end.is_initial_end());
    let line: Value = serde_json::from_slice(&end.line(&CONFIGMAPS).unwrap()).unwrap();
    assert_eq!(line["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    s.create(&CONFIGMAPS, configmap("default", "c", json!({}))).await.unwrap();
    loop {
        let e = next_event(&mut w).await;
        if e.ty == EventType::Bookmark {
            continue;
        }
        assert_eq!((e.ty, e.object().unwrap().name()), (EventType::Added, "c"));
        break;
    }
    s.close().await;
}

async fn watch_too_old_is_expired(kind: Kind) {
    let h = Harness::with(kind, |c| c.watch_history = 16).await;
    let s = &h.store;
    let first = s.create(&CONFIGMAPS, configmap("default", "first", json!({}))).await.unwrap().rev();
    for i in 0..40 {
        s.create(&CONFIGMAPS, configmap("default", &format!("c{i}"), json!({}))).await.unwrap();
    }
    let start = WatchStart::After(first);
    let opts = WatchOptions { filter: WatchFilter::all(&CONFIGMAPS), start, bookmarks: false };
    eventually("the watch cache caught up", WAIT, || s.watch_cache().rev() >= first + 40).await;
    match s.watch(opts).await {
        Err(StoreError::Expired(m)) => assert!(m.starts_with("too old resource version"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A recent revision is fine.
    let recent = s.watch_cache().rev() - 5;
    let mut w = s
        .watch(WatchOptions {
            filter: WatchFilter::all(&CONFIGMAPS),
            start: WatchStart::After(recent),
            bookmarks: false,
        })
        .await
        .unwrap();
    for _ in 0..5 {
        assert_eq!(next_event(&mut w).await.ty, EventType::Added);
    }
    s.close().await;
}

async fn reads_wait_for_a_revision_not_reached(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let now = s.current_rev().await.unwrap();
    // A write that reaches the revision ends the wait.
    let (waited, made) = tokio::join!(s.wait_for_revision(now + 1), async {
        eventually("the read waits", WAIT, || s.watch_cache().revision_waiters() == 1).await;
        s.create(&CONFIGMAPS, configmap("default", "a", json!({}))).await.unwrap()
    });
    assert_eq!((waited, made.rev()), (Ok(()), now + 1));
    // One never reached: Kubernetes' 3 s, then what was asked and what is.
    let started = tokio::time::Instant::now();
    let too_large = TooLargeResourceVersion { requested: now + 1000, current: now + 1 };
    assert_eq!(s.wait_for_revision(now + 1000).await, Err(too_large));
    assert!(started.elapsed() >= REVISION_WAIT);
    let not_older = ListOptions { resource_version: Some(now + 1000), ..ListOptions::default() };
    match s.list(&CONFIGMAPS, &not_older).await {
        Err(StoreError::Timeout(m)) => assert_eq!(m, too_large.to_string()),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.watch_cache().revision_waiters(), 0);
    s.close().await;
}

async fn watch_bookmarks_report_progress(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let a = s.create(&CONFIGMAPS, configmap("default", "a", json!({}))).await.unwrap();
    let filter = WatchFilter { namespace: Some("elsewhere".into()), ..WatchFilter::all(&CONFIGMAPS) };
    let mut w = s.watch(WatchOptions { filter, start: WatchStart::After(a.rev()), bookmarks: true }).await.unwrap();
    let b = s.create(&CONFIGMAPS, configmap("default", "b", json!({}))).await.unwrap();
    // No event matches, but a bookmark says the watch has reached b's revision.
    loop {
        let e = next_event(&mut w).await;
        assert_eq!(e.ty, EventType::Bookmark);
        if e.rev >= b.rev() {
            let line: Value = serde_json::from_slice(&e.line(&CONFIGMAPS).unwrap()).unwrap();
            assert_eq!(line["object"]["kind"], "ConfigMap");
            assert_eq!(line["object"]["metadata"]["resourceVersion"], e.rev.to_string());
            break;
        }
    }
    s.close().await;
}

async fn thousand_watchers_share_one_encoding(kind: Kind) {
    // No reapers: their watches would start at any moment and be counted.
    let h = Harness::with(kind, |c| {
        c.reap_graceful = false;
        c.event_ttl = None;
    })
    .await;
    let s = &h.store;
    let from = s.current_rev().await.unwrap();
    let before = s.watch_cache().stats().watchers;
    let mut watchers = Vec::new();
    for _ in 0..1000 {
        let opts =
            WatchOptions { filter: WatchFilter::all(&CONFIGMAPS), start: WatchStart::After(from), bookmarks: false };
        watchers.push(s.watch(opts).await.unwrap());
    }
    assert_eq!(s.watch_cache().stats().watchers, before + 1000);
    s.create(&CONFIGMAPS, configmap("default", "fan", json!({}))).await.unwrap();
    let mut ptr = None;
    for w in &mut watchers {
        let e = next_event(w).await;
        let line = e.line(&CONFIGMAPS).unwrap();
        match ptr {
            None => ptr = Some(line.as_ptr()),
            Some(p) => assert_eq!(p, line.as_ptr(), "every watcher gets the same encoded bytes"),
        }
    }
    drop(watchers);
    assert_eq!(s.watch_cache().stats().watchers, before, "dropping a watch unsubscribes it");
    s.close().await;
}

async fn slow_watcher_is_ended_alone(kind: Kind) {
    let h = Harness::with(kind, |c| c.watch_queue = 8).await;
    let s = &h.store;
    let from = s.current_rev().await.unwrap();
    let opts =
        || WatchOptions { filter: WatchFilter::all(&CONFIGMAPS), start: WatchStart::After(from), bookmarks: false };
    let mut slow = s.watch(opts()).await.unwrap();
    let mut fast = s.watch(opts()).await.unwrap();
    // The fast one reads each event before the next write, so its queue
    // never holds more than one (etcd's watch stream may deliver in bursts).
    for i in 0..40 {
        s.create(&CONFIGMAPS, configmap("default", &format!("c{i}"), json!({}))).await.unwrap();
        next_event(&mut fast).await;
    }
    // The slow one got what fit in its queue, then the end.
    let mut got = 0;
    let end = loop {
        match tokio::time::timeout(WAIT, slow.next()).await.unwrap() {
            Ok(_) => got += 1,
            Err(end) => break end,
        }
    };
    assert_eq!(end, WatchEnd::Lagged);
    assert!(got <= 8, "{got}");
    assert!(s.watch_cache().stats().lagged >= 1);
    s.close().await;
}

async fn oversize_objects_are_refused(kind: Kind) {
    let h = Harness::with(kind, |c| c.max_object_bytes = 64 * 1024).await;
    let big = "x".repeat(100 * 1024);
    match h.store.create(&CONFIGMAPS, configmap("default", "big", json!({"k": big}))).await {
        Err(StoreError::TooLarge { size, limit, .. }) => assert!(size > limit),
        other => panic!("{other:?}"),
    }
    assert!(matches!(h.store.get(&CONFIGMAPS, "default", "big").await, Err(StoreError::NotFound { .. })));
    h.store.create(&CONFIGMAPS, configmap("default", "small", json!({"k": "v"}))).await.unwrap();
    h.store.close().await;
}

async fn data_survives_a_restart(kind: Kind) {
    let h = Harness::new(kind).await;
    let a = h.store.create(&CONFIGMAPS, configmap("default", "a", json!({"k": "v"}))).await.unwrap();
    let b = h.store.create(&CONFIGMAPS, configmap("default", "b", json!({}))).await.unwrap();
    h.store.close().await;
    let again = h.reopen().await;
    let got = again.get(&CONFIGMAPS, "default", "a").await.unwrap();
    assert_eq!(got.json().unwrap(), a.json().unwrap());
    assert!(again.current_rev().await.unwrap() >= b.rev());
    let c = again.create(&CONFIGMAPS, configmap("default", "c", json!({}))).await.unwrap();
    assert!(c.rev() > b.rev(), "revisions keep increasing across restarts");
    if kind == Kind::Sqlite {
        // SQLite primes the watch history from its log: a watch from before
        // the restart still works.
        let opts =
            WatchOptions { filter: WatchFilter::all(&CONFIGMAPS), start: WatchStart::After(a.rev()), bookmarks: false };
        let mut w = again.watch(opts).await.unwrap();
        let e = next_event(&mut w).await;
        assert_eq!((e.ty, e.object().unwrap().name()), (EventType::Added, "b"));
    }
    again.close().await;
}

async fn second_replica_sees_writes(kind: Kind) {
    if kind == Kind::Sqlite {
        return; // one process owns a SQLite file; replicas need etcd
    }
    let h = Harness::new(kind).await;
    let other = h.reopen().await;
    let from = other.current_rev().await.unwrap();
    let opts = WatchOptions { filter: WatchFilter::all(&PODS), start: WatchStart::After(from), bookmarks: false };
    let mut w = other.watch(opts).await.unwrap();
    h.store.create(&PODS, pod("default", "p", None, json!({}))).await.unwrap();
    let e = next_event(&mut w).await;
    assert_eq!((e.ty, e.object().unwrap().name()), (EventType::Added, "p"));
    // A conflicting write through the other replica is refused.
    let stale = h.store.get(&PODS, "default", "p").await.unwrap().to_value().unwrap();
    other
        .update_with::<_, StoreError>(&PODS, "default", "p", |cur| {
            let mut v = cur.to_value()?;
            v["metadata"]["labels"] = json!({"by": "other"});
            Ok(Some(v))
        })
        .await
        .unwrap();
    assert!(matches!(h.store.update(&PODS, stale).await, Err(StoreError::Conflict { .. })));
    other.close().await;
    h.store.close().await;
}

/// Overwrites the stored bytes of `key` behind the store's back.
fn corrupt(h: &Harness, key: &str, bytes: &[u8]) {
    match h.kind {
        Kind::Sqlite => {
            let db = rusqlite::Connection::open(h.dir.path().join("state.db")).unwrap();
            let n = db.execute("UPDATE kv SET value = ?1 WHERE key = ?2", rusqlite::params![bytes, key]).unwrap();
            assert_eq!(n, 1);
        }
        Kind::Etcd => {
            use base64::Engine as _;
            use std::io::{Read as _, Write as _};
            let b64 = base64::engine::general_purpose::STANDARD;
            let body = json!({"key": b64.encode(key), "value": b64.encode(bytes)}).to_string();
            let url = h.etcd.as_ref().unwrap().url.trim_start_matches("http://").to_string();
            let mut s = std::net::TcpStream::connect(&url).unwrap();
            write!(s, "POST /v3/kv/put HTTP/1.0\r\nHost: {url}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert!(out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"), "{out}");
        }
    }
}

async fn corrupt_rows_are_reported_and_skipped(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    for n in ["a", "bad", "c", "odd"] {
        s.create(&CONFIGMAPS, configmap("default", n, json!({"k": n}))).await.unwrap();
    }
    corrupt(
        &h,
        "/registry/configmaps/default/bad",
        b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"na",
    );
    // JSON, but not an object with a metadata object.
    corrupt(&h, "/registry/configmaps/default/odd", b"[1,2]");
    // The list serves the rest, checked but not made into client JSON
    // (which a controller listing every Node would hold twice).
    let list = s.list(&CONFIGMAPS, &ListOptions::default()).await.unwrap();
    assert_eq!(name_set(&list.items), ["a", "c"]);
    assert!(list.items.iter().all(|o| !o.has_derived()));
    // The object itself says what is wrong and where.
    let bad = s.get(&CONFIGMAPS, "default", "bad").await.unwrap();
    match bad.json() {
        Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "/registry/configmaps/default/bad"),
        other => panic!("{other:?}"),
    }
    // Other objects are unharmed and writable; the bad one can be deleted.
    s.update_with::<_, StoreError>(&CONFIGMAPS, "default", "a", |cur| {
        let mut v = cur.to_value()?;
        v["data"]["k"] = json!("a2");
        Ok(Some(v))
    })
    .await
    .unwrap();
    assert!(matches!(
        s.delete(&CONFIGMAPS, "default", "bad", &DeleteOptions::default()).await.unwrap(),
        DeleteOutcome::Deleted(_)
    ));
    s.create(&CONFIGMAPS, configmap("default", "bad", json!({"k": "fixed"}))).await.unwrap();
    assert_eq!(s.list(&CONFIGMAPS, &ListOptions::default()).await.unwrap().items.len(), 3);
    s.close().await;
}

/// An informer whose controller stalls long enough for its watch to lag
/// and the history to move past it relists and carries on: it neither
/// skips the changes nor retries the gone revision forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_that_falls_behind_the_history_relists() {
    use edgehive_store::informer::{Change, inform};
    let h = Harness::with(Kind::Sqlite, |c| {
        c.watch_history = 16;
        c.watch_queue = 4;
    })
    .await;
    h.store.create(&CONFIGMAPS, configmap("default", "cm-0", json!({}))).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(inform(h.store.clone(), "test", &CONFIGMAPS, tx, stop.clone()));
    let first = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap();
    assert!(matches!(first, Change::Relisted { ref objects, .. } if objects.len() == 1));
    // The controller takes nothing while 100 changes go by: far more than
    // the watcher's queue and the history hold.
    for i in 1..=100 {
        h.store.create(&CONFIGMAPS, configmap("default", &format!("cm-{i}"), json!({}))).await.unwrap();
    }
    let mut names = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while names.len() < 101 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await.expect("the informer catches up").unwrap() {
            Change::Relisted { objects, .. } => {
                names = objects.iter().map(|o| o.name().to_string()).collect();
            }
            Change::Upsert { object, .. } => {
                names.insert(object.name().to_string());
            }
            Change::Deleted(o) => panic!("nothing was deleted: {}", o.name()),
        }
    }
    assert_eq!(names.len(), 101);
    stop.cancel();
    task.await.unwrap();
    h.store.close().await;
}
