//! The `dmi` module on a real beehive, a real edge store and real unix
//! sockets: mappers register and report, the cloud's devices reach the
//! mapper of their protocol, and broken or hostile calls are refused
//! without disturbing the rest.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::{BufMut as _, Bytes, BytesMut};
use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext};
use edgehive_dmi::api::{self, method};
use edgehive_dmi::{Dmi, DmiConfig, DmiMetrics};
use edgehive_grpc::{Channel, GrpcError, Server, code};
use edgehive_metamanager::{MetaDb, Op};
use edgehive_model::constants::{group, op, source};
use edgehive_model::{Content, Message};
use edgehive_testkit::eventually;
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

fn device(name: &str, protocol: &str) -> Value {
    json!({
        "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
        "spec": {
            "deviceModelRef": {"name": "thermo-model"},
            "protocol": {"protocolName": protocol, "configData": {"ip": "127.0.0.1", "port": 502, "slaveID": 1}},
            "properties": [{"name": "temperature", "desired": {"value": "20"},
                "visitors": {"protocolName": protocol, "configData": {"register": "HoldingRegister", "offset": 0, "limit": 1, "scale": 0.1}},
                "collectCycle": 500, "reportCycle": 1000}]
        }
    })
}

fn model() -> Value {
    json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "DeviceModel",
        "metadata": {"name": "thermo-model", "namespace": "default", "resourceVersion": "1"},
        "spec": {"protocol": "modbus", "properties": [{"name": "temperature", "type": "FLOAT", "accessMode": "ReadWrite"}]}})
}

struct Edge {
    _dir: TempDir,
    dir: PathBuf,
    sock: PathBuf,
    ctx: Context,
    twin: mpsc::UnboundedReceiver<Message>,
    metrics: Arc<DmiMetrics>,
    db: Arc<MetaDb>,
    stop: CancellationToken,
}

fn seed(db: &MetaDb) {
    let put = |kind: &str, obj: Value| Op::Put {
        key: format!("default/{kind}/{}", obj["metadata"]["name"].as_str().unwrap()),
        resource_type: kind.to_owned(),
        value: obj.to_string(),
    };
    db.apply(&[
        put("devicemodel", model()),
        put("device", device("thermo-1", "modbus")),
        put("device", device("thermo-2", "modbus")),
        put("device", device("opc-1", "opcua")),
    ])
    .unwrap();
}

fn start_edge(dir: TempDir, cfg: impl FnOnce(&mut DmiConfig)) -> Edge {
    let path = dir.path().to_owned();
    let db = Arc::new(MetaDb::open(&path.join("edge.db")).unwrap());
    start_edge_on(dir, path, db, cfg)
}

fn start_edge_on(dir: TempDir, path: PathBuf, db: Arc<MetaDb>, cfg: impl FnOnce(&mut DmiConfig)) -> Edge {
    let sock = path.join("dmi.sock");
    let mut config =
        DmiConfig { sock_path: sock.clone(), call_timeout: Duration::from_secs(3), ..DmiConfig::default() };
    cfg(&mut config);
    let metrics = Arc::new(DmiMetrics::default());
    let dmi = Dmi::with_metrics(config, Arc::clone(&db), Arc::clone(&metrics));
    let (tx, twin) = mpsc::unbounded_channel();
    let twin_module = FnModule::new("twin", group::TWIN, move |mut ctx: ModuleContext, cancel: CancellationToken| {
        let tx = tx.clone();
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                let _ = tx.send(m);
            }
            Ok(())
        }) as edgehive_beehive::ModuleFuture
    });
    let mut b = Beehive::builder();
    b.register(Arc::new(dmi)).unwrap();
    b.register(Arc::new(twin_module)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    tokio::spawn(hive.run(stop.clone()));
    Edge { _dir: dir, dir: path, sock, ctx, twin, metrics, db, stop }
}

