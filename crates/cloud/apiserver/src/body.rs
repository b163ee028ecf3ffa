//! Request bodies (read up to the limit; JSON or YAML) and response formats
//! (JSON, or the `meta.k8s.io/v1` Table kubectl asks for).
//!
//! Kubernetes decodes a built-in object into its Go type, which supplies a
//! missing `kind` and `apiVersion` from the request's URL; a custom resource
//! (KubeEdge's types are CRDs) is decoded as an unstructured object, which
//! must name its kind: [`check_type_meta`] refuses one that does not, with
//! the decoder's message.

use bytes::Bytes;
use edgehive_model::json::type_name;
use edgehive_store::resources::ResourceDef;
use edgehive_store::{EventType, Object, WatchEvent};
use http::{HeaderMap, Request, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::route::Query;
use crate::status::ApiError;
use crate::table;
use crate::validation::{self, go_quote};

/// What a table row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// A request for Table output.
#[derive(Debug, Clone)]
pub(crate) struct TableRequest {
    include: IncludeObject,
    api_version: &'static str,
    /// The printer columns of a custom resource's version.
    custom: Option<std::sync::Arc<crate::crd::Served>>,
}

/// How to answer.
#[derive(Debug, Clone)]
pub(crate) enum Format {
    /// Plain JSON objects and lists.
    Json,
    /// Tables.
    Table(TableRequest),
}

impl Format {
    /// The format for objects of a custom resource's version `served`
    /// (its printer columns in tables).
    pub(crate) fn for_custom(self, served: Option<std::sync::Arc<crate::crd::Served>>) -> Format {
        match (self, served) {
            (Format::Table(mut t), Some(s)) => {
                t.custom = Some(s);
                Format::Table(t)
            }
            (f, _) => f,
        }
    }
}

/// The response format from `Accept` and `includeObject`.
pub(crate) fn response_format(headers: &HeaderMap, query: &Query) -> Result<Format, ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if accept.trim().is_empty() {
        return Ok(Format::Json);
    }
    let mut json_ok = false;
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        let media = params.first().copied().unwrap_or("");
        let is_table = params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io");
        if media == "application/json" && is_table {
            let api_version = if params.contains(&"v=v1beta1") { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" };
            let include = match query.get("includeObject") {
                None | Some("" | "Metadata") => IncludeObject::Metadata,
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                Some(other) => {
                    return Err(ApiError::bad_request(format!("includeObject: Unsupported value: {other:?}")));
                }
            };
            return Ok(Format::Table(TableRequest { include, api_version, custom: None }));
        }
        // Other `as=` forms (PartialObjectMetadata) are not served: fall
        // back to JSON if the client accepts it.
        if params.iter().any(|p| p.starts_with("as=")) {
            continue;
        }
        if matches!(media, "application/json" | "application/*" | "*/*" | "application/yaml") {
            json_ok = true;
        }
    }
    if json_ok {
        Ok(Format::Json)
    } else {
        Err(ApiError::not_acceptable(format!(
            "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io (asked for {accept:?})"
        )))
    }
}

pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Decodes an object body (JSON, or YAML with `application/yaml`).
pub(crate) fn decode(headers: &HeaderMap, bytes: &Bytes, kind: &str) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(format!("the request body is empty; a {kind} was expected")));
    }
    let ct = content_type(headers);
    let v: Value = match ct.as_str() {
        "" | "application/json" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body of the request is not valid JSON: {e}")))?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("the body of the request is not valid UTF-8 YAML"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("the body of the request is not valid YAML: {e}")))?
        }
        "application/vnd.kubernetes.protobuf" => {
            // kubectl's typed clients send built-in objects this way.
            let (_, _, v) = crate::protobuf::decode(bytes).map_err(|e| match e {
                crate::protobuf::ProtoError::Unsupported { api_version, kind } => ApiError::unsupported_media_type(
                    format!("protobuf bodies of {kind} ({api_version}) are not supported; send application/json"),
                ),
                other => {
                    ApiError::bad_request(format!("the body of the request is not a valid protobuf {kind}: {other}"))
                }
            })?;
            v
        }
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({other}) - accepted media types include: \
                 application/json, application/yaml, application/vnd.kubernetes.protobuf"
            )));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "the body of the request must be a {kind} object, not {}",
            type_name(&v)
        )));
    }
    Ok(v)
}

/// Whether Kubernetes serves `res` as a custom resource (decoded as an
/// unstructured object), not a built-in type.
pub(crate) fn is_custom_resource(res: &ResourceDef) -> bool {
    res.custom || validation::kind_info(res.group, res.kind).is_some_and(|k| k.custom)
}

