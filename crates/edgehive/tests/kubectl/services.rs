//! Services with the real kubectl: ClusterIPs and NodePorts from the
//! configured ranges, Kubernetes' refusals when a range is full or an
//! address or port is taken, the `kubernetes` Service, Endpoints and
//! EndpointSlices that follow the pods' readiness, and `kube-root-ca.crt`
//! in every namespace.

use std::net::Ipv4Addr;

use serde_json::Value;

use super::{Cloud, refused, wait_for};

const PODS: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: edge-1
  labels:
    node-role.kubernetes.io/edge: ""
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
spec:
  nodeName: edge-1
  containers:
  - name: app
    image: nginx:1.25
    ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-2
  labels: {app: web}
spec:
  nodeName: edge-1
  containers:
  - name: app
    image: nginx:1.25
    ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

/// Sets a pod's IP, phase and readiness as its edge would report them.
fn report(cloud: &Cloud, pod: &str, ip: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = format!(
        r#"{{"status":{{"phase":"Running","podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"conditions":[{{"type":"Ready","status":"{status}"}}]}}}}"#
    );
    cloud.ok(&["patch", "pod", pod, "--subresource=status", "--type=merge", "-p", &patch]);
}

fn in_range(ip: &str, base: [u8; 4], prefix: u32) -> bool {
    let ip: Ipv4Addr = ip.parse().unwrap();
    let mask = u32::MAX << (32 - prefix);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(base)) && u32::from(ip) & !mask != 0
}

fn slices_of(cloud: &Cloud, svc: &str) -> Vec<Value> {
    let list = cloud.json(&["get", "endpointslices", "-l", &format!("kubernetes.io/service-name={svc}")]);
    list["items"].as_array().cloned().unwrap_or_default()
}

