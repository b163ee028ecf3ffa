//! Kubernetes label and field selectors: parsing, canonical printing and matching.
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels` (syntax, key and value validation,
//! error wording); field selectors follow `pkg/fields` (`=`, `==`, `!=`, backslash escapes).
//! Terms are kept sorted, so selectors differing only in order are equal and print alike.
//! Matching a label selector allocates nothing. Deliberate differences from Kubernetes: a NUL
//! byte is an ordinary (invalid) character, where Go's lexer reads it as the end of input;
//! `==` is stored and printed as `=`; only the first error of a requirement is reported.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Why a selector could not be built. Messages follow Kubernetes' wording, since kubectl users
/// see them verbatim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label selector has an unexpected token between requirements (e.g. a trailing comma).
    #[error("{0}")]
    Syntax(String),
    /// One requirement of a label selector is malformed; the cause is inside.
    #[error("unable to parse requirement: {0}")]
    Requirement(Box<SelectorError>),
    /// A label key, a label value or a list of values is invalid.
    #[error("{field}: Invalid value: {value}: {detail}")]
    Invalid {
        /// Where it was found, as a Kubernetes field path (`<nil>` for a key in a selector string).
        field: String,
        /// The offending key, value or list, quoted.
        value: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A selector JSON document has the wrong shape or an unknown operator.
    #[error("{0}")]
    Json(String),
    /// A field selector is malformed: a term without operator, a bad escape, a bare `=`.
    #[error("{0}")]
    Field(String),
}

/// Something labels can be read from.
pub trait Labels {
    /// The value of label `key`, if the label is present.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

/// A JSON `metadata.labels` object; a value that is not a string counts as absent.
impl Labels for serde_json::Map<String, Value> {
    fn get(&self, key: &str) -> Option<&str> {
        serde_json::Map::get(self, key).and_then(Value::as_str)
    }
}

/// Any JSON value: an object as above; anything else (such as the `Null` of a missing
/// `metadata.labels`) has no labels.
impl Labels for Value {
    fn get(&self, key: &str) -> Option<&str> {
        self.as_object().and_then(|m| Labels::get(m, key))
    }
}

/// What a requirement asks of one label; sets are sorted and deduplicated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Exists,
    DoesNotExist,
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, labels: &impl Labels) -> bool {
        let has = |set: &[String], v: &str| set.binary_search_by(|s| s.as_str().cmp(v)).is_ok();
        match (&self.op, labels.get(&self.key)) {
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
            (Op::Equals(want), Some(v)) => want == v,
            (Op::In(set), Some(v)) => has(set, v),
            (Op::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (Op::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (Op::Equals(_) | Op::In(_) | Op::Gt(_) | Op::Lt(_), None) => false,
            (Op::NotEquals(unwanted), v) => v != Some(unwanted.as_str()),
            (Op::NotIn(set), v) => v.is_none_or(|v| !has(set, v)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.key;
        match &self.op {
            Op::Exists => write!(f, "{k}"),
            Op::DoesNotExist => write!(f, "!{k}"),
            Op::Equals(v) => write!(f, "{k}={v}"),
            Op::NotEquals(v) => write!(f, "{k}!={v}"),
            Op::In(vs) => write!(f, "{k} in ({})", vs.join(",")),
            Op::NotIn(vs) => write!(f, "{k} notin ({})", vs.join(",")),
            Op::Gt(n) => write!(f, "{k}>{n}"),
            Op::Lt(n) => write!(f, "{k}<{n}"),
        }
    }
}

/// A label selector: an AND of requirements on labels. The default selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses Kubernetes' label selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
    /// `a notin (x,y)`, `a` (exists), `!a` (does not exist), `a>1`, `a<1`, joined by commas
    /// (AND), blanks allowed between tokens. As in Kubernetes, `a=` and `a in ()` name the empty
    /// value and a trailing comma is an error. `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut p = Parser::new(s);
        if !p.next.is_empty() && !starts_requirement(p.next) {
            return Err(found(p.next, "!, identifier, or 'end of string'"));
        }
        let mut requirements = Vec::new();
        while !p.next.is_empty() {
            requirements.push(p.requirement().map_err(|e| SelectorError::Requirement(Box::new(e)))?);
            match p.bump() {
                "" => break,
                "," if starts_requirement(p.next) => {}
                "," => return Err(found(p.next, "identifier after ','")),
                t => return Err(found(t, "',' or 'end of string'")),
            }
        }
        requirements.sort();
        Ok(Self { requirements })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object (`{"matchLabels": {..},
    /// "matchExpressions": [{"key", "operator", "values"}]}`). An object with neither part
    /// selects everything. A non-object (`null` included) is an error: Kubernetes reads a
    /// missing selector as selecting nothing, which this type cannot express.
    pub fn from_json(v: &Value) -> Result<Self, SelectorError> {
        let obj = v.as_object().ok_or_else(|| not_object(v))?;
        let mut selector = match obj.get("matchLabels") {
            None | Some(Value::Null) => Self::default(),
            Some(m) => Self::from_map(m)?,
        };
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, e) in exprs.iter().enumerate() {
                    selector.requirements.push(expression(i, e)?);
                }
            }
            Some(_) => {
                return Err(SelectorError::Json("invalid label selector: matchExpressions must be a list".into()));
            }
        }
        selector.requirements.sort();
        Ok(selector)
    }

    /// Builds an equality selector from a plain JSON map of label to value, such as a Service's
    /// `spec.selector`. An empty map selects everything (Kubernetes treats a Service without a
    /// selector specially; that is the caller's business); a non-object is an error.
    pub fn from_map(v: &Value) -> Result<Self, SelectorError> {
        let map = v.as_object().ok_or_else(|| not_object(v))?;
        let mut requirements = Vec::with_capacity(map.len());
        for (k, val) in map {
            let field = || format!("matchLabels[{k}]");
            let val = val
                .as_str()
                .ok_or_else(|| SelectorError::Json(format!("invalid label selector: {} must be a string", field())))?;
            validate_key(k, field)?;
            validate_value(val, field)?;
            requirements.push(Requirement { key: k.clone(), op: Op::Equals(val.to_owned()) });
        }
        requirements.sort();
        Ok(Self { requirements })
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` meet every requirement. `a!=b` and `a notin (..)` hold for objects
    /// without label `a`; `a=b`, `a in (..)`, `a>n` and `a<n` need the label.
    pub fn matches(&self, labels: &impl Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// If the selector pins `key` to one value (`key=v` or `key in (v)`), that value. Every
    /// matching object has it, so it can drive an index lookup; still filter with `matches`.
    pub fn exact_value(&self, key: &str) -> Option<&str> {
        self.requirements.iter().filter(|r| r.key == key).find_map(|r| match &r.op {
            Op::Equals(v) => Some(v.as_str()),
            Op::In(vs) if vs.len() == 1 => vs.first().map(String::as_str),
            _ => None,
        })
    }
}

/// The canonical form: requirements sorted, joined by `,`; `parse` gives the selector back.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            write!(f, "{}{r}", if i > 0 { "," } else { "" })?;
        }
        Ok(())
    }
}

fn not_object(v: &Value) -> SelectorError {
    let kind = if v.is_null() { "null" } else { "another JSON type" };
    SelectorError::Json(format!("invalid label selector: expected an object, found {kind}"))
}

/// One `matchExpressions` entry, checked as Kubernetes' `LabelSelectorAsSelector` does.
fn expression(i: usize, e: &Value) -> Result<Requirement, SelectorError> {
    let at = |what: &str| format!("matchExpressions[{i}].{what}");
    let bad =
        |what: &str, shape: &str| SelectorError::Json(format!("invalid label selector: {} must be {shape}", at(what)));
    let text = |name: &str| match e.get(name) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(bad(name, "a string")),
    };
    if !e.is_object() {
        return Err(SelectorError::Json(format!("invalid label selector: matchExpressions[{i}] must be an object")));
    }
    let (key, operator) = (text("key")?, text("operator")?);
    let mut values: Vec<String> = match e.get("values") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(vs)) => vs.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<_>>(),
        Some(_) => None,
    }
    .ok_or_else(|| bad("values", "a list of strings"))?;
    let set_op = match operator {
        "In" | "NotIn" => true,
        "Exists" | "DoesNotExist" => false,
        other => return Err(SelectorError::Json(format!("{other:?} is not a valid label selector operator"))),
    };
    validate_key(key, || at("key"))?;
    if set_op == values.is_empty() {
        let detail = if set_op {
            "for 'in', 'notin' operators, values set can't be empty"
        } else {
            "values set must be empty for exists and does not exist"
        };
        return Err(SelectorError::Invalid {
            field: at("values"),
            value: format!("{values:?}"),
            detail: detail.into(),
        });
    }
    for (j, v) in values.iter().enumerate() {
        validate_value(v, || at(&format!("values[{j}]")))?;
    }
    values.sort();
    values.dedup();
    let op = match operator {
        "In" => Op::In(values),
        "NotIn" => Op::NotIn(values),
        "Exists" => Op::Exists,
        _ => Op::DoesNotExist,
    };
    Ok(Requirement { key: key.to_owned(), op })
}

/// Bytes that form operator tokens; an identifier is a run of bytes that are neither these
/// nor blanks, so every token is a slice of the input on character boundaries.
const SPECIAL: &[u8] = b"=!(),<>";

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Whether a token is an identifier (a key or a value; `in` and `notin` included, which the
/// parser reads as operators only where one is expected, as Kubernetes does).
fn is_ident(t: &str) -> bool {
    t.bytes().next().is_some_and(|b| !SPECIAL.contains(&b))
}

fn starts_requirement(t: &str) -> bool {
    t == "!" || is_ident(t)
}

fn found(t: &str, expected: &str) -> SelectorError {
    SelectorError::Syntax(format!("found '{t}', expected: {expected}"))
}

/// A recursive-descent parser with one token of lookahead; a token is a slice of the input,
/// `""` being the end.
#[derive(Debug)]
struct Parser<'a> {
    s: &'a str,
    pos: usize,
    next: &'a str,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str) -> Self {
        let mut p = Self { s, pos: 0, next: "" };
        p.bump();
        p
    }

    /// Returns the lookahead token and lexes the one after it.
    fn bump(&mut self) -> &'a str {
        let bytes = self.s.as_bytes();
        while bytes.get(self.pos).is_some_and(|&b| is_blank(b)) {
            self.pos += 1;
        }
        let rest = bytes.get(self.pos..).unwrap_or_default();
        let len = match rest {
            [b'!' | b'=', b'=', ..] => 2,
            [b, ..] if SPECIAL.contains(b) => 1,
            _ => rest.iter().position(|&b| is_blank(b) || SPECIAL.contains(&b)).unwrap_or(rest.len()),
        };
        let token = self.s.get(self.pos..self.pos + len).unwrap_or_default();
        self.pos += len;
        std::mem::replace(&mut self.next, token)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut t = self.bump();
        let negated = t == "!";
        if negated {
            t = self.bump();
        }
        if !is_ident(t) {
            return Err(found(t, "identifier"));
        }
        validate_key(t, || "<nil>".to_owned())?;
        let key = t.to_owned();
        if negated || matches!(self.next, "" | ",") {
            return Ok(Requirement { key, op: if negated { Op::DoesNotExist } else { Op::Exists } });
        }
        let op = self.bump();
        let mut values = match op {
            "in" | "notin" => self.value_set()?,
            "=" | "==" | "!=" | ">" | "<" => vec![self.exact_value()?],
            t => return Err(found(t, "in, notin, =, ==, !=, gt, lt")),
        };
        values.sort();
        values.dedup();
        // Kubernetes reports a non-integer bound before checking the value's characters.
        let first = values.first().map_or("", String::as_str);
        let bound = match op {
            ">" | "<" => first.parse::<i64>().map_err(|_| {
                invalid("values[0]".into(), first, &["for 'Gt', 'Lt' operators, the value must be an integer".into()])
            })?,
            _ => 0,
        };
        for (i, v) in values.iter().enumerate() {
            validate_value(v, || format!("values[{i}][{key}]"))?;
        }
        let op = match op {
            "in" => Op::In(values),
            "notin" => Op::NotIn(values),
            ">" => Op::Gt(bound),
            "<" => Op::Lt(bound),
            "!=" => Op::NotEquals(values.pop().unwrap_or_default()),
            _ => Op::Equals(values.pop().unwrap_or_default()),
        };
        Ok(Requirement { key, op })
    }

    /// `(v, v, ...)`; an empty entry (`()`, `(a,)`, `(,a)`, `(a,,b)`) is the empty value.
    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        let t = self.bump();
        if t != "(" {
            return Err(SelectorError::Syntax(format!("found '{t}' expected: '('")));
        }
        match self.next {
            ")" => {
                self.bump();
                return Ok(vec![String::new()]);
            }
            t if t == "," || is_ident(t) => {}
            t => return Err(found(t, "',', ')' or identifier")),
        }
        let mut values = Vec::new();
        loop {
            match self.bump() {
                "," if values.is_empty() || matches!(self.next, "," | ")") => values.push(String::new()),
                "," => {}
                t if is_ident(t) && matches!(self.next, "," | ")") => values.push(t.to_owned()),
                t if is_ident(t) => return Err(found(self.next, "',' or ')'")),
                t => return Err(found(t, "',', or identifier")),
            }
            if self.next == ")" {
                self.bump();
                return Ok(values);
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing there means the empty value.
    fn exact_value(&mut self) -> Result<String, SelectorError> {
        match self.next {
            "" | "," => Ok(String::new()),
            t if is_ident(t) => Ok(self.bump().to_owned()),
            t => Err(found(t, "identifier")),
        }
    }
}

const NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const NAME_RE: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const VALUE_RE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS_RE: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// Kubernetes' wording for a failed pattern: message, examples, then the pattern.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{re}')", examples.join(" or "))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: the name part of a key, or a non-empty value.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// An RFC 1123 subdomain: dot-separated labels of `[a-z0-9-]` starting and ending alphanumeric.
fn is_dns_subdomain(s: &str) -> bool {
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.split('.').all(|l| {
        let b = l.as_bytes();
        b.first().is_some_and(alnum) && b.last().is_some_and(alnum) && b.iter().all(|c| alnum(c) || *c == b'-')
    })
}

fn invalid(field: String, value: &str, problems: &[String]) -> SelectorError {
    SelectorError::Invalid { field, value: format!("{value:?}"), detail: problems.join("; ") }
}

/// Checks a label key as Kubernetes' `IsLabelKey` does; `field` says where it was found.
fn validate_key(key: &str, field: impl FnOnce() -> String) -> Result<(), SelectorError> {
    let name_error = || format!("name part {}", regex_error(NAME_MSG, NAME_RE, NAME_EXAMPLES));
    let mut problems = Vec::new();
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => {
            let e = regex_error(NAME_MSG, NAME_RE, NAME_EXAMPLES);
            let p = format!(
                "a valid label key {e} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            );
            return Err(invalid(field(), key, &[p]));
        }
        Some(("", name)) => {
            problems.push("prefix part must be non-empty".to_owned());
            name
        }
        Some((prefix, name)) => {
            if prefix.len() > 253 {
                problems.push("prefix part must be no more than 253 bytes".to_owned());
            }
            if !is_dns_subdomain(prefix) {
                problems.push(format!("prefix part {}", regex_error(DNS_MSG, DNS_RE, &["example.com"])));
            }
            name
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".to_owned());
    }
    if !is_label_name(name) {
        problems.push(name_error());
    }
    if problems.is_empty() { Ok(()) } else { Err(invalid(field(), key, &problems)) }
}

/// Checks a label value as Kubernetes' `IsLabelValue` does: at most 63 bytes, may be empty.
fn validate_value(value: &str, field: impl FnOnce() -> String) -> Result<(), SelectorError> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push("must be no more than 63 bytes".to_owned());
    }
    if !value.is_empty() && !is_label_name(value) {
        problems.push(regex_error(VALUE_MSG, VALUE_RE, &["MyValue", "my_value", "12345"]));
    }
    if problems.is_empty() { Ok(()) } else { Err(invalid(field(), value, &problems)) }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FieldTerm {
    field: String,
    negated: bool,
    value: String,
}

/// A field selector: an AND of `field=value` and `field!=value` terms. The default selects
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses Kubernetes' field selector syntax: comma-separated `field=value`, `field==value`,
    /// `field!=value`. In values `\,`, `\=` and `\\` stand for `,`, `=` and `\`; another escape
    /// or a bare `=` is an error. Empty terms (`a=b,`) are skipped; nothing is trimmed. Field
    /// names are not checked here (see [`fields`](Self::fields)). `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable(); // as Kubernetes does, so the same bad term is reported
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, negated, raw)) = split_term(part) else {
                return Err(SelectorError::Field(format!("invalid selector: '{s}'; can't understand '{part}'")));
            };
            terms.push(FieldTerm { field: field.to_owned(), negated, value: unescape(raw)? });
        }
        terms.sort();
        Ok(Self { terms })
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The field names used (with repeats), so a caller can reject unsupported ones as
    /// Kubernetes does (`field label not supported: x`).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// Whether an object meets every term. `get(field)` gives the object's value for a field as
    /// anything string-like: a `&str` borrowed from the object, or a `String` for a computed
    /// value. A missing field (`None`) compares as `""`, as in Kubernetes' field sets.
    pub fn matches<F, S>(&self, mut get: F) -> bool
    where
        F: FnMut(&str) -> Option<S>,
        S: AsRef<str>,
    {
        self.terms.iter().all(|t| {
            let got = get(&t.field);
            (got.as_ref().map_or("", |v| v.as_ref()) == t.value) != t.negated
        })
    }

    /// If the selector pins `field` to one value (`field=v`), that value: every matching object
    /// has it, so `metadata.name=x` can become a get and `spec.nodeName=n` an index lookup.
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|t| t.field == field && !t.negated).map(|t| t.value.as_str())
    }
}

