//! The mapper against a Modbus TCP device simulator (tokio-modbus's
//! server) and a stand-in edge serving DeviceManagerService (edgehive-grpc):
//! it registers, drives the edge's devices, reports scaled values, writes
//! desired values to the device, refuses bad settings without disturbing
//! the other devices, and registers again when the edge restarts.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_dmi::api::{self, method};
use edgehive_dmi::convert::convert_device;
use edgehive_grpc::{Channel, GrpcError, Server, code};
use edgehive_mapper::simulator::{Device, serve};
use edgehive_mapper::{MapperConfig, run};
use edgehive_testkit::eventually;
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

// ---- the Modbus device: the crate's simulator ----

async fn start_simulator(device: Device) -> SocketAddr {
    // Stopped with the test's runtime.
    let (addr, _task) = serve("127.0.0.1:0".parse().unwrap(), device, CancellationToken::new()).await.unwrap();
    addr
}

// ---- the stand-in edge ----

#[derive(Debug, Clone, PartialEq)]
struct Report {
    device: String,
    property: String,
    value: String,
    desired: String,
}

struct FakeEdge {
    registrations: Arc<Mutex<Vec<api::MapperInfo>>>,
    stop: CancellationToken,
}

fn start_edge(sock: &Path, devices: Vec<api::Device>, reports: mpsc::UnboundedSender<Report>) -> FakeEdge {
    let registrations: Arc<Mutex<Vec<api::MapperInfo>>> = Arc::default();
    let regs = Arc::clone(&registrations);
    let server = Server::new()
        .unary(method::MAPPER_REGISTER, move |r: api::MapperRegisterRequest| {
            regs.lock().unwrap().push(r.mapper.unwrap_or_default());
            let device_list = if r.with_data { devices.clone() } else { Vec::new() };
            async move { Ok(api::MapperRegisterResponse { device_list, model_list: Vec::new() }) }
        })
        .unary(method::REPORT_DEVICE_STATUS, move |r: api::ReportDeviceStatusRequest| {
            for t in r.reported_device.unwrap_or_default().twins {
                let _ = reports.send(Report {
                    device: r.device_name.clone(),
                    property: t.property_name,
                    value: t.reported.unwrap_or_default().value,
                    desired: t.observed_desired.unwrap_or_default().value,
                });
            }
            async { Ok(api::ReportDeviceStatusResponse {}) }
        });
    let bound = server.bind(sock).unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(bound.serve(stop.clone()));
    FakeEdge { registrations, stop }
}

async fn wait_report(rx: &mut mpsc::UnboundedReceiver<Report>, what: &str, f: impl Fn(&Report) -> bool) -> Report {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(r)) if f(&r) => return r,
            Ok(Some(_)) => continue,
            _ => panic!("no report: {what}"),
        }
    }
}

fn modbus_device(name: &str, addr: SocketAddr, desired: Option<&str>) -> api::Device {
    let mut property = json!({
        "name": "temperature",
        "visitors": {"protocolName": "modbus", "configData": {"register": "HoldingRegister", "offset": 2, "limit": 1, "scale": 0.1}},
        "collectCycle": 50, "reportCycle": 50
    });
    if let Some(d) = desired {
        property["desired"] = json!({"value": d});
    }
    device_json(name, "modbus", json!({"ip": addr.ip().to_string(), "port": addr.port(), "slaveID": 1}), property)
}

fn device_json(name: &str, protocol: &str, protocol_cfg: Value, property: Value) -> api::Device {
    convert_device(&json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"deviceModelRef": {"name": "m"}, "protocol": {"protocolName": protocol, "configData": protocol_cfg},
            "properties": [property]}
    }))
    .unwrap()
}

struct Running {
    _dir: TempDir,
    dir: PathBuf,
    dmi: PathBuf,
    mapper_sock: PathBuf,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), edgehive_mapper::MapperError>>,
}

fn start_mapper(protocol: &str, dir: TempDir) -> Running {
    let path = dir.path().to_owned();
    let dmi = path.join("dmi.sock");
    let mapper_sock = path.join("mapper.sock");
    let mut cfg = MapperConfig::new(protocol, &dmi, &mapper_sock);
    cfg.probe_interval = Duration::from_millis(50);
    cfg.initial_backoff = Duration::from_millis(20);
    cfg.max_backoff = Duration::from_millis(200);
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(cfg, stop.clone()));
    Running { _dir: dir, dir: path, dmi, mapper_sock, stop, task }
}

