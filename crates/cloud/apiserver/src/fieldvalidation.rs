//! Field validation (`fieldValidation=Strict|Warn|Ignore`) of create, update and patch bodies, as
//! Kubernetes' strict decoding does it.
//!
//! A built-in kind's body is decoded into its Go types, which drops unknown fields: they are never stored
//! whatever the directive. `Strict` refuses a body with unknown or duplicate fields (400 BadRequest,
//! `Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field
//! "spec.containers[0].comand", duplicate field "metadata.name"`); `Warn` (the default when the query does
//! not say, as in Kubernetes 1.27 and later) admits it and sends one `Warning: 299 - "unknown field
//! \"spec.foo\""` header per problem; `Ignore` admits it silently. kubectl sends `Strict` (and `Warn` with
//! `--validate=warn`, `Ignore` with `--validate=false`).
//!
//! Duplicate keys are looked for in JSON bodies (the registry's
//! [`edgehive_registry::validation::schema::duplicate_fields`]); a YAML body with a repeated key is refused
//! by the YAML parser whatever the directive; protobuf bodies cannot carry either. A patch is checked as
//! Kubernetes does: its own JSON for duplicate keys, the patched object for unknown fields.

use bytes::Bytes;
use edgehive_registry::validation::schema::{FieldValidation, check_unknown, duplicate_fields, prune_unknown};
use edgehive_store::resources::ResourceDef;
use http::{HeaderMap, HeaderValue, Response};
use serde_json::Value;

use crate::body::summarize;
use crate::response::Body;
use crate::route::Query;
use crate::status::{ApiError, Cause};

/// The request's directive; 422 for a value Kubernetes does not know (`options` names the request's
/// options kind: `CreateOptions`, `UpdateOptions`, `PatchOptions`).
pub(crate) fn directive(query: &Query, options: &str) -> Result<FieldValidation, ApiError> {
    FieldValidation::parse(query.get("fieldValidation")).map_err(|value| {
        let message = format!("Unsupported value: {value:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
        let summary = format!("fieldValidation: {message}");
        let cause = Cause { reason: "FieldValueNotSupported".into(), message, field: "fieldValidation".into() };
        ApiError::invalid_with_summary(options, "meta.k8s.io", "", vec![cause], &[summary])
    })
}

/// Decodes a create or update body of `res` and applies the directive: the object without its unknown
/// fields and the warnings to send, or the strict decoding error.
pub(crate) fn decode(
    res: &ResourceDef,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
    options: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    decode_kind(res.group, res.kind, query, headers, bytes, options)
}

/// [`decode`] for a kind that is not stored (a review, a `TokenRequest`): its group and kind name its
/// Go-type table. Answer with [`with_warnings`].
#[allow(dead_code)] // For the handlers of request kinds.
pub(crate) fn decode_kind(
    group: &str,
    kind: &str,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
    options: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let directive = directive(query, options)?;
    let mut obj = crate::body::decode(headers, bytes, kind)?;
    let mut problems = Vec::new();
    if directive != FieldValidation::Ignore && is_json(headers) {
        // The body parsed as JSON above; a parse error here cannot happen, and would only hide duplicates.
        let dups = duplicate_fields(bytes).unwrap_or_default();
        problems.extend(dups.into_iter().map(|p| format!("duplicate field {p:?}")));
    }
    let unknown = prune_unknown(group, kind, &mut obj);
    problems.extend(unknown.into_iter().map(|p| format!("unknown field {p:?}")));
    let warnings = settle(directive, problems, |e| decode_error(kind, &obj, bytes, e))?;
    Ok((obj, warnings))
}

/// The unknown fields of a custom object, by its definition's schema:
/// pruned, and reported as the directive says (a body already checked by
/// [`decode`] for duplicates). `options` names the request's options kind.
pub(crate) fn custom(
    query: &Query,
    options: &str,
    served: &crate::crd::Served,
    bytes: &[u8],
    obj: &mut Value,
) -> Result<Vec<String>, ApiError> {
    let directive = directive(query, options)?;
    let Some(schema) = &served.schema else { return Ok(Vec::new()) };
    let problems = schema.prune(obj).into_iter().map(|p| format!("unknown field {p:?}")).collect();
    settle(directive, problems, |e| decode_error(served.def.kind, obj, bytes, e))
}

/// [`custom`] for a patched custom object (`Strict`: refused with the
/// patch's words; `Warn`: warnings).
pub(crate) fn custom_patched(
    directive: FieldValidation,
    served: &crate::crd::Served,
    obj: &mut Value,
) -> Result<Vec<String>, ApiError> {
    let Some(schema) = &served.schema else { return Ok(Vec::new()) };
    let problems = schema.prune(obj).into_iter().map(|p| format!("unknown field {p:?}")).collect();
    settle(directive, problems, ApiError::bad_request)
}

fn is_json(headers: &HeaderMap) -> bool {
    matches!(crate::body::content_type(headers).as_str(), "" | "application/json")
}

/// Strict: the problems as one error; Warn: the problems, to send as warnings; Ignore: nothing.
fn settle(
    directive: FieldValidation,
    problems: Vec<String>,
    err: impl FnOnce(String) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    if problems.is_empty() {
        return Ok(problems);
    }
    match directive {
        FieldValidation::Strict => Err(err(format!("strict decoding error: {}", problems.join(", ")))),
        FieldValidation::Warn => Ok(problems),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// Kubernetes' `transformDecodeError`: the body's kind and version when it names a kind.
fn decode_error(into: &str, obj: &Value, bytes: &[u8], base: String) -> ApiError {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {into}): {base} ({})",
            summarize(bytes)
        ));
    }
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let version = api_version.rsplit('/').next().unwrap_or("");
    ApiError::bad_request(format!("{kind} in version {version:?} cannot be handled as a {into}: {base}"))
}

