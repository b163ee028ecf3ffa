//! DMI: the Device Management Interface KubeEdge mappers speak (dmi/v1beta1,
//! gRPC over a unix socket), both ends.
//!
//! - [`api`]: the messages, declared by hand with the proto's field numbers.
//! - [`convert`]: Kubernetes Device/DeviceModel JSON to those messages.
//! - [`Dmi`]: the edge's `dmi` beehive module, serving DeviceManagerService
//!   on the DMI socket and calling each mapper's DeviceMapperService.
//!
//! A mapper (crate `edgehive-mapper`) uses `api` and `convert` with
//! `edgehive-grpc` for its own end.

pub mod api;
pub mod convert;
mod module;
mod pending;
mod service;
mod state;

pub use module::{
    Dmi, DmiConfig, DmiMetrics, GROUP, MODULE, RESOURCE_TYPE_DEVICE, RESOURCE_TYPE_DEVICEMAPPER,
    RESOURCE_TYPE_DEVICEMODEL,
};
pub use state::{DmiCache, MapperRecord, RegisterData, TokenBucket};