#[test]
fn services_get_addresses_and_endpoints_follow_ready_pods() {
    let cloud = Cloud::start(&[]);
    // The `kubernetes` Service: the range's first address, 443 to the API server's port.
    wait_for("the kubernetes service", || {
        cloud.kubectl().args(["get", "service", "kubernetes"]).output().unwrap().status.success()
    });
    let k = cloud.json(&["get", "service", "kubernetes"]);
    assert_eq!(k["spec"]["clusterIP"], "10.0.0.1");
    assert_eq!(k["spec"]["ports"][0]["name"], "https");
    assert_eq!(k["spec"]["ports"][0]["port"], 443);
    let api_port: i64 = cloud.server_address().unwrap().rsplit_once(':').unwrap().1.parse().unwrap();
    assert_eq!(k["spec"]["ports"][0]["targetPort"], api_port);
    wait_for("the kubernetes endpoints", || {
        cloud.kubectl().args(["get", "endpoints", "kubernetes"]).output().unwrap().status.success()
    });
    let ep = cloud.json(&["get", "endpoints", "kubernetes"]);
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], api_port);
    assert_eq!(slices_of(&cloud, "kubernetes")[0]["endpoints"][0]["conditions"]["ready"], true);

    // kubectl create service clusterip: an address in kube-apiserver's default range.
    cloud.ok(&["create", "service", "clusterip", "plain", "--tcp=80:8080"]);
    let plain = cloud.json(&["get", "service", "plain"]);
    let ip = plain["spec"]["clusterIP"].as_str().unwrap();
    assert!(in_range(ip, [10, 0, 0, 0], 24) && ip != "10.0.0.1", "{ip}");
    assert_eq!(plain["spec"]["clusterIPs"][0], ip);

    // NodePort: a port in 30000-32767; one asked for by number is refused once taken.
    cloud.ok(&["create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080"]);
    let np = cloud.json(&["get", "service", "np"]);
    assert_eq!(np["spec"]["ports"][0]["nodePort"], 30080);
    cloud.ok(&["create", "service", "nodeport", "np2", "--tcp=81:8080"]);
    let any = cloud.json(&["get", "service", "np2"])["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&any) && any != 30080, "{any}");
    let err = refused(&cloud, &["create", "service", "nodeport", "np3", "--tcp=82:8080", "--node-port=30080"], None);
    assert!(
        err.contains(r#"Service "np3" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"#),
        "{err}"
    );
    let err = refused(&cloud, &["create", "service", "nodeport", "low", "--tcp=83:8080", "--node-port=8080"], None);
    assert!(
        err.contains("spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"),
        "{err}"
    );
    // A ClusterIP asked for by number: taken, and outside the range.
    let taken = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: dup}}\nspec: {{clusterIP: {ip}, ports: [{{port: 80}}]}}\n"
    );
    let err = refused(&cloud, &["apply", "-f", "-"], Some(&taken));
    assert!(
        err.contains(&format!(
            r#"spec.clusterIPs: Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is already allocated"#
        )),
        "{err}"
    );
    let outside =
        "apiVersion: v1\nkind: Service\nmetadata: {name: far}\nspec: {clusterIP: 10.1.2.3, ports: [{port: 80}]}\n";
    let err = refused(&cloud, &["apply", "-f", "-"], Some(outside));
    assert!(
        err.contains("failed to allocate IP 10.1.2.3: the provided IP (10.1.2.3) is not in the valid range. The range of valid IPs is 10.0.0.0/24"),
        "{err}"
    );
    // Released on delete: the address can be asked for again.
    cloud.ok(&["delete", "service", "plain"]);
    cloud.apply(&taken);
    assert_eq!(cloud.json(&["get", "service", "dup"])["spec"]["clusterIP"], ip);
    // Headless and ExternalName Services get none.
    cloud.ok(&["create", "service", "clusterip", "headless", "--clusterip=None"]);
    assert_eq!(cloud.json(&["get", "service", "headless"])["spec"]["clusterIP"], "None");
    cloud.ok(&["create", "service", "externalname", "ext", "--external-name=db.example.com"]);
    assert!(cloud.json(&["get", "service", "ext"])["spec"].get("clusterIP").is_none());

    // Endpoints and slices from the selected pods: the named targetPort resolved.
    cloud.apply(PODS);
    report(&cloud, "web-1", "10.244.1.5", true);
    report(&cloud, "web-2", "10.244.1.6", false);
    wait_for("the web endpoints", || {
        let out = cloud.kubectl().args(["get", "endpoints", "web", "-o", "json"]).output().unwrap();
        let ep: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        ep["subsets"][0]["addresses"][0]["ip"] == "10.244.1.5"
            && ep["subsets"][0]["notReadyAddresses"][0]["ip"] == "10.244.1.6"
    });
    let ep = cloud.json(&["get", "endpoints", "web"]);
    let subset = &ep["subsets"][0];
    assert_eq!(subset["ports"], serde_json::json!([{"name": "http", "port": 8080, "protocol": "TCP"}]));
    assert_eq!(subset["addresses"][0]["nodeName"], "edge-1");
    assert_eq!(subset["addresses"][0]["targetRef"]["name"], "web-1");
    assert!(ep["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"].is_string());
    wait_for("the web slice", || {
        slices_of(&cloud, "web").first().is_some_and(|s| s["endpoints"].as_array().is_some_and(|e| e.len() == 2))
    });
    let slice = &slices_of(&cloud, "web")[0];
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Service");
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(slice["ports"][0]["port"], 8080);
    let by_ip =
        |ip: &str| slice["endpoints"].as_array().unwrap().iter().find(|e| e["addresses"][0] == ip).cloned().unwrap();
    assert_eq!(by_ip("10.244.1.5")["conditions"]["ready"], true);
    assert_eq!(by_ip("10.244.1.6")["conditions"]["ready"], false);
    assert_eq!(by_ip("10.244.1.6")["nodeName"], "edge-1");
    // kubectl's own view of them.
    let table = cloud.ok(&["get", "endpoints", "web"]);
    assert!(table.contains("10.244.1.5:8080"), "{table}");

    // The second pod becomes ready: both are addresses.
    report(&cloud, "web-2", "10.244.1.6", true);
    wait_for("both ready", || {
        let ep = cloud.json(&["get", "endpoints", "web"]);
        ep["subsets"][0]["addresses"].as_array().is_some_and(|a| a.len() == 2)
            && ep["subsets"][0].get("notReadyAddresses").is_none()
    });
    // A pod deleted leaves both.
    // (kubectl warns on stderr that a forced deletion does not wait.)
    let out = cloud.kubectl().args(["delete", "pod", "web-1", "--grace-period=0", "--force"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for("web-1 gone from the slice", || {
        slices_of(&cloud, "web")[0]["endpoints"].as_array().is_some_and(|e| e.len() == 1)
    });

    // kube-root-ca.crt in every namespace, a new one too, and made again when deleted.
    cloud.ok(&["create", "namespace", "team-a"]);
    wait_for("the root CA in team-a", || {
        cloud
            .kubectl()
            .args(["get", "configmap", "kube-root-ca.crt", "-n", "team-a"])
            .output()
            .unwrap()
            .status
            .success()
    });
    let cm = cloud.json(&["get", "configmap", "kube-root-ca.crt", "-n", "team-a"]);
    let ca = std::fs::read_to_string(cloud.dir.path().join("data/tls/ca.crt")).unwrap_or_default();
    assert!(cm["data"]["ca.crt"].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
    if !ca.is_empty() {
        assert_eq!(cm["data"]["ca.crt"], ca.as_str());
    }
    cloud.ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "team-a"]);
    wait_for("the root CA made again", || {
        cloud
            .kubectl()
            .args(["get", "configmap", "kube-root-ca.crt", "-n", "team-a"])
            .output()
            .unwrap()
            .status
            .success()
    });
    cloud.ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"forged"}}"#,
    ]);
    wait_for("the root CA put back", || {
        cloud.json(&["get", "configmap", "kube-root-ca.crt", "-n", "team-a"])["data"]["ca.crt"] == cm["data"]["ca.crt"]
    });
}