/// The patch's own duplicate keys (`Strict`: refused; `Warn`: warnings), before it is applied.
pub(crate) fn patch_body(directive: FieldValidation, bytes: &Bytes) -> Result<Vec<String>, ApiError> {
    if directive == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let dups = duplicate_fields(bytes).unwrap_or_default();
    let problems = dups.into_iter().map(|p| format!("duplicate field {p:?}")).collect();
    settle(directive, problems, ApiError::bad_request)
}

/// The patched object's unknown fields, dropped (`Strict`: refused; `Warn`: warnings). Fields the stored
/// object `old` already had (a writer inside the cloud may store what the Go types lack) are dropped
/// without blaming the patch.
pub(crate) fn patched(
    directive: FieldValidation,
    res: &ResourceDef,
    old: &Value,
    obj: &mut Value,
) -> Result<Vec<String>, ApiError> {
    let stored = check_unknown(res.group, res.kind, old);
    let unknown = prune_unknown(res.group, res.kind, obj);
    let problems =
        unknown.into_iter().filter(|p| !stored.contains(p)).map(|p| format!("unknown field {p:?}")).collect();
    settle(directive, problems, ApiError::bad_request)
}

/// Adds one `Warning` header per message to a response, as Kubernetes' warning recorder does (`299 -
/// "text"`, the text quoted as Go's `strconv.Quote` does, a repeated text once). Its limits too: past 4096
/// characters in all, each text is cut to 256 and the texts that still do not fit are left out, so a body
/// with a million unknown fields cannot make a response header of megabytes.
pub(crate) fn with_warnings(
    r: Result<Response<Body>, ApiError>,
    warnings: &[String],
) -> Result<Response<Body>, ApiError> {
    const TOTAL: usize = 4096;
    const ITEM: usize = 256;
    let mut r = r?;
    let total: usize = warnings.iter().map(|w| w.chars().count()).sum();
    let mut used = 0;
    let mut sent: Vec<String> = Vec::new();
    for w in warnings {
        let w: String = if total > TOTAL { w.chars().take(ITEM).collect() } else { w.clone() };
        if sent.contains(&w) {
            continue;
        }
        used += w.chars().count();
        if used > TOTAL {
            break;
        }
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", go_quote(&w))) {
            r.headers_mut().append(http::header::WARNING, v);
        }
        sent.push(w);
    }
    Ok(r)
}

