//! DeviceMapperService, the mapper's end of DMI: the edge adds, changes
//! and removes devices and models, and asks for a device's twins.

use std::sync::Arc;

use edgehive_dmi::api::{self, method};
use edgehive_grpc::{Server, Status};

use crate::Mapper;

pub(crate) fn server(mapper: Arc<Mapper>) -> Server {
    let m = |mapper: &Arc<Mapper>| Arc::clone(mapper);
    let (m1, m2, m3, m4, m5, m6, m7) =
        (m(&mapper), m(&mapper), m(&mapper), m(&mapper), m(&mapper), m(&mapper), m(&mapper));
    Server::new()
        .unary(method::REGISTER_DEVICE, move |r: api::RegisterDeviceRequest| {
            let result = r.device.ok_or_else(|| Status::invalid_argument("no device")).and_then(|d| {
                let name = d.name.clone();
                let namespace = d.namespace.clone();
                m1.apply_device(d)?;
                Ok(api::RegisterDeviceResponse { device_name: name, device_namespace: namespace })
            });
            async move { result }
        })
        .unary(method::UPDATE_DEVICE, move |r: api::UpdateDeviceRequest| {
            let result = r
                .device
                .ok_or_else(|| Status::invalid_argument("no device"))
                .and_then(|d| m2.apply_device(d))
                .map(|()| api::UpdateDeviceResponse {});
            async move { result }
        })
        .unary(method::REMOVE_DEVICE, move |r: api::RemoveDeviceRequest| {
            // Removing a device not driven here is not an error (the edge
            // may repeat a delete).
            m3.remove_device(&r.device_name);
            async { Ok(api::RemoveDeviceResponse {}) }
        })
        .unary(method::CREATE_DEVICE_MODEL, move |r: api::CreateDeviceModelRequest| {
            let result = r.model.ok_or_else(|| Status::invalid_argument("no model")).map(|model| {
                let resp = api::CreateDeviceModelResponse {
                    device_model_name: model.name.clone(),
                    device_model_namespace: model.namespace.clone(),
                };
                m4.put_model(model);
                resp
            });
            async move { result }
        })
        .unary(method::UPDATE_DEVICE_MODEL, move |r: api::UpdateDeviceModelRequest| {
            let result = r.model.ok_or_else(|| Status::invalid_argument("no model")).map(|model| {
                m5.put_model(model);
                api::UpdateDeviceModelResponse {}
            });
            async move { result }
        })
        .unary(method::REMOVE_DEVICE_MODEL, move |r: api::RemoveDeviceModelRequest| {
            m6.remove_model(&r.model_name);
            async { Ok(api::RemoveDeviceModelResponse {}) }
        })
        .unary(method::GET_DEVICE, move |r: api::GetDeviceRequest| {
            let result = m7
                .get_device(&r.device_name)
                .map(|d| api::GetDeviceResponse { device: Some(d) })
                .ok_or_else(|| Status::not_found(format!("device {:?} is not driven by this mapper", r.device_name)));
            async move { result }
        })
}
