//! The review APIs, create-only and with no storage behind them, as
//! kube-apiserver serves them: authorization.k8s.io/v1
//! `SelfSubjectAccessReview` (`kubectl auth can-i`), `SubjectAccessReview`,
//! `LocalSubjectAccessReview` and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`), and authentication.k8s.io/v1
//! `SelfSubjectReview` (`kubectl auth whoami`) and `TokenReview`. Each
//! answers the posted object with its `status` filled in (201, as
//! Kubernetes answers a create).

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::context::{ApiState, User};
use crate::rbac::{Attributes, ResourceAttributes};
use crate::response::{Body, value_response};
use crate::status::{ApiError, Cause};

/// authorization.k8s.io.
pub(crate) const AUTHORIZATION: &str = "authorization.k8s.io";
/// authentication.k8s.io.
pub(crate) const AUTHENTICATION: &str = "authentication.k8s.io";
/// The one version of both.
pub(crate) const VERSION: &str = "v1";

/// One review resource.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Review {
    pub(crate) group: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
}

/// Every review served, in discovery order.
pub(crate) static REVIEWS: &[Review] = &[
    Review {
        group: AUTHORIZATION,
        plural: "localsubjectaccessreviews",
        kind: "LocalSubjectAccessReview",
        namespaced: true,
    },
    Review {
        group: AUTHORIZATION,
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
    },
    Review {
        group: AUTHORIZATION,
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
    },
    Review { group: AUTHORIZATION, plural: "subjectaccessreviews", kind: "SubjectAccessReview", namespaced: false },
    Review { group: AUTHENTICATION, plural: "selfsubjectreviews", kind: "SelfSubjectReview", namespaced: false },
    Review { group: AUTHENTICATION, plural: "tokenreviews", kind: "TokenReview", namespaced: false },
];

/// The groups, for discovery.
pub(crate) const GROUPS: [&str; 2] = [AUTHENTICATION, AUTHORIZATION];

/// A review path's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewTarget {
    pub(crate) review: &'static Review,
    pub(crate) namespace: Option<String>,
}

/// Whether `group`/`version` is one of these groups.
pub(crate) fn serves(group: &str, version: Option<&str>) -> bool {
    GROUPS.contains(&group) && version.is_none_or(|v| v == VERSION)
}

/// Parses the part of a path after `/apis/{group}/v1/`.
pub(crate) fn parse(group: &str, rest: &[&str]) -> Option<ReviewTarget> {
    let find = |plural: &str, namespaced: bool| {
        REVIEWS.iter().find(|r| r.group == group && r.plural == plural && r.namespaced == namespaced)
    };
    match rest {
        [plural] => Some(ReviewTarget { review: find(plural, false)?, namespace: None }),
        ["namespaces", ns, plural] => {
            Some(ReviewTarget { review: find(plural, true)?, namespace: Some((*ns).to_owned()) })
        }
        _ => None,
    }
}

/// The group's resources for discovery, legacy (`aggregated = false`) or aggregated.
pub(crate) fn discovery_resources(group: &str, aggregated: bool) -> Vec<Value> {
    REVIEWS
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            if aggregated {
                json!({
                    "resource": r.plural,
                    "responseKind": {"group": r.group, "version": VERSION, "kind": r.kind},
                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": r.kind.to_ascii_lowercase(),
                    "verbs": ["create"],
                })
            } else {
                json!({
                    "name": r.plural,
                    "singularName": r.kind.to_ascii_lowercase(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["create"],
                })
            }
        })
        .collect()
}

/// The attributes authorizing a request to the review itself.
pub(crate) fn attributes(target: &ReviewTarget) -> Attributes {
    Attributes::Resource(ResourceAttributes {
        verb: "create".into(),
        group: target.review.group.into(),
        resource: target.review.plural.into(),
        subresource: None,
        namespace: target.namespace.clone().unwrap_or_default(),
        name: String::new(),
    })
}

fn invalid(review: &Review, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(review.kind, review.group, "", causes)
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause { reason: reason.into(), message, field: field.into() }
}

