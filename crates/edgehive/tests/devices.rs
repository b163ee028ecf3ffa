//! Devices end to end, with the real processes: `edgehive cloud`, an
//! `edgehive edge` with EventBus on a real broker, kubectl, and plain
//! MQTT clients speaking KubeEdge's topics.
#![allow(clippy::unwrap_used)]

mod support;

use edgehive_testkit::fixtures::TempDir;
use edgehive_testkit::mosquitto::{self, Mosquitto, Subscriber};
use serde_json::{Value, json};
use support::{Cloud, CutProxy, Edge, wait_until};

const MODEL: &str = r#"
apiVersion: devices.kubeedge.io/v1beta1
kind: DeviceModel
metadata: {name: thermo-model, namespace: default}
spec:
  protocol: PROTOCOL
  properties:
  - {name: temperature, type: INT, accessMode: ReadWrite}
  - {name: humidity, type: INT, accessMode: ReadOnly}
"#;

const DEVICE: &str = r#"
apiVersion: devices.kubeedge.io/v1beta1
kind: Device
metadata: {name: NAME, namespace: default, labels: {description: a-thermometer}}
spec:
  nodeName: NODE
  deviceModelRef: {name: thermo-model}
  protocol: {protocolName: PROTOCOL}
  properties:
  - name: temperature
    desired: {value: "20"}
  - name: humidity
"#;

fn device_yaml(name: &str, node: &str, protocol: &str) -> String {
    DEVICE.replace("NAME", name).replace("NODE", node).replace("PROTOCOL", protocol)
}

/// The edge's configuration lines for EventBus and DeviceTwin.
fn device_modules(edge: &Edge, mqtt_mode: u8, external: u16, internal: u16) -> String {
    format!(
        "  eventBus: {{mqttMode: {mqtt_mode}, mqttServerExternal: 'tcp://127.0.0.1:{external}', mqttServerInternal: 'tcp://127.0.0.1:{internal}'}}\n  deviceTwin: {{dmiSockPath: '{}'}}\n",
        edge.dir.join("dmi.sock").display()
    )
}

fn reported(cloud: &Cloud, name: &str, property: &str) -> Option<String> {
    let d = cloud.json(&["get", "device", name]);
    let twins = d.pointer("/status/twins")?.as_array()?.clone();
    let t = twins.iter().find(|t| t["propertyName"] == property)?;
    t.pointer("/reported/value")?.as_str().map(str::to_owned)
}

fn twin_update(value: &str) -> String {
    json!({"event_id": "e", "timestamp": 0, "twin": {"temperature": {"actual": {"value": value}}}}).to_string()
}

