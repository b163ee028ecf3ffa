//! The DMI messages (`v1beta1`, KubeEdge `pkg/apis/dmi/v1beta1/api.proto`
//! of v1.15), declared by hand with the field numbers of the proto file —
//! no protoc at build time. Fields later KubeEdge releases added
//! (namespaces, `ReportDeviceStates`) are here too: protobuf skips a field
//! a side does not know, so both generations of mappers talk to us.

#![allow(missing_docs)]

use std::collections::HashMap;

/// `v1beta1.DeviceManagerService`: the edge serves it on the DMI socket.
pub const MANAGER: &str = "/v1beta1.DeviceManagerService/";
/// `v1beta1.DeviceMapperService`: each mapper serves it on its own socket.
pub const MAPPER: &str = "/v1beta1.DeviceMapperService/";

/// Full method paths.
pub mod method {
    pub const MAPPER_REGISTER: &str = "/v1beta1.DeviceManagerService/MapperRegister";
    pub const REPORT_DEVICE_STATUS: &str = "/v1beta1.DeviceManagerService/ReportDeviceStatus";
    /// Added after v1.15 (mapper-framework calls it for a device's state).
    pub const REPORT_DEVICE_STATES: &str = "/v1beta1.DeviceManagerService/ReportDeviceStates";
    pub const REGISTER_DEVICE: &str = "/v1beta1.DeviceMapperService/RegisterDevice";
    pub const REMOVE_DEVICE: &str = "/v1beta1.DeviceMapperService/RemoveDevice";
    pub const UPDATE_DEVICE: &str = "/v1beta1.DeviceMapperService/UpdateDevice";
    pub const CREATE_DEVICE_MODEL: &str = "/v1beta1.DeviceMapperService/CreateDeviceModel";
    pub const REMOVE_DEVICE_MODEL: &str = "/v1beta1.DeviceMapperService/RemoveDeviceModel";
    pub const UPDATE_DEVICE_MODEL: &str = "/v1beta1.DeviceMapperService/UpdateDeviceModel";
    pub const GET_DEVICE: &str = "/v1beta1.DeviceMapperService/GetDevice";
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MapperRegisterRequest {
    #[prost(bool, tag = "1")]
    pub with_data: bool,
    #[prost(message, optional, tag = "2")]
    pub mapper: Option<MapperInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MapperRegisterResponse {
    #[prost(message, repeated, tag = "1")]
    pub model_list: Vec<DeviceModel>,
    #[prost(message, repeated, tag = "2")]
    pub device_list: Vec<Device>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceModel {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<DeviceModelSpec>,
    /// After v1.15.
    #[prost(string, tag = "3")]
    pub namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceModelSpec {
    #[prost(message, repeated, tag = "1")]
    pub properties: Vec<ModelProperty>,
    #[prost(message, repeated, tag = "2")]
    pub commands: Vec<DeviceCommand>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProperty {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub r#type: String,
    #[prost(string, tag = "4")]
    pub access_mode: String,
    #[prost(string, tag = "5")]
    pub minimum: String,
    #[prost(string, tag = "6")]
    pub maximum: String,
    #[prost(string, tag = "7")]
    pub unit: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceCommand {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub url: String,
    #[prost(string, tag = "3")]
    pub method: String,
    #[prost(string, repeated, tag = "4")]
    pub status_code: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub parameters: Vec<String>,
    #[prost(bytes = "vec", tag = "6")]
    pub response: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Device {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<DeviceSpec>,
    #[prost(message, optional, tag = "3")]
    pub status: Option<DeviceStatus>,
    /// After v1.15.
    #[prost(string, tag = "4")]
    pub namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceSpec {
    #[prost(string, tag = "1")]
    pub device_model_reference: String,
    #[prost(message, optional, tag = "2")]
    pub protocol: Option<ProtocolConfig>,
    #[prost(message, repeated, tag = "3")]
    pub properties: Vec<DeviceProperty>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceProperty {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub desired: Option<TwinProperty>,
    #[prost(message, optional, tag = "3")]
    pub visitors: Option<VisitorConfig>,
    #[prost(int64, tag = "4")]
    pub report_cycle: i64,
    #[prost(int64, tag = "5")]
    pub collect_cycle: i64,
    #[prost(bool, tag = "6")]
    pub report_to_cloud: bool,
    #[prost(message, optional, tag = "7")]
    pub push_method: Option<PushMethod>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProtocolConfig {
    #[prost(string, tag = "1")]
    pub protocol_name: String,
    #[prost(message, optional, tag = "2")]
    pub config_data: Option<CustomizedValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VisitorConfig {
    #[prost(string, tag = "1")]
    pub protocol_name: String,
    #[prost(message, optional, tag = "2")]
    pub config_data: Option<CustomizedValue>,
}

/// `map<string, google.protobuf.Any>`: each value a well-known wrapper
/// (StringValue, Int32Value, Int64Value, FloatValue, BoolValue).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CustomizedValue {
    #[prost(map = "string, message", tag = "1")]
    pub data: HashMap<String, Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// The wrappers of `google/protobuf/wrappers.proto` that KubeEdge packs
/// into `Any`.
pub mod wrappers {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StringValue {
        #[prost(string, tag = "1")]
        pub value: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Int32Value {
        #[prost(int32, tag = "1")]
        pub value: i32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Int64Value {
        #[prost(int64, tag = "1")]
        pub value: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FloatValue {
        #[prost(float, tag = "1")]
        pub value: f32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DoubleValue {
        #[prost(double, tag = "1")]
        pub value: f64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BoolValue {
        #[prost(bool, tag = "1")]
        pub value: bool,
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PushMethod {
    #[prost(message, optional, tag = "1")]
    pub http: Option<PushMethodHttp>,
    #[prost(message, optional, tag = "2")]
    pub mqtt: Option<PushMethodMqtt>,
    #[prost(message, optional, tag = "3")]
    pub db_method: Option<DbMethod>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PushMethodHttp {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(int64, tag = "2")]
    pub port: i64,
    #[prost(string, tag = "3")]
    pub requestpath: String,
    #[prost(int64, tag = "4")]
    pub timeout: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PushMethodMqtt {
    #[prost(string, tag = "1")]
    pub address: String,
    #[prost(string, tag = "2")]
    pub topic: String,
    #[prost(int32, tag = "3")]
    pub qos: i32,
    #[prost(bool, tag = "4")]
    pub retained: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DbMethod {
    #[prost(message, optional, tag = "1")]
    pub influxdb2: Option<DbMethodInfluxdb2>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DbMethodInfluxdb2 {
    #[prost(message, optional, tag = "1")]
    pub influxdb2_client_config: Option<Influxdb2ClientConfig>,
    #[prost(message, optional, tag = "2")]
    pub influxdb2_data_config: Option<Influxdb2DataConfig>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Influxdb2DataConfig {
    #[prost(string, tag = "1")]
    pub measurement: String,
    #[prost(map = "string, string", tag = "2")]
    pub tag: HashMap<String, String>,
    #[prost(string, tag = "3")]
    pub field_key: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Influxdb2ClientConfig {
    #[prost(string, tag = "1")]
    pub url: String,
    #[prost(string, tag = "2")]
    pub org: String,
    #[prost(string, tag = "3")]
    pub bucket: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MapperInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(string, tag = "3")]
    pub api_version: String,
    #[prost(string, tag = "4")]
    pub protocol: String,
    /// The mapper's socket path (bytes in the proto).
    #[prost(bytes = "vec", tag = "5")]
    pub address: Vec<u8>,
    #[prost(string, tag = "6")]
    pub state: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportDeviceStatusRequest {
    #[prost(string, tag = "1")]
    pub device_name: String,
    #[prost(message, optional, tag = "2")]
    pub reported_device: Option<DeviceStatus>,
    /// After v1.15.
    #[prost(string, tag = "3")]
    pub device_namespace: String,
}

/// After v1.15: a device's state ("ok", "online", "offline", ...).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportDeviceStatesRequest {
    #[prost(string, tag = "1")]
    pub device_name: String,
    #[prost(string, tag = "2")]
    pub device_namespace: String,
    #[prost(string, tag = "3")]
    pub state: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportDeviceStatesResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceStatus {
    #[prost(message, repeated, tag = "1")]
    pub twins: Vec<Twin>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Twin {
    #[prost(string, tag = "1")]
    pub property_name: String,
    #[prost(message, optional, tag = "2")]
    pub observed_desired: Option<TwinProperty>,
    #[prost(message, optional, tag = "3")]
    pub reported: Option<TwinProperty>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TwinProperty {
    #[prost(string, tag = "1")]
    pub value: String,
    #[prost(map = "string, string", tag = "2")]
    pub metadata: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportDeviceStatusResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterDeviceRequest {
    #[prost(message, optional, tag = "1")]
    pub device: Option<Device>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterDeviceResponse {
    #[prost(string, tag = "1")]
    pub device_name: String,
    /// After v1.15.
    #[prost(string, tag = "2")]
    pub device_namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateDeviceModelRequest {
    #[prost(message, optional, tag = "1")]
    pub model: Option<DeviceModel>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateDeviceModelResponse {
    #[prost(string, tag = "1")]
    pub device_model_name: String,
    /// After v1.15.
    #[prost(string, tag = "2")]
    pub device_model_namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoveDeviceRequest {
    #[prost(string, tag = "1")]
    pub device_name: String,
    /// After v1.15.
    #[prost(string, tag = "2")]
    pub device_namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoveDeviceResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoveDeviceModelRequest {
    #[prost(string, tag = "1")]
    pub model_name: String,
    /// After v1.15.
    #[prost(string, tag = "2")]
    pub model_namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoveDeviceModelResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateDeviceRequest {
    #[prost(message, optional, tag = "1")]
    pub device: Option<Device>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateDeviceResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateDeviceModelRequest {
    #[prost(message, optional, tag = "1")]
    pub model: Option<DeviceModel>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateDeviceModelResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetDeviceRequest {
    #[prost(string, tag = "1")]
    pub device_name: String,
    /// After v1.15.
    #[prost(string, tag = "2")]
    pub device_namespace: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetDeviceResponse {
    #[prost(message, optional, tag = "1")]
    pub device: Option<Device>,
}
