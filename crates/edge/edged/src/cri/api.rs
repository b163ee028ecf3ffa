//! The part of the CRI API (`runtime.v1`) edged uses, declared by hand with
//! the field numbers of the protocol's `api.proto`. Protobuf skips fields a
//! side does not know, so a subset of each message talks to any runtime
//! that speaks `runtime.v1`.

#![allow(missing_docs, unreachable_pub)]

use std::collections::HashMap;

/// `runtime.v1.RuntimeService`'s path prefix.
pub const RUNTIME: &str = "/runtime.v1.RuntimeService/";
/// `runtime.v1.ImageService`'s path prefix.
pub const IMAGE: &str = "/runtime.v1.ImageService/";

#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionRequest {
    #[prost(string, tag = "1")]
    pub version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionResponse {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    #[prost(string, tag = "4")]
    pub runtime_api_version: String,
}

/// `NamespaceMode`: POD = 0, CONTAINER = 1, NODE = 2.
pub const NAMESPACE_POD: i32 = 0;
pub const NAMESPACE_CONTAINER: i32 = 1;
pub const NAMESPACE_NODE: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamespaceOption {
    #[prost(int32, tag = "1")]
    pub network: i32,
    #[prost(int32, tag = "2")]
    pub pid: i32,
    #[prost(int32, tag = "3")]
    pub ipc: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxSandboxSecurityContext {
    #[prost(message, optional, tag = "1")]
    pub namespace_options: Option<NamespaceOption>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxPodSandboxConfig {
    #[prost(string, tag = "1")]
    pub cgroup_parent: String,
    #[prost(message, optional, tag = "2")]
    pub security_context: Option<LinuxSandboxSecurityContext>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxMetadata {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub uid: String,
    #[prost(string, tag = "3")]
    pub namespace: String,
    #[prost(uint32, tag = "4")]
    pub attempt: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxConfig {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(string, tag = "2")]
    pub hostname: String,
    #[prost(string, tag = "3")]
    pub log_directory: String,
    #[prost(map = "string, string", tag = "6")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "7")]
    pub annotations: HashMap<String, String>,
    #[prost(message, optional, tag = "8")]
    pub linux: Option<LinuxPodSandboxConfig>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    pub config: Option<PodSandboxConfig>,
    #[prost(string, tag = "2")]
    pub runtime_handler: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxResponse {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// Stop, remove and status requests of a sandbox share this shape.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxIdRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxNetworkStatus {
    #[prost(string, tag = "1")]
    pub ip: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatus {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(int32, tag = "3")]
    pub state: i32,
    #[prost(message, optional, tag = "5")]
    pub network: Option<PodSandboxNetworkStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<PodSandboxStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(map = "string, string", tag = "3")]
    pub label_selector: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<PodSandboxFilter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(int32, tag = "3")]
    pub state: i32,
    #[prost(map = "string, string", tag = "5")]
    pub labels: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxResponse {
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<PodSandbox>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageSpec {
    #[prost(string, tag = "1")]
    pub image: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mount {
    #[prost(string, tag = "1")]
    pub container_path: String,
    #[prost(string, tag = "2")]
    pub host_path: String,
    #[prost(bool, tag = "3")]
    pub readonly: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerResources {
    #[prost(int64, tag = "1")]
    pub cpu_period: i64,
    #[prost(int64, tag = "2")]
    pub cpu_quota: i64,
    #[prost(int64, tag = "3")]
    pub cpu_shares: i64,
    #[prost(int64, tag = "4")]
    pub memory_limit_in_bytes: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerSecurityContext {
    #[prost(message, optional, tag = "3")]
    pub namespace_options: Option<NamespaceOption>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerConfig {
    #[prost(message, optional, tag = "1")]
    pub resources: Option<LinuxContainerResources>,
    #[prost(message, optional, tag = "2")]
    pub security_context: Option<LinuxContainerSecurityContext>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerMetadata {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint32, tag = "2")]
    pub attempt: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerConfig {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(message, optional, tag = "2")]
    pub image: Option<ImageSpec>,
    #[prost(string, repeated, tag = "3")]
    pub command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub args: Vec<String>,
    #[prost(string, tag = "5")]
    pub working_dir: String,
    #[prost(message, repeated, tag = "6")]
    pub envs: Vec<KeyValue>,
    #[prost(message, repeated, tag = "7")]
    pub mounts: Vec<Mount>,
    #[prost(map = "string, string", tag = "9")]
    pub labels: HashMap<String, String>,
    #[prost(string, tag = "11")]
    pub log_path: String,
    #[prost(bool, tag = "12")]
    pub stdin: bool,
    #[prost(bool, tag = "13")]
    pub stdin_once: bool,
    #[prost(bool, tag = "14")]
    pub tty: bool,
    #[prost(message, optional, tag = "15")]
    pub linux: Option<LinuxContainerConfig>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "2")]
    pub config: Option<ContainerConfig>,
    #[prost(message, optional, tag = "3")]
    pub sandbox_config: Option<PodSandboxConfig>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerResponse {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

/// Start, remove, status and reopen-log requests of a container share this
/// shape (`container_id = 1`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerIdRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StopContainerRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(int64, tag = "2")]
    pub timeout: i64,
}

/// `PodSandboxState`: SANDBOX_READY = 0.
pub const SANDBOX_READY: i32 = 0;

/// `ContainerState`.
pub const CONTAINER_CREATED: i32 = 0;
pub const CONTAINER_RUNNING: i32 = 1;
pub const CONTAINER_EXITED: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatus {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(int32, tag = "3")]
    pub state: i32,
    #[prost(int64, tag = "5")]
    pub started_at: i64,
    #[prost(int64, tag = "6")]
    pub finished_at: i64,
    #[prost(int32, tag = "7")]
    pub exit_code: i32,
    #[prost(string, tag = "9")]
    pub image_ref: String,
    #[prost(string, tag = "10")]
    pub reason: String,
    #[prost(string, tag = "11")]
    pub message: String,
    #[prost(string, tag = "15")]
    pub log_path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<ContainerStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerFilter {
    #[prost(string, tag = "3")]
    pub pod_sandbox_id: String,
    #[prost(map = "string, string", tag = "4")]
    pub label_selector: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<ContainerFilter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "3")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(int32, tag = "6")]
    pub state: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersResponse {
    #[prost(message, repeated, tag = "1")]
    pub containers: Vec<Container>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecSyncRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(string, repeated, tag = "2")]
    pub cmd: Vec<String>,
    #[prost(int64, tag = "3")]
    pub timeout: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecSyncResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub stdout: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub stderr: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub exit_code: i32,
}

/// `kubectl exec`: the runtime answers with a URL on its streaming server
/// where the command runs once a client connects.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(string, repeated, tag = "2")]
    pub cmd: Vec<String>,
    #[prost(bool, tag = "3")]
    pub tty: bool,
    #[prost(bool, tag = "4")]
    pub stdin: bool,
    #[prost(bool, tag = "5")]
    pub stdout: bool,
    /// Must be false with `tty` (the terminal merges the two outputs).
    #[prost(bool, tag = "6")]
    pub stderr: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecResponse {
    #[prost(string, tag = "1")]
    pub url: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Image {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, repeated, tag = "2")]
    pub repo_tags: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub image: Option<Image>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageResponse {
    #[prost(string, tag = "1")]
    pub image_ref: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatsRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatsResponse {
    #[prost(message, optional, tag = "1")]
    pub stats: Option<ContainerStats>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStats {
    #[prost(message, optional, tag = "2")]
    pub cpu: Option<CpuUsage>,
    #[prost(message, optional, tag = "3")]
    pub memory: Option<MemoryUsage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CpuUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub usage_core_nano_seconds: Option<UInt64Value>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MemoryUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub working_set_bytes: Option<UInt64Value>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AttachRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(bool, tag = "2")]
    pub stdin: bool,
    #[prost(bool, tag = "3")]
    pub tty: bool,
    #[prost(bool, tag = "4")]
    pub stdout: bool,
    #[prost(bool, tag = "5")]
    pub stderr: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PortForwardRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    #[prost(int32, repeated, tag = "2")]
    pub port: Vec<i32>,
}

/// `AttachResponse` and `PortForwardResponse`: the streaming URL.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UrlResponse {
    #[prost(string, tag = "1")]
    pub url: String,
}
