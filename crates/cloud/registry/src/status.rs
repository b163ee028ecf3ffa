//! Kubernetes `Status` errors: the code, reason and message every failed
//! request carries, so that kubectl and client libraries report them as they
//! would report Kubernetes' own.

use edgehive_store::StoreError;
use edgehive_store::watch::TooLargeResourceVersion;
use http::StatusCode;
use serde_json::{Value, json};

/// One cause of an Invalid (422) error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, ...
    pub reason: String,
    /// Human text.
    pub message: String,
    /// Field path.
    pub field: String,
}

/// A failed request, as a Kubernetes `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub code: StatusCode,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...
    pub reason: &'static str,
    /// What a person reads.
    pub message: String,
    /// `details` (boxed: errors travel through many `Result`s).
    pub details: Box<Details>,
}

/// The `details` of a `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource, as Kubernetes puts it).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code.as_u16(), self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// An error with code, reason and message.
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: Box::default() }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    /// 404 NotFound for a path that serves nothing.
    pub fn no_route() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource")
    }

    /// 404 NotFound for an object.
    pub fn not_found(resource: &str, group: &str, name: &str) -> ApiError {
        let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", format!("{qualified} \"{name}\" not found"))
            .details(name, group, resource)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", message)
    }

    /// 422 Invalid with causes (each cause's message is also its summary).
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let list = causes.iter().map(|c| c.message.clone()).collect::<Vec<_>>();
        ApiError::invalid_with_summary(kind, group, name, causes, &list)
    }

    /// 422 Invalid: `{Kind} "{name}" is invalid: {summary}`, with causes.
    pub fn invalid_with_summary(kind: &str, group: &str, name: &str, causes: Vec<Cause>, list: &[String]) -> ApiError {
        let summary = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let mut e = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {summary}"),
        )
        .details(name, group, kind);
        e.details.causes = causes;
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// 504 Timeout for a read at a revision the store did not reach in
    /// time, as Kubernetes' `storage.NewTooLargeResourceVersionError`
    /// (staging/src/k8s.io/apiserver/pkg/storage/errors.go) words it: the
    /// cause `ResourceVersionTooLarge`, retry after 1 s.
    pub fn too_large_resource_version(e: TooLargeResourceVersion) -> ApiError {
        let mut err = ApiError::new(StatusCode::GATEWAY_TIMEOUT, "Timeout", format!("Timeout: {e}"));
        err.details.causes = vec![Cause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        }];
        err.details.retry_after = Some(1);
        err
    }

    /// Sets `details`.
    pub fn details(mut self, name: &str, group: &str, kind: &str) -> ApiError {
        self.details.name = Some(name.to_string()).filter(|s| !s.is_empty());
        self.details.group = Some(group.to_string()).filter(|s| !s.is_empty());
        self.details.kind = Some(kind.to_string()).filter(|s| !s.is_empty());
        self
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        let d = &self.details;
        if let Some(n) = &d.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &d.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &d.kind {
            details.insert("kind".into(), json!(k));
        }
        if !d.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    d.causes
                        .iter()
                        .map(|c| {
                            // Each is `omitempty` in Kubernetes' StatusCause.
                            let mut cause = serde_json::Map::new();
                            for (key, value) in [("reason", &c.reason), ("message", &c.message), ("field", &c.field)] {
                                if !value.is_empty() {
                                    cause.insert(key.into(), json!(value));
                                }
                            }
                            Value::Object(cause)
                        })
                        .collect(),
                ),
            );
        }
        if let Some(s) = d.retry_after {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }

    /// A store error as Kubernetes reports it, for `resource` in `group`.
    pub fn from_store(err: StoreError, resource: &str, group: &str) -> ApiError {
        match err {
            StoreError::NotFound { name, .. } => ApiError::not_found(resource, group, &name),
            StoreError::AlreadyExists { name, .. } => {
                let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
                ApiError::new(StatusCode::CONFLICT, "AlreadyExists", format!("{qualified} \"{name}\" already exists"))
                    .details(&name, group, resource)
            }
            e @ StoreError::Conflict { .. } => {
                let StoreError::Conflict { ref name, .. } = e else { unreachable!() };
                let name = name.clone();
                ApiError::new(StatusCode::CONFLICT, "Conflict", e.to_string()).details(&name, group, resource)
            }
            StoreError::Expired(m) => ApiError::new(StatusCode::GONE, "Expired", m),
            StoreError::BadRequest(m) => ApiError::bad_request(m),
            e @ StoreError::TooLarge { .. } => ApiError::too_large(e.to_string()),
            StoreError::Timeout(m) => {
                let mut e = ApiError::new(StatusCode::GATEWAY_TIMEOUT, "Timeout", m);
                e.details.retry_after = Some(1);
                e
            }
            e @ (StoreError::Unavailable(_) | StoreError::Backend(_) | StoreError::Corrupt { .. }) => {
                ApiError::internal(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_objects_look_like_kubernetes() {
        let s = ApiError::not_found("pods", "", "web").to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "pods \"web\" not found");
        assert_eq!(s["details"]["name"], "web");
        assert_eq!(s["details"]["kind"], "pods");
        let e = ApiError::from_store(
            StoreError::AlreadyExists { resource: "leases.coordination.k8s.io".into(), name: "n".into() },
            "leases",
            "coordination.k8s.io",
        );
        assert_eq!(e.message, "leases.coordination.k8s.io \"n\" already exists");
        assert_eq!(e.code, StatusCode::CONFLICT);
        let inv = ApiError::invalid(
            "Pod",
            "",
            "p",
            vec![Cause {
                reason: "FieldValueRequired".into(),
                message: "spec.containers: Required value".into(),
                field: "spec.containers".into(),
            }],
        );
        assert_eq!(inv.message, "Pod \"p\" is invalid: spec.containers: Required value");
        assert_eq!(inv.to_status()["details"]["causes"][0]["field"], "spec.containers");
    }

    #[test]
    fn a_too_large_resource_version_is_kubernetes_timeout() {
        let s =
            ApiError::too_large_resource_version(TooLargeResourceVersion { requested: 1012, current: 12 }).to_status();
        assert_eq!(
            s,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Timeout: Too large resource version: 1012, current: 12", "reason": "Timeout",
                "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                            "retryAfterSeconds": 1},
                "code": 504,
            })
        );
    }
}