/// The MQTT path with an external broker: kubectl → edge, an app's
/// reports → `kubectl get device`, desired values → a delta, KubeEdge's
/// answers on KubeEdge's topics, a cut link, and bad input.
#[test]
fn devices_over_mqtt_with_an_external_broker() {
    let dir = TempDir::new("devices-mqtt");
    let broker = Mosquitto::start();
    let cloud = Cloud::start(dir.path(), &[]);
    let proxy = CutProxy::start(cloud.ws);
    let mut edge = Edge::new(dir.path());
    let modules = device_modules(&edge, 2, broker.port, edgehive_testkit::fixtures::free_port());
    edge.configure_with("edge-1", &proxy.addr(), cloud.join, Some(&cloud.token()), &modules);
    edge.start(&[]);
    wait_until("edge-1 is Ready", || cloud.node_ready("edge-1").as_deref() == Some("True"));

    // An app watching the node's events, as a stock EdgeCore's users do.
    let events = Subscriber::start(broker.port, "$hw/events/#", "$hw/events/probe/x");
    cloud.kubectl(&["apply", "-f", "-"], Some(&MODEL.replace("PROTOCOL", "virtual")));
    cloud.kubectl(&["apply", "-f", "-"], Some(&device_yaml("thermo", "edge-1", "virtual")));
    wait_until("the membership update is published", || {
        events.received("$hw/events/node/edge-1/membership/updated").iter().any(|p| p.contains("\"thermo\""))
    });
    wait_until("the desired value is published as a delta", || {
        events
            .received("$hw/events/device/thermo/twin/update/delta")
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).is_ok_and(|d| d["delta"]["temperature"] == "20"))
    });

    // An app reports a value; the cloud shows it.
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &twin_update("21"));
    wait_until("kubectl shows the reported value", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("21")
    });
    let result = events.received("$hw/events/device/thermo/twin/update/result");
    let result: Value = serde_json::from_str(result.last().unwrap()).unwrap();
    assert_eq!(result["twin"]["temperature"]["actual"]["value"], "21");

    // KubeEdge's get requests get KubeEdge's answers.
    mosquitto::publish(broker.port, "$hw/events/node/edge-1/membership/get", r#"{"event_id":"m1"}"#);
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/get", r#"{"event_id":"g1"}"#);
    mosquitto::publish(broker.port, "$hw/events/device/ghost/twin/get", r#"{"event_id":"g2"}"#);
    wait_until("the gets are answered", || {
        !events.received("$hw/events/node/edge-1/membership/get/result").is_empty()
            && !events.received("$hw/events/device/thermo/twin/get/result").is_empty()
            && !events.received("$hw/events/device/ghost/twin/get/result").is_empty()
    });
    let members: Value =
        serde_json::from_str(&events.received("$hw/events/node/edge-1/membership/get/result")[0]).unwrap();
    assert_eq!(members["event_id"], "m1");
    assert_eq!(members["devices"][0]["id"], "thermo");
    assert_eq!(members["devices"][0]["description"], "a-thermometer");
    let twin: Value = serde_json::from_str(&events.received("$hw/events/device/thermo/twin/get/result")[0]).unwrap();
    assert_eq!(twin["twin"]["temperature"]["expected"]["value"], "20");
    assert_eq!(twin["twin"]["temperature"]["actual"]["value"], "21");
    assert_eq!(twin["twin"]["temperature"]["metadata"]["type"], "int");
    let ghost: Value = serde_json::from_str(&events.received("$hw/events/device/ghost/twin/get/result")[0]).unwrap();
    assert_eq!((ghost["code"].as_i64(), ghost["event_id"].as_str()), (Some(404), Some("g2")));

    // A new desired value through kubectl: the app gets the delta.
    cloud.kubectl(
        &[
            "patch",
            "device",
            "thermo",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/properties/0/desired/value","value":"25"}]"#,
        ],
        None,
    );
    wait_until("the new desired value arrives as a delta", || {
        events
            .received("$hw/events/device/thermo/twin/update/delta")
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).is_ok_and(|d| d["delta"]["temperature"] == "25"))
    });

    // Bad input on the broker: malformed JSON, an unknown device, a value
    // outside KubeEdge's characters, a huge payload. Each is answered or
    // dropped; the next good report still lands.
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", "{\"twin\": ");
    mosquitto::publish(broker.port, "$hw/events/device/ghost/twin/update", &twin_update("1"));
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &twin_update("a;b"));
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &"x".repeat(2 << 20));
    wait_until("the bad updates are answered", || {
        let codes: Vec<i64> = events
            .received("$hw/events/device/thermo/twin/update/result")
            .iter()
            .filter_map(|p| serde_json::from_str::<Value>(p).ok()?.get("code")?.as_i64())
            .collect();
        codes.iter().filter(|c| **c == 400).count() >= 2
            && !events.received("$hw/events/device/ghost/twin/update/result").is_empty()
    });
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &twin_update("22"));
    wait_until("a good report after the bad ones lands", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("22")
    });

    // The link is cut; the device's value changes twice; the link returns:
    // the cloud gets the latest value.
    proxy.cut(true);
    wait_until("edge-1 is disconnected", || cloud_sees_no_session(&cloud));
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &twin_update("30"));
    mosquitto::publish(broker.port, "$hw/events/device/thermo/twin/update", &twin_update("31"));
    wait_until("the edge answered both offline", || {
        events.received("$hw/events/device/thermo/twin/update/result").iter().any(|p| p.contains("\"31\""))
    });
    assert_eq!(reported(&cloud, "thermo", "temperature").as_deref(), Some("22"));
    proxy.cut(false);
    wait_until("the cloud sees the latest value", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("31")
    });

    // Removed by the cloud: gone from the edge, announced.
    cloud.kubectl(&["delete", "device", "thermo"], None);
    wait_until("the removal is published", || {
        events.received("$hw/events/node/edge-1/membership/updated").iter().any(|p| p.contains("removed_devices\":[{"))
    });
    edge.terminate();
}

fn cloud_sees_no_session(cloud: &Cloud) -> bool {
    cloud.kubectl(&["get", "--raw", "/metrics"], None).contains("\nedgehive_cloudhub_connected_nodes 0\n")
}

