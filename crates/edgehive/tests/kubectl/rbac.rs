//! Users and RBAC with the real kubectl: a second user minted with
//! `edgehive user kubeconfig`, refused until bound, a `view` user who
//! reads pods but not secrets and cannot write, `kubectl auth can-i`
//! (`--list`), `kubectl auth whoami`, `kubectl create role|rolebinding|
//! clusterrolebinding`, an escalation refused, and service account tokens
//! from `kubectl create token` (audiences, expiry, bound to a pod); then the
//! official Python client's access review and TokenRequest.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{Cloud, refused, wait_for};

/// Runs `edgehive user kubeconfig` for `name` in `groups`; the file's path.
fn mint(cloud: &Cloud, name: &str, groups: &[&str]) -> PathBuf {
    let out = cloud.dir.path().join(format!("{name}.kubeconfig"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgehive"));
    cmd.args(["user", "kubeconfig", "--data-dir"]).arg(cloud.dir.path().join("data")).args(["--name", name]);
    for g in groups {
        cmd.args(["--group", g]);
    }
    let status = cmd.arg("--out").arg(&out).status().unwrap();
    assert!(status.success(), "edgehive user kubeconfig --name {name}");
    out
}

fn run(cloud: &Cloud, kubeconfig: &Path, args: &[&str]) -> Output {
    cloud.kubectl().arg("--kubeconfig").arg(kubeconfig).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `kubectl auth can-i ...` as the user: its yes or no.
fn can_i(cloud: &Cloud, kubeconfig: &Path, args: &[&str]) -> bool {
    let mut a = vec!["auth", "can-i"];
    a.extend(args);
    let o = run(cloud, kubeconfig, &a);
    match stdout(&o).trim() {
        "yes" => true,
        "no" => false,
        other => panic!("kubectl auth can-i {args:?}: {other:?} {}", stderr(&o)),
    }
}

/// kubectl with a bearer token and no client certificate.
fn with_token(cloud: &Cloud, token: &str, args: &[&str]) -> Output {
    let empty = cloud.dir.path().join("empty.kubeconfig");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").unwrap();
    let server = format!("https://{}", cloud.server_address().unwrap());
    let ca = cloud.dir.path().join("data/tls/ca.crt");
    cloud
        .kubectl()
        .arg("--kubeconfig")
        .arg(&empty)
        .args(["--server", &server, "--token", token, "--certificate-authority"])
        .arg(&ca)
        .args(args)
        .output()
        .unwrap()
}

const WORKLOAD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.25
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
data:
  token: c2VjcmV0
---
apiVersion: v1
kind: Namespace
metadata:
  name: team
"#;

#[test]
fn a_view_user_reads_pods_but_not_secrets_and_cannot_write() {
    let cloud = Cloud::start(&[]);
    cloud.apply(WORKLOAD);
    let alice = mint(&cloud, "alice", &["dev"]);

    // No bindings: discovery and questions about oneself only.
    let err = refused(&cloud, &["--kubeconfig", alice.to_str().unwrap(), "get", "pods"], None);
    assert!(
        err.contains(
            r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#
        ),
        "{err}"
    );
    let who: serde_json::Value =
        serde_json::from_str(&cloud.ok(&["--kubeconfig", alice.to_str().unwrap(), "auth", "whoami", "-o", "json"]))
            .unwrap();
    assert_eq!(who["kind"], "SelfSubjectReview");
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    assert_eq!(who["status"]["userInfo"]["groups"], serde_json::json!(["dev", "system:authenticated"]));
    assert!(!can_i(&cloud, &alice, &["get", "pods"]));

    // `view` in default.
    cloud.ok(&["create", "rolebinding", "alice-view", "--clusterrole", "view", "--user", "alice"]);
    wait_for("alice may get pods", || can_i(&cloud, &alice, &["get", "pods"]));
    assert!(!can_i(&cloud, &alice, &["get", "secrets"]));
    assert!(!can_i(&cloud, &alice, &["create", "pods"]));
    assert!(!can_i(&cloud, &alice, &["get", "pods", "-n", "team"]), "only in default");
    assert!(can_i(&cloud, &alice, &["get", "pods", "--subresource", "log"]));
    let list = cloud.ok(&["--kubeconfig", alice.to_str().unwrap(), "auth", "can-i", "--list"]);
    let pods = list.lines().find(|l| l.starts_with("pods ")).unwrap_or_else(|| panic!("{list}"));
    assert!(pods.contains("[get list watch]"), "{list}");
    assert!(
        list.lines().any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io") && l.contains("[create]")),
        "{list}"
    );
    assert!(!list.lines().any(|l| l.starts_with("secrets ")), "{list}");

    let a = alice.to_str().unwrap();
    assert!(cloud.ok(&["--kubeconfig", a, "get", "pods"]).contains("web"));
    let err = refused(&cloud, &["--kubeconfig", a, "get", "secret", "creds"], None);
    assert!(
        err.contains(r#"secrets "creds" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "default""#),
        "{err}"
    );
    let err = refused(&cloud, &["--kubeconfig", a, "create", "configmap", "x", "--from-literal", "a=b"], None);
    assert!(err.contains(r#"User "alice" cannot create resource "configmaps""#), "{err}");
    let err = refused(&cloud, &["--kubeconfig", a, "delete", "pod", "web"], None);
    assert!(err.contains(r#"pods "web" is forbidden: User "alice" cannot delete resource "pods""#), "{err}");

    // Impersonation: the admin may ask as alice; alice may not be someone else.
    let o = cloud.kubectl().args(["auth", "can-i", "get", "secrets", "--as", "alice"]).output().unwrap();
    assert_eq!(stdout(&o).trim(), "no", "{}", stderr(&o));
    let o = cloud.kubectl().args(["auth", "can-i", "get", "pods", "--as", "alice"]).output().unwrap();
    assert_eq!(stdout(&o).trim(), "yes", "{}", stderr(&o));
    let err = refused(&cloud, &["--kubeconfig", a, "get", "pods", "--as", "admin"], None);
    assert!(
        err.contains(r#"users "admin" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );

    // Roles and bindings made by kubectl's typed clients (protobuf bodies).
    cloud.ok(&["create", "role", "pod-reader", "--verb", "get,list", "--resource", "pods", "-n", "team"]);
    cloud.ok(&["create", "rolebinding", "dev-reads", "--role", "pod-reader", "--group", "dev", "-n", "team"]);
    let role = cloud.json(&["get", "role", "pod-reader", "-n", "team"]);
    assert_eq!(role["rules"][0]["verbs"], serde_json::json!(["get", "list"]), "{role}");
    wait_for("alice may list pods in team", || can_i(&cloud, &alice, &["list", "pods", "-n", "team"]));
    assert!(!can_i(&cloud, &alice, &["watch", "pods", "-n", "team"]));
    cloud.ok(&["create", "clusterrolebinding", "dev-view", "--clusterrole", "view", "--group", "dev"]);
    wait_for("alice may list pods everywhere", || can_i(&cloud, &alice, &["list", "pods", "-A"]));
    let binding = cloud.json(&["get", "clusterrolebinding", "dev-view"]);
    assert_eq!(binding["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io", "{binding}");
    // The aggregated roles have their rules.
    let view = cloud.json(&["get", "clusterrole", "view"]);
    assert!(view["rules"].as_array().is_some_and(|r| r.len() > 3), "{view}");
    assert_eq!(view["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");

    // Escalation: `admin` in team lets alice bind what she holds there, not more.
    cloud.ok(&["create", "rolebinding", "alice-admin", "--clusterrole", "admin", "--user", "alice", "-n", "team"]);
    wait_for("alice may bind in team", || can_i(&cloud, &alice, &["create", "rolebindings", "-n", "team"]));
    cloud.ok(&[
        "--kubeconfig",
        a,
        "create",
        "rolebinding",
        "carol-view",
        "--clusterrole",
        "view",
        "--user",
        "carol",
        "-n",
        "team",
    ]);
    let err = refused(
        &cloud,
        &[
            "--kubeconfig",
            a,
            "create",
            "rolebinding",
            "alice-root",
            "--clusterrole",
            "cluster-admin",
            "--user",
            "alice",
            "-n",
            "team",
        ],
        None,
    );
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "alice-root" is forbidden: user "alice" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#),
        "{err}"
    );
    let err = refused(
        &cloud,
        &["--kubeconfig", a, "create", "role", "secrets", "--verb", "get", "--resource", "secrets", "-n", "default"],
        None,
    );
    assert!(err.contains("cannot create resource \"roles\""), "{err}");
    let err = refused(
        &cloud,
        &[
            "--kubeconfig",
            a,
            "create",
            "clusterrolebinding",
            "root",
            "--clusterrole",
            "cluster-admin",
            "--user",
            "alice",
        ],
        None,
    );
    assert!(err.contains("cannot create resource \"clusterrolebindings\""), "{err}");

    // Bad input: a binding to a kind that is no role.
    let err = refused(
        &cloud,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: bad}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Thing, name: x}\n",
        ),
    );
    assert!(
        err.contains(r#"roleRef.kind: Unsupported value: "Thing": supported values: "Role", "ClusterRole""#),
        "{err}"
    );
}

#[test]
fn service_account_tokens_from_kubectl_create_token() {
    let cloud = Cloud::start(&[]);
    cloud.ok(&["create", "serviceaccount", "builder"]);
    cloud.ok(&[
        "create",
        "rolebinding",
        "builder-view",
        "--clusterrole",
        "view",
        "--serviceaccount",
        "default:builder",
    ]);
    let token = cloud.ok(&["create", "token", "builder", "--duration", "10m"]).trim().to_owned();
    let who = with_token(&cloud, &token, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
    assert_eq!(stdout(&who), "system:serviceaccount:default:builder", "{}", stderr(&who));
    wait_for("the account may list pods", || with_token(&cloud, &token, &["get", "pods"]).status.success());
    let o = with_token(&cloud, &token, &["get", "secrets"]);
    assert!(
        stderr(&o).contains(r#"User "system:serviceaccount:default:builder" cannot list resource "secrets""#),
        "{}",
        stderr(&o)
    );

    // For another audience: not a credential here (401).
    let other = cloud.ok(&["create", "token", "builder", "--audience", "https://vault.example", "--duration", "10m"]);
    let o = with_token(&cloud, other.trim(), &["get", "pods"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("error: You must be logged in to the server (Unauthorized)"), "{}", stderr(&o));

    // Shorter than ten minutes: Kubernetes' 422.
    let err = refused(&cloud, &["create", "token", "builder", "--duration", "5m"], None);
    assert!(
        err.contains(r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"#),
        "{err}"
    );
    let err = refused(&cloud, &["create", "token", "nobody"], None);
    assert!(err.contains(r#"serviceaccounts "nobody" not found"#), "{err}");

    // Bound to a pod: valid while the pod is there.
    cloud.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: sleeper}\nspec:\n  serviceAccountName: builder\n  containers: [{name: c, image: busybox}]\n");
    let bound =
        cloud.ok(&["create", "token", "builder", "--bound-object-kind", "Pod", "--bound-object-name", "sleeper"]);
    let bound = bound.trim();
    assert!(with_token(&cloud, bound, &["get", "pods"]).status.success());
    let err = refused(
        &cloud,
        &["create", "token", "builder", "--bound-object-kind", "Pod", "--bound-object-name", "ghost"],
        None,
    );
    assert!(err.contains(r#"pods "ghost" not found"#), "{err}");
    let _ = cloud.kubectl().args(["delete", "pod", "sleeper", "--grace-period", "0", "--force"]).output().unwrap();
    wait_for("the bound token to stop working", || {
        stderr(&with_token(&cloud, bound, &["get", "pods"])).contains("Unauthorized")
    });

    // The official Python client: an access review and a TokenRequest.
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/rbac.py");
    let out = Command::new(python).arg(script).env("KUBECONFIG", &cloud.kubeconfig).output().unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("ok"), "{}", stdout(&out));
}
