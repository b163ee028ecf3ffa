//! A custom object admitted as apiextensions admits it: unknown fields
//! pruned (reported for field validation at decode time, see
//! [`crate::fieldvalidation::custom`]), the schema's defaults applied, then
//! its metadata and its schema validated. (It is stored at the
//! definition's storage version by [`crate::conversion::to_stored`].)
//! Nothing may be created while the definition is being deleted.

use edgehive_registry::validation::validate_custom_meta;
use edgehive_store::resources::ResourceDef;
use serde_json::Value;

use crate::context::ApiState;
use crate::status::ApiError;

/// Admits `obj`, a new (`old` is `None`) or changed object of `res`;
/// nothing for a resource no definition serves.
pub(crate) fn admit(
    shared: &ApiState,
    res: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(served) = shared.crds.get(res) else { return Ok(()) };
    if old.is_none() && served.terminating {
        return Err(ApiError::method_not_allowed("create not allowed while custom resource definition is terminating"));
    }
    if let Some(schema) = &served.schema {
        schema.prune(obj);
        schema.apply_defaults(obj);
    }
    let mut errors = validate_custom_meta(obj, res.namespaced, old);
    if let Some(schema) = &served.schema {
        errors.extend(schema.validate(obj));
    }
    edgehive_registry::admit::refuse(res, obj, errors)
}