/// The embedded broker (`mqttMode: 0`): the same topics with no broker of
/// one's own, and a Device bound to another node is not this edge's.
#[test]
fn devices_over_the_embedded_broker() {
    let dir = TempDir::new("devices-internal");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = Edge::new(dir.path());
    let internal = edgehive_testkit::fixtures::free_port();
    let modules = device_modules(&edge, 0, edgehive_testkit::fixtures::free_port(), internal);
    let ws = format!("127.0.0.1:{}", cloud.ws);
    edge.configure_with("edge-1", &ws, cloud.join, Some(&cloud.token()), &modules);
    edge.start(&[]);
    wait_until("edge-1 is Ready", || cloud.node_ready("edge-1").as_deref() == Some("True"));
    mosquitto::wait_listening(internal);
    let events = Subscriber::start(internal, "$hw/events/#", "$hw/events/probe/x");
    cloud.kubectl(&["apply", "-f", "-"], Some(&MODEL.replace("PROTOCOL", "virtual")));
    cloud.kubectl(&["apply", "-f", "-"], Some(&device_yaml("thermo", "edge-1", "virtual")));
    cloud.kubectl(&["apply", "-f", "-"], Some(&device_yaml("elsewhere", "edge-2", "virtual")));
    wait_until("thermo is announced", || {
        events.received("$hw/events/node/edge-1/membership/updated").iter().any(|p| p.contains("\"thermo\""))
    });
    mosquitto::publish(internal, "$hw/events/device/thermo/twin/update", &twin_update("21"));
    wait_until("kubectl shows the reported value", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("21")
    });
    // edge-2's device is unknown here: a report for it is refused at the edge.
    mosquitto::publish(internal, "$hw/events/device/elsewhere/twin/update", &twin_update("66"));
    wait_until("refused as unknown", || {
        events
            .received("$hw/events/device/elsewhere/twin/update/result")
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).is_ok_and(|v| v["code"] == 404))
    });
    assert_eq!(reported(&cloud, "elsewhere", "temperature"), None);
    edge.terminate();
}

const MODBUS_DEVICE: &str = r#"
apiVersion: devices.kubeedge.io/v1beta1
kind: Device
metadata: {name: NAME, namespace: default}
spec:
  nodeName: edge-1
  deviceModelRef: {name: thermo-model}
  protocol:
    protocolName: modbus
    configData: {ip: 127.0.0.1, port: PORT, slaveID: 1}
  properties:
  - name: temperature
    collectCycle: 100
    reportCycle: 100
    visitors: {protocolName: modbus, configData: {register: HoldingRegister, offset: 0, limit: 1, scale: 0.1}}
  - name: humidity
    desired: {value: "22.5"}
    collectCycle: 100
    reportCycle: 100
    visitors: {protocolName: modbus, configData: {register: HoldingRegister, offset: 1, limit: 1, scale: 0.1}}
"#;

/// A mapper process (`edgehive mapper modbus`), restartable.
struct Mapper {
    child: Option<std::process::Child>,
    args: Vec<String>,
    log: std::path::PathBuf,
}

impl Mapper {
    fn start(dmi: &std::path::Path, dir: &std::path::Path) -> Mapper {
        let args = vec![
            "mapper".into(),
            "modbus".into(),
            "--dmi-sock".into(),
            dmi.display().to_string(),
            "--sock".into(),
            dir.join("modbus.sock").display().to_string(),
        ];
        let mut m = Mapper { child: None, args, log: dir.join("mapper.log") };
        m.restart();
        m
    }

    fn restart(&mut self) {
        self.kill();
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(&self.args)
            .env("EDGEHIVE_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Mapper {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- mapper log ---\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
        }
    }
}