/// What a spec asks about: resource or non-resource attributes (exactly one).
fn asked(review: &Review, spec: &Value, default_namespace: Option<&str>) -> Result<Attributes, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    match (res, non) {
        (Some(_), Some(n)) => Err(invalid(
            review,
            vec![cause(
                "FieldValueInvalid",
                "spec.nonResourceAttributes",
                format!(
                    "spec.nonResourceAttributes: Invalid value: {}: cannot be specified in combination with resourceAttributes",
                    go_struct_non_resource(n)
                ),
            )],
        )),
        (None, None) => Err(invalid(
            review,
            vec![cause(
                "FieldValueInvalid",
                "spec.resourceAttributes",
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
            )],
        )),
        (Some(r), None) => {
            let mut namespace = s(r, "namespace");
            if let Some(ns) = default_namespace {
                if namespace.is_empty() {
                    namespace = ns.to_owned();
                } else if namespace != ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match namespace: {ns}"
                    )));
                }
            }
            let subresource = s(r, "subresource");
            Ok(Attributes::Resource(ResourceAttributes {
                verb: s(r, "verb"),
                group: s(r, "group"),
                resource: s(r, "resource"),
                subresource: (!subresource.is_empty()).then_some(subresource),
                namespace,
                name: s(r, "name"),
            }))
        }
        (None, Some(n)) => {
            if default_namespace.is_some() {
                return Err(invalid(
                    review,
                    vec![cause(
                        "FieldValueInvalid",
                        "spec.nonResourceAttributes",
                        format!(
                            "spec.nonResourceAttributes: Invalid value: {}: disallowed on this kind of request",
                            go_struct_non_resource(n)
                        ),
                    )],
                ));
            }
            Ok(Attributes::NonResource { verb: s(n, "verb"), path: s(n, "path") })
        }
    }
}

/// Go's `%#v` of a `*NonResourceAttributes`, as Kubernetes prints it in the message.
fn go_struct_non_resource(n: &Value) -> String {
    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    format!("&authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}", s("path"), s("verb"))
}

/// The posted object, checked to be of the review's kind, with apiVersion and kind set.
fn body_of(review: &Review, headers: &HeaderMap, bytes: &Bytes) -> Result<Value, ApiError> {
    let mut v = crate::body::decode(headers, bytes, review.kind)?;
    let want = format!("{}/{VERSION}", review.group);
    let given = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if !given.is_empty() && given != want {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({given}) does not match the expected API version ({want})"
        )));
    }
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !kind.is_empty() && kind != review.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            review.kind
        )));
    }
    v["apiVersion"] = json!(want);
    v["kind"] = json!(review.kind);
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"]["creationTimestamp"] = Value::Null;
    Ok(v)
}

fn access_status(decision: &crate::rbac::Decision) -> Value {
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    status
}