async fn wait_for_socket(p: &Path) {
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::net::UnixStream::connect(p).await.is_err() {
        assert!(tokio::time::Instant::now() < end, "{} never served", p.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_mapper_reads_reports_and_writes_a_modbus_device_and_refuses_bad_settings() {
    let regs = Device::default();
    regs.set_holding(2, 215);
    let addr = start_simulator(regs.clone()).await;
    let m = start_mapper("modbus", TempDir::new("mapper-modbus"));
    let (tx, mut reports) = mpsc::unbounded_channel();
    let edge = start_edge(&m.dmi, vec![modbus_device("thermo", addr, None)], tx);

    // Registered with the edge, got the device, reads and reports the scaled value.
    let r = wait_report(&mut reports, "thermo at 21.5", |r| r.device == "thermo" && r.value == "21.5").await;
    assert_eq!(r.property, "temperature");
    let info = edge.registrations.lock().unwrap()[0].clone();
    assert_eq!((info.protocol.as_str(), info.name.as_str()), ("modbus", "modbus-mapper"));
    assert_eq!(info.address, m.mapper_sock.to_string_lossy().as_bytes());

    // The edge updates the device with a desired value: it is written, scale reversed.
    wait_for_socket(&m.mapper_sock).await;
    let mapper = Channel::new(&m.mapper_sock);
    let update = api::UpdateDeviceRequest { device: Some(modbus_device("thermo", addr, Some("30"))) };
    let _: api::UpdateDeviceResponse = mapper.call(method::UPDATE_DEVICE, &update, WAIT).await.unwrap();
    let r2 = regs.clone();
    eventually("the register holds 300", WAIT, || r2.holding(2) == 300).await;
    wait_report(&mut reports, "thermo at 30, desired 30", |r| r.value == "30" && r.desired == "30").await;

    // A device with a malformed protocol config: an error answer, the other device unaffected.
    let mut bad = modbus_device("broken", addr, None);
    bad = {
        let mut d = bad;
        let spec = d.spec.as_mut().unwrap();
        spec.protocol = device_json("x", "modbus", json!({"ip": "not-an-ip", "port": 502}), json!({"name": "p"}))
            .spec
            .unwrap()
            .protocol;
        d
    };
    let e = mapper
        .call::<_, api::RegisterDeviceResponse>(
            method::REGISTER_DEVICE,
            &api::RegisterDeviceRequest { device: Some(bad) },
            WAIT,
        )
        .await
        .unwrap_err();
    match &e {
        GrpcError::Status { code: c, message, .. } => {
            assert_eq!(*c, code::INVALID_ARGUMENT);
            assert!(message.contains("configData.ip"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A device of another protocol is refused too.
    let opc = device_json("opc", "opcua", json!({}), json!({"name": "p"}));
    let e = mapper
        .call::<_, api::RegisterDeviceResponse>(
            method::REGISTER_DEVICE,
            &api::RegisterDeviceRequest { device: Some(opc) },
            WAIT,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(code::INVALID_ARGUMENT));
    regs.set_holding(2, 250);
    wait_report(&mut reports, "thermo still reported", |r| r.device == "thermo" && r.value == "25").await;

    // GetDevice answers the latest reading; an unknown device is NOT_FOUND.
    let got: api::GetDeviceResponse = mapper
        .call(method::GET_DEVICE, &api::GetDeviceRequest { device_name: "thermo".into(), ..Default::default() }, WAIT)
        .await
        .unwrap();
    let twin = &got.device.unwrap().status.unwrap().twins[0];
    assert!(twin.reported.is_some());
    let e = mapper
        .call::<_, api::GetDeviceResponse>(
            method::GET_DEVICE,
            &api::GetDeviceRequest { device_name: "ghost".into(), ..Default::default() },
            WAIT,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(code::NOT_FOUND));

    m.stop.cancel();
    m.task.await.unwrap().unwrap();
    assert!(!m.mapper_sock.exists(), "the mapper's socket is removed at exit");
    edge.stop.cancel();
    let _ = m.dir;
}

#[tokio::test]
async fn the_mapper_registers_again_when_the_edge_restarts() {
    let m = start_mapper("virtualprotocol", TempDir::new("mapper-restart"));
    let device = device_json(
        "dice",
        "virtualprotocol",
        json!({}),
        json!({"name": "roll", "visitors": {"protocolName": "virtualprotocol", "configData": {"min": 1, "max": 6}},
               "collectCycle": 50, "reportCycle": 50}),
    );
    // The mapper may start before the edge: it retries with backoff.
    let (tx, mut reports) = mpsc::unbounded_channel();
    let edge = start_edge(&m.dmi, vec![device.clone()], tx.clone());
    let r = wait_report(&mut reports, "a virtual roll", |r| r.device == "dice").await;
    let v: f64 = r.value.parse().unwrap();
    assert!((1.0..=6.0).contains(&v) && v.fract() == 0.0, "{v}");

    // The edge goes away and comes back on a new socket file.
    edge.stop.cancel();
    let dmi = m.dmi.clone();
    eventually("the old edge socket is gone", WAIT, || !dmi.exists()).await;
    let edge2 = start_edge(&m.dmi, vec![device], tx);
    let regs = Arc::clone(&edge2.registrations);
    eventually("the mapper registers with the new edge", WAIT, || !regs.lock().unwrap().is_empty()).await;
    // And its device is reported there.
    while reports.try_recv().is_ok() {}
    wait_report(&mut reports, "dice after the restart", |r| r.device == "dice").await;

    // A desired value on a virtual device is what it reads from then on.
    let mapper = Channel::new(&m.mapper_sock);
    let desired = device_json(
        "dice",
        "virtualprotocol",
        json!({}),
        json!({"name": "roll", "desired": {"value": "42"}, "visitors": {"protocolName": "virtualprotocol", "configData": {"min": 1, "max": 6}},
               "collectCycle": 50, "reportCycle": 50}),
    );
    let _: api::UpdateDeviceResponse =
        mapper.call(method::UPDATE_DEVICE, &api::UpdateDeviceRequest { device: Some(desired) }, WAIT).await.unwrap();
    wait_report(&mut reports, "dice reads 42", |r| r.value == "42").await;

    m.stop.cancel();
    m.task.await.unwrap().unwrap();
    edge2.stop.cancel();
}

#[tokio::test]
async fn readings_are_pushed_to_an_http_endpoint() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (body_tx, mut bodies) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = body_tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                // One request per connection: read until the JSON body closes.
                while !got.ends_with(b"}") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
                let _ = tx.send(String::from_utf8_lossy(&got).into_owned());
            });
        }
    });
    let m = start_mapper("virtualprotocol", TempDir::new("mapper-push"));
    let device = device_json(
        "meter",
        "virtualprotocol",
        json!({}),
        json!({"name": "power", "visitors": {"protocolName": "virtualprotocol", "configData": {"min": 5, "max": 5}},
               "collectCycle": 50, "reportCycle": 1000,
               "pushMethod": {"http": {"hostName": "http://127.0.0.1", "port": port, "requestPath": "/ingest", "timeout": 2000}}}),
    );
    let (tx, _reports) = mpsc::unbounded_channel();
    let edge = start_edge(&m.dmi, vec![device], tx);
    let body = tokio::time::timeout(WAIT, bodies.recv()).await.unwrap().unwrap();
    assert!(body.starts_with("POST /ingest HTTP/1.1"), "{body}");
    let json_start = body.find('{').unwrap();
    let reading: Value = serde_json::from_str(&body[json_start..]).unwrap();
    assert_eq!(
        (reading["deviceName"].as_str(), reading["propertyName"].as_str(), reading["value"].as_str()),
        (Some("meter"), Some("power"), Some("5"))
    );
    m.stop.cancel();
    m.task.await.unwrap().unwrap();
    edge.stop.cancel();
}

#[tokio::test]
async fn readings_are_published_to_an_mqtt_broker() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    // A minimal MQTT 3.1.1 broker: accepts the CONNECT, answers CONNACK,
    // and hands over the bytes that follow (the PUBLISH packets).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, mut published) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else { return };
        let mut buf = vec![0u8; 4096];
        let Ok(n) = s.read(&mut buf).await else { return };
        assert!(n > 0 && buf[0] == 0x10, "a CONNECT first");
        s.write_all(&[0x20, 0x02, 0x00, 0x00]).await.unwrap();
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                return;
            }
            let _ = tx.send(buf[..n].to_vec());
        }
    });
    let m = start_mapper("virtualprotocol", TempDir::new("mapper-mqtt"));
    let device = device_json(
        "meter",
        "virtualprotocol",
        json!({}),
        json!({"name": "power", "visitors": {"protocolName": "virtualprotocol", "configData": {"min": 7, "max": 7}},
               "collectCycle": 50, "reportCycle": 1000,
               "pushMethod": {"mqtt": {"address": format!("tcp://127.0.0.1:{port}"), "topic": "factory/meter", "qos": 0}}}),
    );
    let (etx, _reports) = mpsc::unbounded_channel();
    let edge = start_edge(&m.dmi, vec![device], etx);
    let mut seen = Vec::new();
    let end = tokio::time::Instant::now() + WAIT;
    let text = loop {
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        let bytes = tokio::time::timeout(left, published.recv()).await.expect("a PUBLISH").unwrap();
        seen.extend(bytes);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if text.contains("factory/meter") && text.contains("\"value\":\"7\"") {
            break text;
        }
    };
    assert!(seen.iter().any(|b| b & 0xf0 == 0x30), "a PUBLISH packet: {text}");
    assert!(text.contains("\"deviceName\":\"meter\""), "{text}");
    m.stop.cancel();
    m.task.await.unwrap().unwrap();
    edge.stop.cancel();
}

#[tokio::test]
async fn an_unknown_protocol_or_an_unusable_socket_path_is_an_error_at_start() {
    let dir = TempDir::new("mapper-start");
    let e = run(
        MapperConfig::new("opcua", dir.path().join("dmi.sock"), dir.path().join("m.sock")),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, edgehive_mapper::MapperError::UnknownProtocol(_)), "{e}");
    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, b"keep").unwrap();
    let e = run(MapperConfig::new("modbus", dir.path().join("dmi.sock"), &file), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, edgehive_mapper::MapperError::Serve { .. }), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
}