/// The canonical form: terms sorted, `==` printed as `=`, values escaped.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            write!(f, "{sep}{}{}", t.field, if t.negated { "!=" } else { "=" })?;
            for c in t.value.chars() {
                let escape = if matches!(c, '\\' | ',' | '=') { "\\" } else { "" };
                write!(f, "{escape}{c}")?;
            }
        }
        Ok(())
    }
}

/// Splits at commas not escaped by a backslash; the backslashes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut start, mut escaped) = (Vec::new(), 0, false);
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b',' => {
                out.push(s.get(start..i).unwrap_or_default());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s.get(start..).unwrap_or_default());
    out
}

/// Splits a term at its first operator into (field, negated, raw value); names cannot escape.
fn split_term(t: &str) -> Option<(&str, bool, &str)> {
    let b = t.as_bytes();
    b.iter().enumerate().find_map(|(i, &c)| {
        let (negated, len) = match (c, b.get(i + 1)) {
            (b'!', Some(b'=')) => (true, 2),
            (b'=', Some(b'=')) => (false, 2),
            (b'=', _) => (false, 1),
            _ => return None,
        };
        Some((t.get(..i)?, negated, t.get(i + len..)?))
    })
}

fn unescape(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                next => {
                    let seq = next.map_or(String::new(), String::from);
                    return Err(SelectorError::Field(format!(
                        "invalid field selector: invalid escape sequence: \\{seq}"
                    )));
                }
            },
            ',' | '=' => {
                let code = u32::from(c);
                return Err(SelectorError::Field(format!(
                    "invalid field selector: unescaped character in value: {code}"
                )));
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn label_err(s: &str) -> String {
        LabelSelector::parse(s).err().map(|e| e.to_string()).unwrap_or_else(|| panic!("{s:?} parsed"))
    }

    #[test]
    fn each_operator_matches_like_kubernetes() {
        let objects = [labels(&[("a", "b"), ("n", "7")]), labels(&[("a", "c"), ("n", "3")]), labels(&[("n", "x")])];
        let cases = [
            ("a=b", [true, false, false]),
            ("a==b", [true, false, false]),
            ("a!=b", [false, true, true]),
            ("a in (b,z)", [true, false, false]),
            ("a notin (b,z)", [false, true, true]),
            ("a", [true, true, false]),
            ("!a", [false, false, true]),
            ("n>5", [true, false, false]),
            ("n<5", [false, true, false]),
            ("a,n<5", [false, true, false]),
            ("", [true, true, true]),
        ];
        for (s, want) in cases {
            for (object, want) in objects.iter().zip(want) {
                assert_eq!(sel(s).matches(object), want, "{s} on {object:?}");
            }
        }
    }

    #[test]
    fn json_labels_count_only_strings() {
        let obj = json!({"metadata": {"labels": {"a": "b", "n": 1}}});
        let l = &obj["metadata"]["labels"];
        assert!(sel("a=b,!n").matches(l) && sel("a=b").matches(l.as_object().expect("object")));
        assert!(sel("!a").matches(&obj["metadata"]["missing"]) && !sel("a").matches(&Value::Null));
    }

    #[test]
    fn blanks_are_tolerated_between_tokens_only() {
        assert_eq!(sel("  a  =  b ,\tc in ( x , y ) ,\n!d\r"), sel("a=b,c in (x,y),!d"));
        assert_eq!(label_err("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
        assert!(sel("a in ()").matches(&labels(&[("a", "")])) && !sel("a in ()").matches(&labels(&[])));
        assert_eq!(sel("a in (,x)"), sel("a in (x,)"));
        assert!(sel("a=,b!=").matches(&labels(&[("a", "")])));
    }

    #[test]
    fn syntax_errors_use_kubernetes_wording() {
        let req = |m: &str| format!("unable to parse requirement: {m}");
        let cases = [
            ("a,", "found '', expected: identifier after ','".to_owned()),
            (",a", "found ',', expected: !, identifier, or 'end of string'".to_owned()),
            ("a,,b", "found ',', expected: identifier after ','".to_owned()),
            ("a in (x))", "found ')', expected: ',' or 'end of string'".to_owned()),
            ("!a=b", "found '=', expected: ',' or 'end of string'".to_owned()),
            ("a in (x", req("found '', expected: ',' or ')'")),
            ("a in x)", req("found 'x' expected: '('")),
            ("a in ((x)", req("found '(', expected: ',', ')' or identifier")),
            ("a in (x y)", req("found 'y', expected: ',' or ')'")),
            ("a in (x,=)", req("found '=', expected: ',', or identifier")),
            ("a=(b)", req("found '(', expected: identifier")),
            ("!!a", req("found '!', expected: identifier")),
            ("a>x", req(r#"values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer"#)),
        ];
        for (s, want) in cases {
            assert_eq!(label_err(s), want, "{s}");
        }
    }

    #[test]
    fn keys_and_values_are_validated() {
        assert_eq!(
            label_err("-a"),
            "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric \
             characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  \
             or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        let (long, name63, prefix253) = ("n".repeat(64), "n".repeat(63), "p".repeat(253));
        for bad in [format!("x={long}"), format!("x in (ok,{long})")] {
            assert!(
                label_err(&bad).contains("values[0][x]: Invalid value") && label_err(&bad).contains("no more than 63")
            );
        }
        let cases = [
            (long.clone(), "name part must be no more than 63 bytes"),
            (format!("{prefix253}p/a"), "prefix part must be no more than 253 bytes"),
            ("Foo.com/a".into(), "prefix part a lowercase RFC 1123 subdomain"),
            ("a..b/c".into(), "prefix part a lowercase RFC 1123 subdomain"),
            ("/a".into(), "prefix part must be non-empty"),
            ("a/".into(), "name part must be non-empty; name part must consist"),
            ("a/b/c".into(), "a valid label key must consist"),
            ("a$b".into(), "name part must consist"),
            ("a_".into(), "name part must consist"),
        ];
        for (key, want) in cases {
            assert!(label_err(&key).contains(want), "{key}: {}", label_err(&key));
        }
        assert!(label_err("a=-x").contains(r#"values[0][a]: Invalid value: "-x": a valid label must be"#));
        assert!(label_err("a\0").contains("name part must consist"));
        sel(&format!("{prefix253}/{name63}=V_1.x-{}", "v".repeat(56)));
        sel("example.com/My_name-1.x in (in,notin),in notin (in),notin");
    }

    #[test]
    fn display_is_canonical_and_parses_back() {
        let s = sel("z, f==g, b in (y,x,x), !c, a!=, d notin (), e>05");
        assert_eq!(s.to_string(), "a!=,b in (x,y),!c,d notin (),e>5,f=g,z");
        assert_eq!(sel(&s.to_string()), s);
        assert!(sel("").is_empty() && !s.is_empty() && sel("").to_string().is_empty());
    }

    #[test]
    fn exact_value_reports_pinned_labels() {
        let s = sel("a!=w,a=x,b in (y),c in (p,q),d!=z,e");
        let got: Vec<_> = ["a", "b", "c", "d", "e", "f"].iter().map(|k| s.exact_value(k)).collect();
        assert_eq!(got, [Some("x"), Some("y"), None, None, None, None]);
    }

    #[test]
    fn label_selector_from_json() {
        let v = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a", "a"]},
            {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(LabelSelector::from_json(&v), Ok(sel("app=web,tier in (a,b),!canary")));
        assert_eq!(LabelSelector::from_json(&json!({"matchLabels": null})), Ok(LabelSelector::default()));
        assert_eq!(LabelSelector::from_map(&json!({"app": "web"})), Ok(sel("app=web")));
        let err = |v: Value| LabelSelector::from_json(&v).err().map(|e| e.to_string()).unwrap_or_default();
        let expr =
            |op: &str, values: Value| json!({"matchExpressions": [{"key": "a", "operator": op, "values": values}]});
        assert_eq!(
            err(expr("In", json!([]))),
            "matchExpressions[0].values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
        );
        assert!(err(expr("Exists", json!(["x"]))).contains("values set must be empty for exists"));
        assert_eq!(err(expr("Gt", json!(["1"]))), "\"Gt\" is not a valid label selector operator");
        assert!(err(expr("In", json!(["-x"]))).starts_with("matchExpressions[0].values[0]: Invalid value: \"-x\""));
        assert!(err(expr("In", json!([1]))).contains("must be a list of strings"));
        assert!(err(json!({"matchLabels": {"a b": "x"}})).starts_with("matchLabels[a b]: Invalid value"));
        assert!(err(json!({"matchLabels": {"a": 1}})).contains("must be a string"));
        assert!(err(Value::Null).contains("expected an object, found null"));
    }

    fn fields(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn field_selectors_match_with_missing_fields_as_empty() {
        let s = fields("status.phase!=Failed,metadata.name=web,spec.nodeName==n1,");
        assert_eq!(s.fields().collect::<Vec<_>>(), ["metadata.name", "spec.nodeName", "status.phase"]);
        let obj = |phase: Option<&'static str>| {
            move |f: &str| match f {
                "metadata.name" => Some("web"),
                "spec.nodeName" => Some("n1"),
                _ => phase,
            }
        };
        assert!(s.matches(obj(Some("Running"))) && s.matches(obj(None)) && !s.matches(obj(Some("Failed"))));
        let unscheduled = fields("spec.nodeName=");
        assert!(unscheduled.matches(|_: &str| None::<String>) && !unscheduled.matches(|_: &str| Some("n1".to_owned())));
        assert_eq!((s.exact_value("spec.nodeName"), s.exact_value("status.phase")), (Some("n1"), None));
        assert!(fields("").is_empty() && fields(",,").is_empty() && !s.is_empty());
    }

    #[test]
    fn field_selector_escapes() {
        let s = fields(r"a=x\,y\=z\\,b!=\=");
        assert_eq!((s.exact_value("a"), s.terms.len()), (Some(r"x,y=z\"), 2));
        assert_eq!(s.to_string(), r"a=x\,y\=z\\,b!=\=");
        assert_eq!(fields("b==c,a=d").to_string(), "a=d,b=c");
        let err = |s: &str| FieldSelector::parse(s).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(err(r"a=\q"), r"invalid field selector: invalid escape sequence: \q");
        assert_eq!(err(r"a=b\"), r"invalid field selector: invalid escape sequence: \");
        assert_eq!(err("a=b=c"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(err("x=1,abc"), "invalid selector: 'x=1,abc'; can't understand 'abc'");
    }

    /// Selector-shaped strings: token soup, and comma-joined requirements with blanks.
    fn selectorish() -> impl Strategy<Value = String> {
        const PIECES: &[&str] =
            &["a", "b.c/d", "-", "=", "==", "!=", "!", "in", "notin", "(", ")", ",", " ", "x", "1", "<"];
        const OPS: &[&str] = &["", "!", "=", "==", "!=", " in ", " notin ", ">", "<"];
        let soup = prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|p| p.concat());
        let values = prop::collection::vec(prop::sample::select(&["", "x", "1", "in", " y ", "-"][..]), 1..4);
        let req = (prop::sample::select(&["a", "b.c/d", "in", "x1"][..]), prop::sample::select(OPS), values).prop_map(
            |(k, op, vs)| match op {
                "" | "!" => format!("{op}{k}"),
                " in " | " notin " => format!("{k}{op}({})", vs.join(",")),
                _ => format!("{k}{op}{}", vs.concat()),
            },
        );
        prop_oneof![soup, prop::collection::vec(req, 0..4).prop_map(|r| r.join(" , "))]
    }

    proptest! {
        #[test]
        fn label_parse_never_panics_and_round_trips(s in prop_oneof![any::<String>(), selectorish()]) {
            if let Ok(parsed) = LabelSelector::parse(&s) {
                prop_assert_eq!(LabelSelector::parse(&parsed.to_string()), Ok(parsed));
            }
        }

        #[test]
        fn field_parse_never_panics_and_round_trips(s in prop_oneof![any::<String>(), "[ab.=!,\\\\é ]{0,16}"]) {
            if let Ok(parsed) = FieldSelector::parse(&s) {
                prop_assert_eq!(FieldSelector::parse(&parsed.to_string()), Ok(parsed));
            }
        }
    }
}