#[test]
fn a_full_cluster_ip_range_is_refused_as_kubernetes_refuses_it() {
    // A /30 has two usable addresses; the first is the `kubernetes` Service's.
    let cloud = Cloud::start(&["--service-cluster-ip-range", "10.0.0.0/30"]);
    wait_for("the kubernetes service", || {
        cloud.kubectl().args(["get", "service", "kubernetes"]).output().unwrap().status.success()
    });
    assert_eq!(cloud.json(&["get", "service", "kubernetes"])["spec"]["clusterIP"], "10.0.0.1");
    cloud.ok(&["create", "service", "clusterip", "one", "--tcp=80"]);
    assert_eq!(cloud.json(&["get", "service", "one"])["spec"]["clusterIP"], "10.0.0.2");
    let err = refused(&cloud, &["create", "service", "clusterip", "two", "--tcp=80"], None);
    assert!(err.contains("Internal error occurred: failed to allocate a serviceIP: range is full"), "{err}");
    // Nothing half-made: the refused Service does not exist, and a freed address is handed out again.
    assert!(refused(&cloud, &["get", "service", "two"], None).contains("not found"));
    cloud.ok(&["delete", "service", "one"]);
    cloud.ok(&["create", "service", "clusterip", "two", "--tcp=80"]);
    assert_eq!(cloud.json(&["get", "service", "two"])["spec"]["clusterIP"], "10.0.0.2");
}

#[test]
fn concurrent_creates_never_share_an_address() {
    let cloud = Cloud::start(&["--service-cluster-ip-range", "10.0.0.0/28"]);
    wait_for("the kubernetes service", || {
        cloud.kubectl().args(["get", "service", "kubernetes"]).output().unwrap().status.success()
    });
    // 14 usable addresses, one for `kubernetes`: 13 Services fit; 16 created at once.
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let mut cmd = cloud.kubectl();
            cmd.args(["create", "service", "clusterip", &format!("s{i}"), "--tcp=80"]);
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut full = 0;
    for h in handles {
        let out = h.wait_with_output().unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("range is full"), "{err}");
            full += 1;
        }
    }
    let list = cloud.json(&["get", "services"]);
    let ips: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .collect();
    let unique: std::collections::BTreeSet<_> = ips.iter().collect();
    assert_eq!(unique.len(), ips.len(), "duplicate addresses: {ips:?}");
    assert_eq!(ips.len() + full, 17, "{ips:?}");
    assert!(ips.iter().all(|ip| in_range(ip, [10, 0, 0, 0], 28)));
}

#[test]
fn the_python_client_reads_endpoints_and_endpoint_slices() {
    let cloud = Cloud::start(&[]);
    wait_for("the kubernetes endpoint slice", || !slices_of(&cloud, "kubernetes").is_empty());
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/services.py");
    let out = std::process::Command::new(&python).arg(script).arg(&cloud.kubeconfig).output().unwrap();
    assert!(
        out.status.success(),
        "the Python client ({python}; scripts/test.sh installs it): {}\nserver log: {}",
        String::from_utf8_lossy(&out.stderr),
        cloud.log()
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let port: i64 = cloud.server_address().unwrap().rsplit_once(':').unwrap().1.parse().unwrap();
    assert_eq!(seen["clusterIP"], "10.0.0.1");
    assert_eq!(seen["endpoints"], serde_json::json!([["127.0.0.1", port]]));
    assert_eq!(seen["slices"], serde_json::json!([{"addressType": "IPv4", "ready": [true], "ports": [port]}]));
}