async fn wait_for_socket(p: &Path) {
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::net::UnixStream::connect(p).await.is_err() {
        assert!(tokio::time::Instant::now() < end, "{} never served", p.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A stand-in mapper: records the calls it gets.
type Calls = Arc<Mutex<Vec<(String, String)>>>;

fn fake_mapper(sock: &Path) -> (Calls, CancellationToken) {
    let calls: Calls = Arc::default();
    let record = |m: &'static str, c: &Calls| {
        let c = Arc::clone(c);
        move |name: String| c.lock().unwrap().push((m.to_owned(), name))
    };
    let (r1, r2, r3, r4) = (
        record("RegisterDevice", &calls),
        record("UpdateDevice", &calls),
        record("RemoveDevice", &calls),
        record("CreateDeviceModel", &calls),
    );
    let server = Server::new()
        .unary(method::REGISTER_DEVICE, move |r: api::RegisterDeviceRequest| {
            let d = r.device.unwrap_or_default();
            // The device arrives converted: its protocol config decodes.
            let cfg = edgehive_dmi::convert::customized_to_json(
                d.spec.as_ref().and_then(|s| s.protocol.as_ref()).and_then(|p| p.config_data.as_ref()),
            );
            let ok = cfg.is_ok_and(|c| c.get("port") == Some(&json!(502)));
            r1(if ok { d.name.clone() } else { format!("{}:bad-config", d.name) });
            async move { Ok(api::RegisterDeviceResponse { device_name: d.name, ..Default::default() }) }
        })
        .unary(method::UPDATE_DEVICE, move |r: api::UpdateDeviceRequest| {
            r2(r.device.unwrap_or_default().name);
            async { Ok(api::UpdateDeviceResponse {}) }
        })
        .unary(method::REMOVE_DEVICE, move |r: api::RemoveDeviceRequest| {
            r3(r.device_name);
            async { Ok(api::RemoveDeviceResponse {}) }
        })
        .unary(method::CREATE_DEVICE_MODEL, move |r: api::CreateDeviceModelRequest| {
            r4(r.model.unwrap_or_default().name);
            async { Ok(api::CreateDeviceModelResponse::default()) }
        });
    let bound = server.bind(sock).expect("bind the fake mapper");
    let stop = CancellationToken::new();
    tokio::spawn(bound.serve(stop.clone()));
    (calls, stop)
}

fn register_request(name: &str, protocol: &str, sock: &Path, with_data: bool) -> api::MapperRegisterRequest {
    api::MapperRegisterRequest {
        with_data,
        mapper: Some(api::MapperInfo {
            name: name.into(),
            version: "v1".into(),
            api_version: "v1beta1".into(),
            protocol: protocol.into(),
            address: sock.to_string_lossy().as_bytes().to_vec(),
            state: "ok".into(),
        }),
    }
}

async fn register(ch: &Channel, req: &api::MapperRegisterRequest) -> Result<api::MapperRegisterResponse, GrpcError> {
    ch.call(method::MAPPER_REGISTER, req, WAIT).await
}

fn status_report(device: &str, property: &str, reported: &str, desired: &str) -> api::ReportDeviceStatusRequest {
    api::ReportDeviceStatusRequest {
        device_name: device.into(),
        reported_device: Some(api::DeviceStatus {
            twins: vec![api::Twin {
                property_name: property.into(),
                observed_desired: Some(api::TwinProperty { value: desired.into(), ..Default::default() }),
                reported: Some(api::TwinProperty { value: reported.into(), ..Default::default() }),
            }],
        }),
        ..Default::default()
    }
}

fn from_twin(operation: &'static str, resource: &str, obj: &Value) -> Message {
    Message::build(
        source::DEVICECONTROLLER,
        group::RESOURCE,
        resource.to_owned(),
        operation,
        Content::from_serialize(obj).unwrap(),
    )
}

fn code_of<T: std::fmt::Debug>(r: Result<T, GrpcError>) -> u32 {
    match r {
        Err(GrpcError::Status { code, .. }) => code,
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

fn decode_topic(m: &Message) -> String {
    String::from_utf8(base64::engine::general_purpose::URL_SAFE.decode(m.route.resource.as_str()).unwrap()).unwrap()
}

#[tokio::test]
async fn a_mapper_registers_gets_its_protocols_devices_and_is_kept_in_the_store() {
    let dir = TempDir::new("dmi-register");
    let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
    seed(&db);
    drop(db);
    let edge = start_edge(dir, |_| {});
    wait_for_socket(&edge.sock).await;
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&edge.sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let ch = Channel::new(&edge.sock);
    let resp =
        register(&ch, &register_request("modbus-mapper", "modbus", &edge.dir.join("m.sock"), true)).await.unwrap();
    let mut names: Vec<&str> = resp.device_list.iter().map(|d| d.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["thermo-1", "thermo-2"], "only the modbus devices");
    assert_eq!(resp.model_list.len(), 1, "their model, once");
    let props = &resp.device_list[0].spec.as_ref().unwrap().properties[0];
    assert_eq!(props.collect_cycle, 500);
    // Without data: an empty answer.
    let resp =
        register(&ch, &register_request("modbus-mapper", "modbus", &edge.dir.join("m.sock"), false)).await.unwrap();
    assert!(resp.device_list.is_empty());
    // Kept as KubeEdge keeps it.
    let stored = edge.db.get("node/nodeID/namespace/devicemapper/modbus-mapper").unwrap().expect("mapper row");
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["protocol"], "modbus");
    assert_eq!(edge.db.list_type("devicemapper").unwrap().rows.len(), 1);
    assert_eq!(edge.metrics.registered_mappers(), 1);
    edge.stop.cancel();
}

#[tokio::test]
async fn registrations_without_a_protocol_name_or_socket_are_refused() {
    let edge = start_edge(TempDir::new("dmi-refuse"), |_| {});
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let s = edge.dir.join("m.sock");
    assert_eq!(code_of(register(&ch, &register_request("m", "", &s, true)).await), code::INVALID_ARGUMENT);
    assert_eq!(code_of(register(&ch, &register_request("", "modbus", &s, true)).await), code::INVALID_ARGUMENT);
    assert_eq!(
        code_of(register(&ch, &register_request("m", "modbus", Path::new(""), true)).await),
        code::INVALID_ARGUMENT
    );
    let none = api::MapperRegisterRequest { with_data: true, mapper: None };
    assert_eq!(code_of(register(&ch, &none).await), code::INVALID_ARGUMENT);
    assert!(edge.db.list_type("devicemapper").unwrap().rows.is_empty(), "nothing kept");
    edge.stop.cancel();
}

#[tokio::test]
async fn reports_become_twin_updates_and_bad_ones_are_dropped_alone() {
    let dir = TempDir::new("dmi-report");
    let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
    seed(&db);
    drop(db);
    let mut edge = start_edge(dir, |_| {});
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    register(&ch, &register_request("modbus-mapper", "modbus", &edge.dir.join("m.sock"), false)).await.unwrap();

    // Unknown device: NOT_FOUND, nothing for twin.
    let r = ch
        .call::<_, api::ReportDeviceStatusResponse>(
            method::REPORT_DEVICE_STATUS,
            &status_report("ghost", "temperature", "1", ""),
            WAIT,
        )
        .await;
    assert_eq!(code_of(r), code::NOT_FOUND);
    // A device whose protocol has no mapper (nobody may report for it).
    let r = ch
        .call::<_, api::ReportDeviceStatusResponse>(
            method::REPORT_DEVICE_STATUS,
            &status_report("opc-1", "temperature", "1", ""),
            WAIT,
        )
        .await;
    assert_eq!(code_of(r), code::FAILED_PRECONDITION);
    // A property the device does not have: dropped, the call succeeds, twin gets nothing.
    let _: api::ReportDeviceStatusResponse =
        ch.call(method::REPORT_DEVICE_STATUS, &status_report("thermo-1", "pressure", "9", ""), WAIT).await.unwrap();
    // The real one.
    let _: api::ReportDeviceStatusResponse = ch
        .call(method::REPORT_DEVICE_STATUS, &status_report("thermo-1", "temperature", "21.5", "20"), WAIT)
        .await
        .unwrap();
    let m = tokio::time::timeout(WAIT, edge.twin.recv()).await.unwrap().unwrap();
    assert_eq!(decode_topic(&m), "$hw/events/device/thermo-1/twin/update");
    assert_eq!(
        (m.route.source.as_str(), m.route.group.as_str(), m.route.operation.as_str()),
        (source::BUS, group::USER, op::RESPONSE)
    );
    // The payload as JSON itself (DeviceTwin also takes MQTT's JSON string).
    assert!(m.content.as_text().is_none());
    let payload = m.content.to_value();
    assert_eq!(payload["event_id"], "");
    assert!(payload["timestamp"].as_i64().unwrap() > 0);
    assert_eq!(payload["twin"], json!({"temperature": {"expected": {"value": "20"}, "actual": {"value": "21.5"}}}));
    // The device's state (ReportDeviceStates, after v1.15).
    let states =
        api::ReportDeviceStatesRequest { device_name: "thermo-2".into(), state: "online".into(), ..Default::default() };
    let _: api::ReportDeviceStatesResponse = ch.call(method::REPORT_DEVICE_STATES, &states, WAIT).await.unwrap();
    let m = tokio::time::timeout(WAIT, edge.twin.recv()).await.unwrap().unwrap();
    assert_eq!(decode_topic(&m), "$hw/events/device/thermo-2/state/update");
    let payload = m.content.to_value();
    assert_eq!(payload["state"], "online");
    assert!(edge.twin.try_recv().is_err(), "nothing else reached twin");
    assert_eq!(edge.metrics.reports_dropped(), 3);
    edge.stop.cancel();
}

fn frame(message: &[u8], declared: u32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(declared);
    b.put_slice(message);
    b.freeze()
}

#[tokio::test]
async fn broken_calls_on_the_dmi_socket_get_errors_and_the_server_goes_on() {
    let edge = start_edge(TempDir::new("dmi-broken"), |c| c.max_message = 1024);
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let status = |r: Result<Bytes, GrpcError>| code_of(r);
    assert_eq!(status(ch.call_raw(method::MAPPER_REGISTER, frame(b"", 1 << 20), WAIT).await), code::RESOURCE_EXHAUSTED);
    assert_eq!(
        status(ch.call_raw(method::MAPPER_REGISTER, frame(&[0u8; 2048], 2048), WAIT).await),
        code::RESOURCE_EXHAUSTED
    );
    assert_eq!(status(ch.call_raw(method::MAPPER_REGISTER, frame(b"\x12\x05ab", 40), WAIT).await), code::INTERNAL);
    assert_eq!(status(ch.call_raw(method::MAPPER_REGISTER, frame(&[0x12, 0xff, 0xff], 3), WAIT).await), code::INTERNAL);
    // A method of the mapper's service, and one that does not exist.
    assert_eq!(status(ch.call_raw(method::REGISTER_DEVICE, frame(b"", 0), WAIT).await), code::UNIMPLEMENTED);
    assert_eq!(
        status(ch.call_raw("/v1beta1.DeviceManagerService/Nope", frame(b"", 0), WAIT).await),
        code::UNIMPLEMENTED
    );
    let s = edge.dir.join("m.sock");
    register(&ch, &register_request("m", "modbus", &s, false)).await.unwrap();
    edge.stop.cancel();
}

#[tokio::test]
async fn registrations_past_the_rate_limit_are_refused() {
    let edge = start_edge(TempDir::new("dmi-limit"), |c| {
        c.register_qps = 0.0;
        c.register_burst = 2;
    });
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let req = register_request("m", "modbus", &edge.dir.join("m.sock"), false);
    register(&ch, &req).await.unwrap();
    register(&ch, &req).await.unwrap();
    assert_eq!(code_of(register(&ch, &req).await), code::RESOURCE_EXHAUSTED);
    assert_eq!(edge.metrics.rate_limited(), 1);
    edge.stop.cancel();
}

#[tokio::test]
async fn the_clouds_devices_reach_their_mapper_and_a_mapper_that_was_down_gets_them_on_registering() {
    let dir = TempDir::new("dmi-forward");
    let edge = start_edge(dir, |_| {});
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let msock = edge.dir.join("mapper.sock");
    // Registered, but down: calls fail, the cache keeps the devices.
    register(&ch, &register_request("modbus-mapper", "modbus", &msock, false)).await.unwrap();
    edge.ctx.send("dmi", from_twin(op::INSERT, "default/devicemodel/thermo-model", &model())).await.unwrap();
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-1", &device("thermo-1", "modbus")))
        .await
        .unwrap();
    let metrics = Arc::clone(&edge.metrics);
    eventually("calls to the down mapper fail", WAIT, || metrics.mapper_call_failures() >= 2).await;

    // The mapper comes up and registers: it gets what it missed.
    let (calls, mapper_stop) = fake_mapper(&msock);
    let resp = register(&ch, &register_request("modbus-mapper", "modbus", &msock, true)).await.unwrap();
    assert_eq!(resp.device_list.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["thermo-1"]);

    // From now on each change is a call. (A call that was failing as the
    // mapper registered may still reach it once: not counted here.)
    let fresh = |c: &Calls| -> Vec<(String, String)> {
        let c = c.lock().unwrap();
        c.iter()
            .filter(|(m, n)| m != "CreateDeviceModel" && !(m == "RegisterDevice" && n == "thermo-1"))
            .cloned()
            .collect()
    };
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-2", &device("thermo-2", "modbus")))
        .await
        .unwrap();
    // Delivered before the update is sent (an update of a registration not
    // yet delivered is folded into it).
    let c = Arc::clone(&calls);
    eventually("thermo-2 is registered", WAIT, || !fresh(&c).is_empty()).await;
    let mut changed = device("thermo-2", "modbus");
    changed["spec"]["properties"][0]["desired"]["value"] = json!("25");
    edge.ctx.send("dmi", from_twin(op::UPDATE, "default/device/thermo-2", &changed)).await.unwrap();
    // Another protocol's device goes to nobody here.
    edge.ctx.send("dmi", from_twin(op::INSERT, "default/device/opc-1", &device("opc-1", "opcua"))).await.unwrap();
    // A device whose config cannot be converted: not sent, the rest unaffected.
    let mut bad = device("bad-1", "modbus");
    bad["spec"]["protocol"]["configData"]["nested"] = json!({"x": 1});
    edge.ctx.send("dmi", from_twin(op::INSERT, "default/device/bad-1", &bad)).await.unwrap();
    edge.ctx
        .send("dmi", from_twin(op::DELETE, "default/device/thermo-1", &device("thermo-1", "modbus")))
        .await
        .unwrap();
    // Garbage from the bus: ignored.
    edge.ctx
        .send("dmi", Message::build("x", "y", "not/a/device/path", op::INSERT, Content::string("junk")))
        .await
        .unwrap();
    edge.ctx
        .send("dmi", Message::build("x", "y", "default/device/zzz", op::INSERT, Content::string("junk")))
        .await
        .unwrap();
    let expected = [("RegisterDevice", "thermo-2"), ("UpdateDevice", "thermo-2"), ("RemoveDevice", "thermo-1")];
    let c = Arc::clone(&calls);
    eventually("the mapper gets the changes", WAIT, || fresh(&c).len() >= expected.len()).await;
    let got = fresh(&calls);
    let want: Vec<(String, String)> = expected.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    assert_eq!(got, want);

    // A restarted edge knows the mapper from its store: a new device reaches it at once.
    edge.stop.cancel();
    let sock = edge.sock.clone();
    eventually("the old DMI socket is gone", WAIT, || !sock.exists()).await;
    let Edge { _dir, dir, db, .. } = edge;
    let edge = start_edge_on(_dir, dir, db, |_| {});
    wait_for_socket(&edge.sock).await;
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-3", &device("thermo-3", "modbus")))
        .await
        .unwrap();
    let c = Arc::clone(&calls);
    eventually("the restarted edge calls the stored mapper", WAIT, || {
        c.lock().unwrap().iter().any(|(m, n)| m == "RegisterDevice" && n == "thermo-3")
    })
    .await;
    mapper_stop.cancel();
    edge.stop.cancel();
}

#[tokio::test]
async fn a_mapper_that_hangs_meets_the_deadline_and_holds_up_no_other_mapper() {
    let edge = start_edge(TempDir::new("dmi-hang"), |c| c.call_timeout = Duration::from_secs(1));
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    // A mapper that accepts calls and never answers.
    let slow_sock = edge.dir.join("slow.sock");
    let hung = Server::new().unary(method::REGISTER_DEVICE, |_: api::RegisterDeviceRequest| async {
        std::future::pending::<()>().await;
        Ok(api::RegisterDeviceResponse::default())
    });
    let hung_stop = CancellationToken::new();
    tokio::spawn(hung.bind(&slow_sock).unwrap().serve(hung_stop.clone()));
    register(&ch, &register_request("slow-mapper", "slowproto", &slow_sock, false)).await.unwrap();
    let msock = edge.dir.join("mapper.sock");
    let (calls, mapper_stop) = fake_mapper(&msock);
    register(&ch, &register_request("modbus-mapper", "modbus", &msock, false)).await.unwrap();

    for i in 0..3 {
        let name = format!("slow-{i}");
        edge.ctx
            .send("dmi", from_twin(op::INSERT, &format!("default/device/{name}"), &device(&name, "slowproto")))
            .await
            .unwrap();
    }
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-1", &device("thermo-1", "modbus")))
        .await
        .unwrap();
    let c = Arc::clone(&calls);
    let t = tokio::time::Instant::now();
    eventually("the modbus mapper is called", WAIT, || !c.lock().unwrap().is_empty()).await;
    assert!(t.elapsed() < Duration::from_secs(1), "called before even the first hung call's deadline");
    let metrics = Arc::clone(&edge.metrics);
    eventually("the hung mapper's calls time out", WAIT, || metrics.mapper_call_failures() >= 3).await;
    hung_stop.cancel();
    mapper_stop.cancel();
    edge.stop.cancel();
}

/// A caller on the DMI socket registers mappers of any size and number:
/// names, protocols and addresses past their limits are INVALID_ARGUMENT
/// (with a short message), no more than 64 names are kept, a known name
/// always re-registers, and a new mapper of a protocol drops the old one's
/// record and row.
#[tokio::test]
async fn registrations_are_bounded_in_size_and_number_and_one_mapper_holds_a_protocol() {
    let edge = start_edge(TempDir::new("dmi-bounds"), |c| c.register_burst = 10_000);
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let sock = Path::new("/run/edgehive/m.sock");
    let refused = |r: Result<api::MapperRegisterResponse, GrpcError>| match r {
        Err(GrpcError::Status { code, message, .. }) => {
            assert!(message.len() < 400, "the message does not repeat the input: {} bytes", message.len());
            code
        }
        other => panic!("expected a gRPC status, got {other:?}"),
    };
    let huge = "n".repeat(1 << 20);
    let at_limit = "n".repeat(253);
    let past_limit = "n".repeat(254);
    assert_eq!(refused(register(&ch, &register_request(&huge, "modbus", sock, false)).await), code::INVALID_ARGUMENT);
    assert_eq!(
        refused(register(&ch, &register_request(&past_limit, "modbus", sock, false)).await),
        code::INVALID_ARGUMENT
    );
    assert_eq!(refused(register(&ch, &register_request("m", &past_limit, sock, false)).await), code::INVALID_ARGUMENT);
    let long_sock = PathBuf::from(format!("/{}", "s".repeat(107)));
    assert_eq!(
        refused(register(&ch, &register_request("m", "modbus", &long_sock, false)).await),
        code::INVALID_ARGUMENT
    );
    assert!(edge.db.list_type("devicemapper").unwrap().rows.is_empty(), "nothing kept");
    let max_sock = PathBuf::from(format!("/{}", "s".repeat(106)));
    register(&ch, &register_request(&at_limit, &at_limit, &max_sock, false)).await.unwrap();

    // 64 names in all, then a new one is refused.
    for i in 1..64 {
        register(&ch, &register_request(&format!("m{i}"), &format!("p{i}"), sock, false)).await.unwrap();
    }
    assert_eq!(refused(register(&ch, &register_request("extra", "px", sock, false)).await), code::RESOURCE_EXHAUSTED);
    assert_eq!(edge.db.list_type("devicemapper").unwrap().rows.len(), 64);
    // A known name re-registers.
    register(&ch, &register_request("m1", "p1", sock, false)).await.unwrap();
    // A new name for a held protocol takes it: the old record and row go.
    register(&ch, &register_request("taker", "p2", sock, false)).await.unwrap();
    assert!(edge.db.get("node/nodeID/namespace/devicemapper/m2").unwrap().is_none(), "m2's row is dropped");
    assert!(edge.db.get("node/nodeID/namespace/devicemapper/taker").unwrap().is_some());
    assert_eq!(edge.db.list_type("devicemapper").unwrap().rows.len(), 64);
    assert_eq!(edge.metrics.registered_mappers(), 64);
    assert_eq!(refused(register(&ch, &register_request("extra", "px", sock, false)).await), code::RESOURCE_EXHAUSTED);
    edge.stop.cancel();
}

/// The first property's desired value of a device the mapper got.
fn desired_of(d: &api::Device) -> String {
    d.spec
        .as_ref()
        .and_then(|s| s.properties.first())
        .and_then(|p| p.desired.as_ref())
        .map(|t| t.value.clone())
        .unwrap_or_default()
}

fn with_desired(name: &str, protocol: &str, value: &str) -> Value {
    let mut d = device(name, protocol);
    d["spec"]["properties"][0]["desired"]["value"] = json!(value);
    d
}

/// A mapper whose UpdateDevice fails its first `failures` calls; it
/// records each call's (method, device, desired value).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

fn flaky_mapper(sock: &Path, failures: usize) -> (Seen, CancellationToken) {
    let seen: Seen = Arc::default();
    let (s1, s2) = (Arc::clone(&seen), Arc::clone(&seen));
    let left = Arc::new(Mutex::new(failures));
    let server =
        Server::new()
            .unary(method::REGISTER_DEVICE, move |r: api::RegisterDeviceRequest| {
                let d = r.device.unwrap_or_default();
                s1.lock().unwrap().push(("RegisterDevice".into(), d.name.clone(), desired_of(&d)));
                async { Ok(api::RegisterDeviceResponse::default()) }
            })
            .unary(method::UPDATE_DEVICE, move |r: api::UpdateDeviceRequest| {
                let d = r.device.unwrap_or_default();
                s2.lock().unwrap().push(("UpdateDevice".into(), d.name.clone(), desired_of(&d)));
                let fail = {
                    let mut left = left.lock().unwrap();
                    let fail = *left > 0;
                    *left = left.saturating_sub(1);
                    fail
                };
                async move {
                    if fail { Err(edgehive_grpc::Status::internal("busy")) } else { Ok(api::UpdateDeviceResponse {}) }
                }
            });
    let stop = CancellationToken::new();
    tokio::spawn(server.bind(sock).expect("bind the flaky mapper").serve(stop.clone()));
    (seen, stop)
}

/// A mapper that was merely busy or not listening yet is not registered
/// again, so the edge must try again itself: the change waits, latest per
/// object, and is delivered on a retry.
#[tokio::test]
async fn a_mapper_that_fails_or_is_not_listening_yet_gets_the_change_on_a_retry() {
    let edge = start_edge(TempDir::new("dmi-retry"), |_| {});
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let metrics = Arc::clone(&edge.metrics);

    // Registered, then not listening yet: the calls fail and wait.
    let msock = edge.dir.join("late.sock");
    register(&ch, &register_request("modbus-mapper", "modbus", &msock, false)).await.unwrap();
    edge.ctx.send("dmi", from_twin(op::INSERT, "default/devicemodel/thermo-model", &model())).await.unwrap();
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-1", &with_desired("thermo-1", "modbus", "20")))
        .await
        .unwrap();
    edge.ctx
        .send("dmi", from_twin(op::UPDATE, "default/device/thermo-1", &with_desired("thermo-1", "modbus", "30")))
        .await
        .unwrap();
    eventually("calls to the mapper that is not listening fail", WAIT, || metrics.mapper_call_failures() >= 1).await;
    assert!(metrics.pending_changes() >= 1, "the changes wait");
    // It comes up, without registering again: the retries reach it.
    let (calls, late_stop) = fake_mapper(&msock);
    let c = Arc::clone(&calls);
    eventually("the late mapper gets the model and the device", WAIT, || c.lock().unwrap().len() >= 2).await;
    let got: Vec<(String, String)> = calls.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            ("CreateDeviceModel".to_owned(), "thermo-model".to_owned()),
            ("RegisterDevice".to_owned(), "thermo-1".to_owned())
        ],
        "in order of arrival; the update it never saw folded into the registration"
    );
    eventually("nothing waits", WAIT, || metrics.pending_changes() == 0).await;

    // A mapper that refuses its first two updates gets the desired value on the third try.
    let fsock = edge.dir.join("flaky.sock");
    let (seen, flaky_stop) = flaky_mapper(&fsock, 2);
    register(&ch, &register_request("flaky-mapper", "flaky", &fsock, false)).await.unwrap();
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/f-1", &with_desired("f-1", "flaky", "20")))
        .await
        .unwrap();
    let s = Arc::clone(&seen);
    eventually("the device is registered", WAIT, || !s.lock().unwrap().is_empty()).await;
    let failures = metrics.mapper_call_failures();
    edge.ctx
        .send("dmi", from_twin(op::UPDATE, "default/device/f-1", &with_desired("f-1", "flaky", "25")))
        .await
        .unwrap();
    let s = Arc::clone(&seen);
    eventually("the update is tried three times", WAIT, || s.lock().unwrap().len() >= 4).await;
    eventually("nothing waits", WAIT, || metrics.pending_changes() == 0).await;
    let got = seen.lock().unwrap().clone();
    let update = ("UpdateDevice".to_owned(), "f-1".to_owned(), "25".to_owned());
    assert_eq!(
        got,
        [("RegisterDevice".to_owned(), "f-1".to_owned(), "20".to_owned()), update.clone(), update.clone(), update]
    );
    assert_eq!(metrics.mapper_call_failures() - failures, 2);
    late_stop.cancel();
    flaky_stop.cancel();
    edge.stop.cancel();
}

/// 2,000 updates of one device while its mapper is busy with the first:
/// the mapper ends with the last desired value in a handful of calls.
#[tokio::test]
async fn a_burst_of_updates_to_a_slow_mapper_ends_with_the_last_value_in_few_calls() {
    let edge = start_edge(TempDir::new("dmi-burst"), |c| c.call_timeout = Duration::from_secs(60));
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let seen: Seen = Arc::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (s1, s2, g) = (Arc::clone(&seen), Arc::clone(&seen), Arc::clone(&gate));
    // Busy: its first update waits until the test has sent the burst.
    let server = Server::new()
        .unary(method::REGISTER_DEVICE, move |r: api::RegisterDeviceRequest| {
            let d = r.device.unwrap_or_default();
            s1.lock().unwrap().push(("RegisterDevice".into(), d.name.clone(), desired_of(&d)));
            async { Ok(api::RegisterDeviceResponse::default()) }
        })
        .unary(method::UPDATE_DEVICE, move |r: api::UpdateDeviceRequest| {
            let d = r.device.unwrap_or_default();
            let g = Arc::clone(&g);
            let s = Arc::clone(&s2);
            async move {
                let _permit = g.acquire().await.unwrap();
                s.lock().unwrap().push(("UpdateDevice".into(), d.name.clone(), desired_of(&d)));
                Ok(api::UpdateDeviceResponse {})
            }
        });
    let msock = edge.dir.join("slow.sock");
    let mapper_stop = CancellationToken::new();
    tokio::spawn(server.bind(&msock).unwrap().serve(mapper_stop.clone()));
    register(&ch, &register_request("slow-mapper", "modbus", &msock, false)).await.unwrap();
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-1", &with_desired("thermo-1", "modbus", "0")))
        .await
        .unwrap();
    for i in 1..=2000 {
        let d = with_desired("thermo-1", "modbus", &i.to_string());
        edge.ctx.send("dmi", from_twin(op::UPDATE, "default/device/thermo-1", &d)).await.unwrap();
    }
    let metrics = Arc::clone(&edge.metrics);
    assert!(metrics.pending_changes() <= 1, "one device, at most one change waits: {}", metrics.pending_changes());
    gate.add_permits(1 << 20);
    let s = Arc::clone(&seen);
    eventually("the mapper gets the last desired value", WAIT, || {
        s.lock().unwrap().last().is_some_and(|(_, _, v)| v == "2000")
    })
    .await;
    eventually("nothing waits", WAIT, || metrics.pending_changes() == 0).await;
    let got = seen.lock().unwrap().clone();
    assert!(got.len() < 50, "far fewer calls than updates: {}", got.len());
    assert_eq!(metrics.mapper_call_failures(), 0);
    mapper_stop.cancel();
    edge.stop.cancel();
}

/// A mapper that refuses every call keeps its changes waiting (bounded by
/// its objects, none dropped) and holds up no other protocol's mapper.
#[tokio::test]
async fn a_failing_mapper_keeps_its_changes_and_delays_no_other_mapper() {
    let edge = start_edge(TempDir::new("dmi-failing"), |_| {});
    wait_for_socket(&edge.sock).await;
    let ch = Channel::new(&edge.sock);
    let fsock = edge.dir.join("failing.sock");
    let (seen, failing_stop) = flaky_mapper(&fsock, usize::MAX);
    register(&ch, &register_request("failing-mapper", "failing", &fsock, false)).await.unwrap();
    // The devices' model (of another protocol; a registration sends it along).
    edge.ctx.send("dmi", from_twin(op::INSERT, "default/devicemodel/thermo-model", &model())).await.unwrap();
    let msock = edge.dir.join("mapper.sock");
    let (calls, mapper_stop) = fake_mapper(&msock);
    register(&ch, &register_request("modbus-mapper", "modbus", &msock, false)).await.unwrap();

    // Registered once each (that works), then updated over and over (that fails).
    for i in 0..20 {
        let name = format!("f-{i}");
        edge.ctx
            .send("dmi", from_twin(op::INSERT, &format!("default/device/{name}"), &device(&name, "failing")))
            .await
            .unwrap();
    }
    let s = Arc::clone(&seen);
    eventually("the failing mapper's devices are registered", WAIT, || s.lock().unwrap().len() >= 20).await;
    for round in 0..50 {
        for i in 0..20 {
            let name = format!("f-{i}");
            let d = with_desired(&name, "failing", &round.to_string());
            edge.ctx.send("dmi", from_twin(op::UPDATE, &format!("default/device/{name}"), &d)).await.unwrap();
        }
    }
    let metrics = Arc::clone(&edge.metrics);
    eventually("the failing mapper's calls fail", WAIT, || metrics.mapper_call_failures() >= 2).await;
    edge.ctx
        .send("dmi", from_twin(op::INSERT, "default/device/thermo-1", &device("thermo-1", "modbus")))
        .await
        .unwrap();
    let c = Arc::clone(&calls);
    eventually("the modbus mapper is called", WAIT, || {
        c.lock().unwrap().iter().any(|(m, n)| m == "RegisterDevice" && n == "thermo-1")
    })
    .await;
    // The failing mapper's changes still wait, one per device at most.
    let pending = metrics.pending_changes();
    assert!((1..=20).contains(&pending), "one change per device at most: {pending}");
    // It registers again with data: what that covers waits no more (but
    // the one call in flight, which is put back when it fails).
    let resp = register(&ch, &register_request("failing-mapper", "failing", &fsock, true)).await.unwrap();
    assert_eq!(resp.device_list.len(), 20);
    eventually("the covered changes are dropped", WAIT, || metrics.pending_changes() <= 1).await;
    failing_stop.cancel();
    mapper_stop.cancel();
    edge.stop.cancel();
}

/// A mapper on grpc-go (Debian's golang-google-grpc-dev), as KubeEdge's
/// mapper framework builds one: it dials the socket with grpc-go's HTTP/2,
/// registers with data and gets its protocol's device and model, reports a
/// twin whose values carry metadata maps (the twin gets the values), gets
/// NOT_FOUND as a grpc-go status for a device the node does not have, and
/// its own grpc-go server takes the edge's UpdateDevice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_go_mapper_registers_reports_and_is_called() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = TempDir::new("dmi-grpc-go");
    let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
    seed(&db);
    drop(db);
    let bin = edgehive_testkit::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gomapper/main.go"),
        dir.path(),
        "gomapper",
    );
    let mut edge = start_edge(dir, |_| {});
    wait_for_socket(&edge.sock).await;
    let mut child = tokio::process::Command::new(&bin)
        .arg(&edge.sock)
        .arg(edge.dir.join("go-mapper.sock"))
        .args(["opcua", "opc-1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let sink = Arc::clone(&lines);
    tokio::spawn(async move {
        while let Ok(Some(l)) = out.next_line().await {
            sink.lock().unwrap().push(l);
        }
    });
    let seen = |prefix: &str| lines.lock().unwrap().iter().find(|l| l.starts_with(prefix)).cloned();
    eventually("the grpc-go mapper registered and reported", WAIT, || seen("UNKNOWN").is_some()).await;
    assert_eq!(seen("REGISTERED").unwrap(), "REGISTERED models=[thermo-model] devices=[opc-1]");
    let unknown = seen("UNKNOWN").unwrap();
    assert!(unknown.contains("code = NotFound") && unknown.contains("no-such-device"), "{unknown}");
    let m = tokio::time::timeout(WAIT, edge.twin.recv()).await.unwrap().unwrap();
    assert_eq!(decode_topic(&m), "$hw/events/device/opc-1/twin/update");
    assert_eq!(
        m.content.to_value()["twin"],
        json!({"temperature": {"expected": {"value": "20"}, "actual": {"value": "21.5"}}})
    );
    // A new desired value reaches the mapper's grpc-go server.
    let mut changed = device("opc-1", "opcua");
    changed["spec"]["properties"][0]["desired"]["value"] = json!("25");
    edge.ctx.send("dmi", from_twin(op::UPDATE, "default/device/opc-1", &changed)).await.unwrap();
    eventually("UpdateDevice at the grpc-go mapper", WAIT, || {
        seen("CALL /v1beta1.DeviceMapperService/UpdateDevice").is_some()
    })
    .await;
    drop(child.stdin.take());
    tokio::time::timeout(WAIT, child.wait()).await.expect("the mapper ends with its input").unwrap();
    edge.stop.cancel();
}