/// Refuses a decoded body whose `apiVersion` or `kind` Kubernetes' decoder
/// refuses (staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json/json.go
/// `Decode`, wrapped by `transformDecodeError` in
/// staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go):
///
/// - either of them not a string: its `Interpret` step fails, for any type;
/// - a custom resource without `kind` (or with an empty one): with the
///   default field validation (Warn) or Strict, the strict decoder reports
///   "Object 'Kind' is missing in '<the body>'" with no kind known, so the
///   message says the object is unrecognized; with `fieldValidation=Ignore`
///   the lax decoder had already defaulted the kind from the URL and says the
///   kind "cannot be handled". A built-in type takes both from the URL.
pub(crate) fn check_type_meta(
    res: &ResourceDef,
    query: &Query,
    headers: &HeaderMap,
    bytes: &[u8],
    obj: &Value,
) -> Result<(), ApiError> {
    for field in ["apiVersion", "kind"] {
        let what = match obj.get(field) {
            None | Some(Value::Null | Value::String(_)) => continue,
            Some(Value::Bool(_)) => "bool",
            Some(Value::Number(_)) => "number",
            Some(Value::Array(_)) => "array",
            Some(Value::Object(_)) => "object",
        };
        return Err(unrecognized(
            res,
            &format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go struct field .{field} of type string"
            ),
            bytes,
        ));
    }
    if !is_custom_resource(res) || obj.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty()) {
        return Ok(());
    }
    if query.get("fieldValidation") != Some("Ignore") {
        let missing = format!("Object 'Kind' is missing in '{}'", String::from_utf8_lossy(bytes));
        return Err(unrecognized(res, &missing, bytes));
    }
    // The lax decoder quotes the JSON it unmarshals: the body without the
    // whitespace around it, or YAML converted to JSON.
    let data = match content_type(headers).as_str() {
        "" | "application/json" => String::from_utf8_lossy(bytes.trim_ascii()).into_owned(),
        _ => go_json(obj),
    };
    // The version is the body's, else the URL's (Go's `gvkWithDefaults`).
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let version = if version.is_empty() && (group.is_empty() || group == res.group) { res.version } else { version };
    Err(ApiError::bad_request(format!(
        "{kind} in version {} cannot be handled as a {kind}: Object 'Kind' is missing in '{data}'",
        go_quote(version),
        kind = res.kind
    )))
}

/// `transformDecodeError` when the decoder found no kind.
fn unrecognized(res: &ResourceDef, reason: &str, bytes: &[u8]) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): {reason} ({})",
        res.kind,
        summarize(bytes)
    ))
}

/// Kubernetes' `summarizeData(body, 30)`: the first 30 bytes of a body, as
/// text if it starts like a JSON object, else in hex.
pub(crate) fn summarize(bytes: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &bytes[..bytes.len().min(MAX)];
    let more = if bytes.len() > MAX { " ..." } else { "" };
    match bytes.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", head.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// `v` as Go's JSON encoder writes a map: compact, keys sorted, and `<`, `>`,
/// `&`, U+2028 and U+2029 escaped.
pub(crate) fn go_json(v: &Value) -> String {
    // serde_json's map is ordered by key here (no `preserve_order`).
    edgehive_model::json::go_html_escape(v.to_string())
}

/// Whether `dryRun=All` was asked for; other values are refused.
pub(crate) fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            Err(ApiError::bad_request(format!("dryRun: Unsupported value: {other:?}: supported values: \"All\"")))
        }
    }
}

impl TableRequest {
    fn columns(&self, res: &ResourceDef) -> Value {
        if let Some(s) = &self.custom {
            return Value::Array(crate::crd::columns::definitions(&s.columns));
        }
        Value::Array(table::columns(res.group, res.kind).iter().map(table::Column::definition).collect())
    }