/// Answers a review request (`POST` only).
pub(crate) async fn serve(
    shared: &ApiState,
    user: &User,
    method: &Method,
    target: &ReviewTarget,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let review = target.review;
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({}.{} can only be created)",
            review.plural, review.group
        )));
    }
    let mut obj = body_of(review, headers, bytes)?;
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let authz = &shared.authorizer;
    let status = match review.kind {
        "SelfSubjectAccessReview" => {
            let attrs = asked(review, &spec, None)?;
            access_status(&authz.authorize(&user.name, &user.groups, &attrs))
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let who = spec.get("user").and_then(Value::as_str).unwrap_or_default().to_owned();
            let groups: Vec<String> = spec
                .get("groups")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            if who.is_empty() && groups.is_empty() {
                return Err(invalid(
                    review,
                    vec![cause(
                        "FieldValueRequired",
                        "spec.user",
                        "spec.user: Required value: at least one of user or group must be specified".into(),
                    )],
                ));
            }
            let attrs = asked(review, &spec, target.namespace.as_deref())?;
            access_status(&authz.authorize(&who, &groups, &attrs))
        }
        "SelfSubjectRulesReview" => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or_default();
            let set = authz.rules_for(&user.name, &user.groups, ns);
            let (urls, resources): (Vec<_>, Vec<_>) = set.rules.iter().partition(|r| !r.non_resource_urls.is_empty());
            let mut status = json!({
                "resourceRules": resources.iter().map(|r| {
                    let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
                    if !r.resource_names.is_empty() {
                        v["resourceNames"] = json!(r.resource_names);
                    }
                    v
                }).collect::<Vec<_>>(),
                "nonResourceRules": urls.iter().map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})).collect::<Vec<_>>(),
                "incomplete": false,
            });
            if !set.errors.is_empty() {
                status["evaluationError"] = json!(set.errors.join(", "));
            }
            status
        }
        "SelfSubjectReview" => {
            let mut groups = user.groups.clone();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            json!({"userInfo": {"username": user.name, "groups": groups}})
        }
        "TokenReview" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or_default();
            let audiences: Vec<String> = spec
                .get("audiences")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            let api: Vec<String> = edgehive_pki::SA_API_AUDIENCES.iter().map(|a| (*a).to_owned()).collect();
            let wanted = if audiences.is_empty() { api.clone() } else { audiences.clone() };
            let wanted_refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
            match crate::context::service_account_user(shared, token, &wanted_refs).await {
                Ok((u, matched)) => {
                    let mut s = json!({"authenticated": true, "user": {"username": u.name, "groups": u.groups}});
                    if !audiences.is_empty() {
                        s["audiences"] = json!(matched);
                    }
                    s
                }
                Err(why) => json!({"authenticated": false, "user": {}, "error": why}),
            }
        }
        _ => return Err(ApiError::no_route()),
    };
    obj["status"] = status;
    Ok(value_response(StatusCode::CREATED, &obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_discovery() {
        let t = parse(AUTHORIZATION, &["selfsubjectaccessreviews"]).unwrap_or_else(|| panic!("parsed"));
        assert_eq!((t.review.kind, t.namespace), ("SelfSubjectAccessReview", None));
        let t = parse(AUTHORIZATION, &["namespaces", "team", "localsubjectaccessreviews"]).unwrap_or_else(|| panic!());
        assert_eq!(t.namespace.as_deref(), Some("team"));
        assert!(parse(AUTHORIZATION, &["localsubjectaccessreviews"]).is_none(), "namespaced only");
        assert!(parse(AUTHORIZATION, &["namespaces", "x", "selfsubjectaccessreviews"]).is_none());
        assert!(parse(AUTHENTICATION, &["selfsubjectaccessreviews"]).is_none(), "another group's");
        assert!(parse(AUTHENTICATION, &["selfsubjectreviews", "x"]).is_none());
        assert!(
            serves(AUTHENTICATION, Some("v1"))
                && serves(AUTHORIZATION, None)
                && !serves(AUTHORIZATION, Some("v1beta1"))
        );
        let names: Vec<Value> =
            discovery_resources(AUTHENTICATION, false).into_iter().map(|r| r["name"].clone()).collect();
        assert_eq!(names, [json!("selfsubjectreviews"), json!("tokenreviews")]);
    }

    #[test]
    fn a_spec_asks_exactly_one_thing() {
        let ssar = &REVIEWS[1];
        let e = asked(ssar, &json!({}), None).unwrap_err();
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.ends_with("exactly one of nonResourceAttributes or resourceAttributes must be specified"),
            "{}",
            e.message
        );
        let both =
            json!({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}});
        assert!(
            asked(ssar, &both, None)
                .unwrap_err()
                .message
                .contains("cannot be specified in combination with resourceAttributes")
        );
        let a = asked(
            ssar,
            &json!({"resourceAttributes": {"verb": "get", "resource": "pods", "subresource": "log"}}),
            Some("team"),
        );
        let Ok(Attributes::Resource(r)) = a else { panic!("{a:?}") };
        assert_eq!((r.namespace.as_str(), r.subresource.as_deref()), ("team", Some("log")));
        let other = json!({"resourceAttributes": {"namespace": "other", "verb": "get"}});
        assert_eq!(asked(ssar, &other, Some("team")).unwrap_err().code, StatusCode::BAD_REQUEST);
    }
}