/// `strconv.Quote` for the texts used here: `"` and `\` escaped, control and non-ASCII characters as
/// escapes (a header value is ASCII).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// `/openapi/v2`: the Swagger 2.0 document ([`edgehive_registry::openapi::v2`]), in protobuf when the
/// client asks for it (kubectl's discovery client asks for nothing else), JSON otherwise. The built-in
/// part is built once; the custom resources' schemas (`custom`, by component name) are added per request
/// when there are any.
pub(crate) fn openapi_v2(accept: &str, custom: &[(String, Value)]) -> Response<Body> {
    use edgehive_registry::openapi::v2;
    use std::sync::OnceLock;
    static DOC: OnceLock<(Value, Bytes, Bytes)> = OnceLock::new();
    let (doc, json, pb) = DOC.get_or_init(|| {
        let doc = v2::document();
        let (json, pb) = (serde_json::to_vec(&doc).unwrap_or_default(), v2::protobuf(&doc));
        (doc, Bytes::from(json), Bytes::from(pb))
    });
    let (json, pb) = if custom.is_empty() {
        (json.clone(), pb.clone())
    } else {
        let doc = v2::with_definitions(doc, custom.iter().cloned());
        (Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()), Bytes::from(v2::protobuf(&doc)))
    };
    // Kubernetes also accepts the older spelling with a dot.
    let wants_pb = accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or("").trim();
        media == v2::PROTOBUF_MEDIA_TYPE || media == v2::PROTOBUF_CONTENT_TYPE
    });
    if wants_pb {
        let mut r = crate::response::json_response(http::StatusCode::OK, pb);
        r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(v2::PROTOBUF_CONTENT_TYPE));
        r
    } else {
        crate::response::json_response(http::StatusCode::OK, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::CONTENT_TYPE;

    fn query(q: &str) -> Query {
        Query::parse(Some(q))
    }

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        h
    }

    const TYPO: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q"},"spec":{"containers":[{"name":"c","image":"i","comand":["x"]}]}}"#;

    #[test]
    fn strict_refuses_warn_warns_ignore_drops() {
        let res = &edgehive_store::resources::PODS;
        let body = Bytes::from_static(TYPO.as_bytes());
        let e = decode(res, &query("fieldValidation=Strict"), &headers("application/json"), &body, "CreateOptions")
            .unwrap_err();
        assert_eq!(e.code, http::StatusCode::BAD_REQUEST);
        assert_eq!(
            e.message,
            r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: duplicate field "metadata.name", unknown field "spec.containers[0].comand""#
        );
        for q in ["", "fieldValidation=Warn"] {
            let (obj, warnings) = decode(res, &query(q), &headers("application/json"), &body, "CreateOptions").unwrap();
            assert_eq!(
                warnings,
                [r#"duplicate field "metadata.name""#, r#"unknown field "spec.containers[0].comand""#]
            );
            assert_eq!(obj["spec"]["containers"][0].get("comand"), None);
            assert_eq!(obj["metadata"]["name"], "q", "the last key wins, as in Go");
        }
        let (obj, warnings) =
            decode(res, &query("fieldValidation=Ignore"), &headers("application/json"), &body, "CreateOptions")
                .unwrap();
        assert!(warnings.is_empty());
        assert_eq!(obj["spec"]["containers"][0].get("comand"), None);
        let bare = Bytes::from_static(br#"{"metadata":{"name":"p"},"x":1}"#);
        let e = decode(res, &query("fieldValidation=Strict"), &headers("application/json"), &bare, "CreateOptions")
            .unwrap_err();
        assert_eq!(
            e.message,
            r#"the object provided is unrecognized (must be of type Pod): strict decoding error: unknown field "x" ({"metadata":{"name":"p"},"x":1 ...)"#
        );
        let review = Bytes::from_static(br#"{"kind":"TokenReview","spec":{"token":"t","tokn":"u"}}"#);
        let (obj, warnings) = decode_kind(
            "authentication.k8s.io",
            "TokenReview",
            &query(""),
            &headers("application/json"),
            &review,
            "CreateOptions",
        )
        .unwrap();
        assert_eq!(
            (warnings, &obj["spec"]),
            (vec![r#"unknown field "spec.tokn""#.to_string()], &serde_json::json!({"token": "t"}))
        );
        let e = decode(res, &query("fieldValidation=Yes"), &headers("application/json"), &body, "CreateOptions")
            .unwrap_err();
        assert_eq!(e.code, http::StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Yes": supported values: "", "Ignore", "Strict", "Warn""#
        );
    }

    #[test]
    fn yaml_bodies_are_checked_for_unknown_fields_and_refuse_repeated_keys() {
        let res = &edgehive_store::resources::CONFIGMAPS;
        let yaml = Bytes::from_static(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndatta: {}\n");
        let e = decode(res, &query("fieldValidation=Strict"), &headers("application/yaml"), &yaml, "CreateOptions")
            .unwrap_err();
        assert!(e.message.ends_with(r#"strict decoding error: unknown field "datta""#), "{}", e.message);
        let dup = Bytes::from_static(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n");
        let r = decode(res, &query("fieldValidation=Ignore"), &headers("application/yaml"), &dup, "CreateOptions");
        assert_eq!(r.unwrap_err().code, http::StatusCode::BAD_REQUEST);
    }

    #[test]
    fn patches_are_checked_for_repeated_keys_and_unknown_fields() {
        let dup = Bytes::from_static(br#"{"data":{"a":"1","a":"2"}}"#);
        assert!(patch_body(FieldValidation::Strict, &dup).unwrap_err().message.contains(r#"duplicate field "data.a""#));
        assert_eq!(patch_body(FieldValidation::Warn, &dup).unwrap(), [r#"duplicate field "data.a""#]);
        assert!(patch_body(FieldValidation::Ignore, &dup).unwrap().is_empty());
        let res = &edgehive_store::resources::CONFIGMAPS;
        let mut obj = serde_json::json!({"kind": "ConfigMap", "data": {}, "foo": 1});
        let old = serde_json::json!({"kind": "ConfigMap"});
        assert!(patched(FieldValidation::Strict, res, &old, &mut obj.clone()).is_err());
        assert_eq!(patched(FieldValidation::Warn, res, &old, &mut obj).unwrap(), [r#"unknown field "foo""#]);
        assert_eq!(obj.get("foo"), None);
        // A field the stored object already had is dropped, not blamed on the patch.
        let mut obj = serde_json::json!({"kind": "ConfigMap", "foo": 1});
        assert!(patched(FieldValidation::Strict, res, &serde_json::json!({"foo": 1}), &mut obj).unwrap().is_empty());
        assert_eq!(obj.get("foo"), None);
    }

    #[test]
    fn a_flood_of_unknown_fields_gives_bounded_warnings() {
        let res = &edgehive_store::resources::CONFIGMAPS;
        let fields: Vec<String> = (0..100_000).map(|i| format!("\"f{i}\": 1")).collect();
        let body = Bytes::from(format!("{{\"kind\": \"ConfigMap\", {}}}", fields.join(", ")));
        let (obj, warnings) = decode(res, &query(""), &headers("application/json"), &body, "CreateOptions").unwrap();
        assert_eq!((warnings.len(), obj.as_object().map(|o| o.len())), (100_000, Some(1)));
        let r = with_warnings(Ok(Response::new(Body::Full(Default::default()))), &warnings).unwrap();
        let sent: usize = r.headers().get_all(http::header::WARNING).iter().map(|v| v.len()).sum();
        assert!(sent < 8 * 1024, "{sent}");
        assert!(r.headers().get_all(http::header::WARNING).iter().count() > 100);
        // Deep nesting is refused by the JSON parser, not a stack overflow.
        let deep = Bytes::from(format!(
            "{{\"kind\": \"ConfigMap\", \"data\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ));
        assert!(decode(res, &query(""), &headers("application/json"), &deep, "CreateOptions").is_err());
        assert!(duplicate_fields(deep.as_ref()).is_err());
    }

    #[test]
    fn warnings_are_quoted_as_go_quotes() {
        let r = with_warnings(Ok(Response::new(Body::Full(Default::default()))), &[r#"unknown field "a\b""#.into()]);
        let r = r.unwrap();
        assert_eq!(r.headers()[http::header::WARNING], r#"299 - "unknown field \"a\\b\"""#);
        assert_eq!(go_quote("é"), r#""\u00e9""#);
    }

    #[test]
    fn openapi_v2_answers_protobuf_to_kubectl_and_json_otherwise() {
        let pb = openapi_v2("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", &[]);
        assert_eq!(
            pb.headers()[http::header::CONTENT_TYPE],
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        );
        let json = openapi_v2("application/json", &[]);
        assert_eq!(json.headers()[http::header::CONTENT_TYPE], "application/json");
    }
}