    fn row(&self, res: &ResourceDef, obj: &Object, now: time::OffsetDateTime) -> Value {
        let value = obj.value().cloned().unwrap_or_else(|_| json!({}));
        let cells = match &self.custom {
            Some(s) => crate::crd::columns::cells(&s.columns, &value, now),
            None => table::cells(res.group, res.kind, &value, now),
        };
        let mut row = json!({"cells": cells});
        match self.include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                row["object"] = json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": self.api_version,
                    "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
                });
            }
            IncludeObject::Object => row["object"] = crate::conversion::from_stored(res, value),
        }
        row
    }

    /// A Table of `items`.
    pub(crate) fn table(&self, res: &ResourceDef, items: &[Object], rev: u64, continue_token: Option<&str>) -> Value {
        let now = time::OffsetDateTime::now_utc();
        let mut meta = json!({"resourceVersion": rev.to_string()});
        if let Some(c) = continue_token {
            meta["continue"] = json!(c);
        }
        json!({
            "kind": "Table",
            "apiVersion": self.api_version,
            "metadata": meta,
            "columnDefinitions": self.columns(res),
            "rows": items.iter().map(|o| self.row(res, o, now)).collect::<Vec<_>>(),
        })
    }

    /// One watch event whose object is a one-row Table (column definitions
    /// in the first event only, as Kubernetes sends them).
    pub(crate) fn watch_line(&self, res: &ResourceDef, ev: &WatchEvent, first: bool) -> Result<Bytes, String> {
        let object = match (ev.ty, ev.object()) {
            (EventType::Bookmark, _) | (_, None) => {
                return ev.line(res).map_err(|e| e.to_string());
            }
            (_, Some(o)) => {
                let now = time::OffsetDateTime::now_utc();
                json!({
                    "kind": "Table",
                    "apiVersion": self.api_version,
                    "metadata": {"resourceVersion": ev.rev.to_string()},
                    "columnDefinitions": if first { self.columns(res) } else { json!([]) },
                    "rows": [self.row(res, o, now)],
                })
            }
        };
        let mut line =
            serde_json::to_vec(&json!({"type": ev.ty.as_str(), "object": object})).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(Bytes::from(line))
    }
}

/// Bytes of an oversize body read and thrown away before answering 413, so
/// that a client still sending sees the answer rather than a reset stream.
const DRAIN_LIMIT: usize = 16 << 20;

/// Reads a request body up to `limit` bytes: over it is a 413.
pub(crate) async fn read_body(req: Request<Incoming>, limit: usize) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, mut body) = req.into_parts();
    let declared =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    let too_large = |n: usize| {
        ApiError::too_large(format!("the request body is {n} bytes or more, over the limit of {limit} bytes"))
    };
    if declared.is_some_and(|n| n > limit) {
        drain(body, DRAIN_LIMIT).await;
        return Err(too_large(declared.unwrap_or(limit + 1)));
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request(format!("read request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len();
        if seen > limit {
            drain(body, DRAIN_LIMIT.saturating_sub(seen)).await;
            return Err(too_large(seen));
        }
        buf.extend_from_slice(&data);
    }
    Ok((parts, buf.freeze()))
}

/// Reads and discards up to `max` more bytes of `body`, for at most 5 s.
async fn drain(mut body: Incoming, max: usize) {
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut n = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(d) = frame.into_data() {
                n += d.len();
                if n > max {
                    break;
                }
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(accept).expect("header"));
        h
    }

    #[test]
    fn kubectl_table_accept_header() {
        let h = headers(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        );
        assert!(matches!(response_format(&h, &Query::default()), Ok(Format::Table(_))));
        assert!(matches!(response_format(&headers("application/json"), &Query::default()), Ok(Format::Json)));
        assert!(matches!(response_format(&headers("*/*"), &Query::default()), Ok(Format::Json)));
        let only_proto = headers("application/vnd.kubernetes.protobuf");
        assert_eq!(response_format(&only_proto, &Query::default()).err().map(|e| e.code.as_u16()), Some(406));
    }

    #[test]
    fn bodies_decode_or_say_why_not() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
        let v = decode(&h, &Bytes::from_static(b"metadata:\n  name: x\n"), "Pod").expect("yaml");
        assert_eq!(v["metadata"]["name"], "x");
        let e = decode(&HeaderMap::new(), &Bytes::from_static(b"{\"a\":"), "Pod").expect_err("truncated");
        assert_eq!(e.code.as_u16(), 400);
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        let e = decode(&HeaderMap::new(), &Bytes::from_static(b"[1]"), "Pod").expect_err("array");
        assert!(e.message.contains("an array"));
        assert_eq!(decode(&HeaderMap::new(), &Bytes::new(), "Pod").err().map(|e| e.code.as_u16()), Some(400));
        let e = decode(&h, &Bytes::from_static(b"a: [1\n"), "Pod").expect_err("bad yaml");
        assert!(e.message.contains("not valid YAML"), "{}", e.message);
        let mut xml = HeaderMap::new();
        xml.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/xml"));
        assert_eq!(decode(&xml, &Bytes::from_static(b"<a/>"), "Pod").err().map(|e| e.code.as_u16()), Some(415));
    }
}
