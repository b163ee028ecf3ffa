//! KubeEdge custom resources (devices.kubeedge.io Device and DeviceModel, reliablesyncs.kubeedge.io
//! ObjectSync and ClusterObjectSync), checked the way a KubeEdge cluster checks them:
//!
//! * metadata by the custom-resource strategy (`ValidateObjectMetaAccessor`, names are DNS-1123
//!   subdomains, no core finalizer rule);
//! * field types, enums and required fields by the CRD's openAPI schema (done in `schema`);
//! * then, only when all of that passed, KubeEdge's admission webhooks `validatedevice.kubeedge.io` and
//!   `validatedevicemodel.kubeedge.io`, which refuse repeated property names.
//!
//! The CRDs require nothing else: `deviceModelRef`, `nodeName` and the protocol are free-form there, and an
//! ObjectSync's `{nodeName}.{objectUID}` name is a convention of the sync controller, not a rule.

use super::json::{arr_at, get, str_at};
use super::meta::{self, MetaRules};
use super::{FieldError, KindInfo};
use serde_json::Value;
use std::collections::BTreeSet;

/// The device webhook's name.
pub(crate) const DEVICE_WEBHOOK: &str = "validatedevice.kubeedge.io";
/// The device model webhook's name.
pub(crate) const DEVICE_MODEL_WEBHOOK: &str = "validatedevicemodel.kubeedge.io";

/// A KubeEdge object on create or update (type errors come from the schema check beforehand).
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: false };
    let errs = meta::validate(get(obj, "metadata"), rules);
    if !errs.is_empty() {
        return errs;
    }
    let webhook = match kind {
        "Device" => DEVICE_WEBHOOK,
        "DeviceModel" => DEVICE_MODEL_WEBHOOK,
        _ => return errs,
    };
    let properties = arr_at(get(obj, "spec"), "properties");
    let mut seen = BTreeSet::new();
    for (i, p) in properties.iter().enumerate() {
        if !seen.insert(str_at(p, "name")) {
            let at = format!("spec.properties[{i}].name");
            return vec![FieldError::webhook(webhook, &at, "property names must be unique.")];
        }
    }
    errs
}