/// The whole way with a Modbus device: kubectl → the edge → the mapper
/// over DMI → the (simulated) device's registers, and back to `kubectl get
/// device`; a new desired value written to the register; a cut link; a
/// mapper that crashes and comes back; a device whose settings are bad.
#[test]
fn a_modbus_device_from_kubectl_to_its_register_and_back() {
    use edgehive_mapper::simulator::{Device, serve};
    let dir = TempDir::new("devices-modbus");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let device = Device::default();
    device.set_holding(0, 215);
    let stop = tokio_util::sync::CancellationToken::new();
    let (addr, _task) = rt.block_on(serve("127.0.0.1:0".parse().unwrap(), device.clone(), stop.clone())).unwrap();

    let cloud = Cloud::start(dir.path(), &[]);
    let proxy = CutProxy::start(cloud.ws);
    let mut edge = Edge::new(dir.path());
    let dmi = edge.dir.join("dmi.sock");
    // The embedded broker alongside: MQTT apps see what a DMI mapper does.
    let internal = edgehive_testkit::fixtures::free_port();
    let modules = device_modules(&edge, 0, edgehive_testkit::fixtures::free_port(), internal);
    edge.configure_with("edge-1", &proxy.addr(), cloud.join, Some(&cloud.token()), &modules);
    edge.start(&[]);
    wait_until("edge-1 is Ready", || cloud.node_ready("edge-1").as_deref() == Some("True"));
    mosquitto::wait_listening(internal);
    let events = Subscriber::start(internal, "$hw/events/device/#", "$hw/events/device/probe/x");
    let mut mapper = Mapper::start(&dmi, dir.path());

    // Scaled register values are decimals: the model says FLOAT.
    cloud.kubectl(&["apply", "-f", "-"], Some(&MODEL.replace("PROTOCOL", "modbus").replace("INT", "FLOAT")));
    let yaml = MODBUS_DEVICE.replace("NAME", "thermo").replace("PORT", &addr.port().to_string());
    cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
    // The register's value reaches kubectl; the desired value reaches the register.
    wait_until("kubectl shows the register's value", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("21.5")
    });
    wait_until("the desired humidity is written to its register", || device.holding(1) == 225);
    wait_until("and reported back", || reported(&cloud, "thermo", "humidity").as_deref() == Some("22.5"));

    // A new desired value with kubectl patch: the register changes.
    cloud.kubectl(
        &[
            "patch",
            "device",
            "thermo",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/properties/1/desired/value","value":"30"}]"#,
        ],
        None,
    );
    wait_until("the register takes the new desired value", || device.holding(1) == 300);
    wait_until("an MQTT app saw the delta", || {
        events.received("$hw/events/device/thermo/twin/update/delta").iter().any(|p| p.contains("\"30\""))
    });
    device.set_holding(0, 250);
    wait_until("a new reading reaches kubectl", || reported(&cloud, "thermo", "temperature").as_deref() == Some("25"));

    // The link is cut and the device's value changes: the cloud sees the
    // latest value once the link is back.
    proxy.cut(true);
    wait_until("edge-1 is disconnected", || cloud_sees_no_session(&cloud));
    device.set_holding(0, 260);
    let edge_db = edge.db();
    wait_until("the edge has the new value", || {
        twin_actual(&edge_db, "thermo", "temperature").as_deref() == Some("26")
    });
    device.set_holding(0, 261);
    wait_until("and the next", || twin_actual(&edge_db, "thermo", "temperature").as_deref() == Some("26.1"));
    assert_eq!(reported(&cloud, "thermo", "temperature").as_deref(), Some("25"));
    proxy.cut(false);
    wait_until("the cloud sees the latest value", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("26.1")
    });

    // The mapper crashes; it comes back, registers again, and goes on.
    mapper.kill();
    device.set_holding(0, 270);
    mapper.restart();
    wait_until("the restarted mapper reports again", || {
        reported(&cloud, "thermo", "temperature").as_deref() == Some("27")
    });

    // A device with bad settings is refused by the mapper; the good one goes on.
    let bad = MODBUS_DEVICE.replace("NAME", "broken").replace("PORT", "not-a-port");
    cloud.kubectl(&["apply", "-f", "-"], Some(&bad));
    wait_until("the mapper refuses the bad device", || {
        std::fs::read_to_string(&mapper.log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("device refused") && l.contains("broken"))
    });
    device.set_holding(0, 280);
    wait_until("the good device still reports", || reported(&cloud, "thermo", "temperature").as_deref() == Some("28"));
    // The refused device holds up no later change of the protocol's.
    cloud.kubectl(
        &[
            "patch",
            "device",
            "thermo",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/properties/1/desired/value","value":"35"}]"#,
        ],
        None,
    );
    wait_until("a desired value after the refusal reaches the register", || device.holding(1) == 350);
    assert_eq!(reported(&cloud, "broken", "temperature"), None);
    edge.terminate();
    stop.cancel();
}

/// A twin's actual value in the edge's `device_twin` table.
fn twin_actual(db: &std::path::Path, device: &str, twin: &str) -> Option<String> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.query_row("SELECT actual FROM device_twin WHERE deviceid = ?1 AND name = ?2", [device, twin], |r| r.get(0))
        .ok()
}
