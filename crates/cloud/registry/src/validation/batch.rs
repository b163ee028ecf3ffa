//! batch/v1 rules, from Kubernetes 1.32's `pkg/apis/batch/validation` and the Job and CronJob strategies:
//! the Job spec (counts, completion mode, pod failure and success policies, pod replacement policy, the
//! pod template and its restart policy), the generated selector, and what may change on update; the
//! CronJob's schedule, time zone, concurrency policy, history limits and job template.
//!
//! Feature gates as 1.32 has them: JobBackoffLimitPerIndex, JobPodReplacementPolicy, JobSuccessPolicy and
//! JobManagedBy on; ElasticIndexedJob GA. Where Kubernetes validates a Job's spec twice on update, each
//! error is reported once.

use std::collections::BTreeSet;

use super::json::{self, arr_at, bool_at, child, get, index, int_at, key, str_at};
use super::meta::{self, MetaRules};
use super::names;
use super::workloads::{
    FIELD_IMMUTABLE, Selector, go_int32_slice, go_label_selector, go_string_map, invalid_selector, nonnegative, object,
    template_labels_match, validate_label_selector, validate_pod_template,
};
use super::{FieldError, KindInfo, go_quote};
use crate::cron::{parse_standard, time_zone_errors};
use crate::defaults::workloads::{
    CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL,
};
use serde_json::Value;

const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// Longest CronJob name: its Jobs append an 11-character suffix to a 63-character DNS label.
const MAX_CRON_JOB_NAME: usize = 52;

const POD_FAILURE_ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const EXIT_CODE_OPERATORS: &[&str] = &["In", "NotIn"];
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];

/// A batch/v1 object on create.
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    match kind {
        "Job" => job(obj, info, true),
        "CronJob" => {
            let mut errs = cron_job(obj, None, info);
            let name = str_at(get(obj, "metadata"), "name");
            if name.len() > MAX_CRON_JOB_NAME {
                errs.push(FieldError::invalid("metadata.name", name, "must be no more than 52 characters"));
            }
            errs
        }
        _ => Vec::new(),
    }
}

/// A batch/v1 object on update (metadata immutability is checked by the caller).
pub(crate) fn validate_update(kind: &str, new: &Value, old: &Value, info: KindInfo) -> Vec<FieldError> {
    match kind {
        "Job" => {
            // Jobs created before the prefixed labels existed need not carry them.
            let old_labels = get(get(get(get(old, "spec"), "template"), "metadata"), "labels");
            let prefixed = json::has(old_labels, JOB_NAME_LABEL) && json::has(old_labels, CONTROLLER_UID_LABEL);
            let mut errs = job(new, info, prefixed);
            errs.extend(job_spec_update(new, old));
            errs
        }
        "CronJob" => cron_job(new, Some(old), info),
        _ => Vec::new(),
    }
}

fn meta_rules(info: KindInfo) -> MetaRules {
    MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: true }
}

// --- Job ------------------------------------------------------------------------------------------------

/// `ValidateJob`.
fn job(obj: &Value, info: KindInfo, prefixed_labels: bool) -> Vec<FieldError> {
    let meta = get(obj, "metadata");
    let spec = get(obj, "spec");
    let mut errs = meta::validate(meta, meta_rules(info));
    errs.extend(generated_selector(obj, prefixed_labels));
    errs.extend(job_spec(spec, "spec"));
    let sel = get(spec, "selector");
    if sel.is_null() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        errs.extend(validate_label_selector(sel, "spec.selector"));
    }
    if let Some(selector) = Selector::from_label_selector(sel) {
        errs.extend(template_labels_match(&selector, get(spec, "template"), "spec.template"));
    }
    let completions = int_at(spec, "completions").unwrap_or(0);
    if str_at(spec, "completionMode") == "Indexed" && completions > 0 {
        let name = str_at(meta, "name");
        let host = format!("{name}-{}", completions - 1);
        if !names::dns1123_label(&host).is_empty() {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("will not able to create pod with invalid DNS label: {host}"),
            ));
        }
    }
    errs
}

/// `validateGeneratedSelector`: a generated selector and the template labels it needs are the Job's own.
fn generated_selector(obj: &Value, prefixed_labels: bool) -> Vec<FieldError> {
    let spec = get(obj, "spec");
    let sel = get(spec, "selector");
    if bool_at(spec, "manualSelector") || sel.is_null() {
        return Vec::new();
    }
    let meta = get(obj, "metadata");
    let (uid, name) = (str_at(meta, "uid"), str_at(meta, "name"));
    let mut errs = Vec::new();
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let labels = get(get(get(spec, "template"), "metadata"), "labels");
    let mut expected = vec![(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)];
    if prefixed_labels {
        expected.extend([(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]);
    }
    for (label, value) in &expected {
        errs.extend(has_label(labels, label, value));
    }
    let expected_labels: serde_json::Map<String, Value> =
        expected.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    if let Some(selector) = Selector::from_label_selector(sel)
        && !selector.matches(&Value::Object(expected_labels))
    {
        errs.push(invalid_selector("spec.selector", sel, "`selector` not auto-generated"));
    }
    errs
}

/// `ValidateHasLabel` on the template's labels.
fn has_label(labels: &Value, label: &str, expected: &str) -> Option<FieldError> {
    let path = key("spec.template.metadata.labels", label);
    match get(labels, label).as_str() {
        None => Some(FieldError::required(&path, expected)),
        Some(actual) if actual != expected => Some(
            FieldError::invalid(&path, labels.clone(), format!("must be '{expected}'"))
                .with_value_text(go_string_map(labels)),
        ),
        Some(_) => None,
    }
}

/// `validateJobSpec` of a Job's spec (`path` "spec") or a CronJob's job template (`spec.jobTemplate.spec`).
fn job_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        errs.extend(nonnegative(spec, field, path));
    }
    let per_index = json::has(spec, "backoffLimitPerIndex");
    let max_failed = int_at(spec, "maxFailedIndexes");
    if json::has(spec, "maxFailedIndexes") && !per_index {
        errs.push(FieldError::required(&child(path, "backoffLimitPerIndex"), "when maxFailedIndexes is specified"));
    }
    if let Some(managed_by) = get(spec, "managedBy").as_str() {
        errs.extend(domain_prefixed_path(managed_by, &child(path, "managedBy")));
        if managed_by.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(&child(path, "managedBy"), MAX_MANAGED_BY_LENGTH));
        }
    }
    let parallelism = int_at(spec, "parallelism");
    let completions = int_at(spec, "completions");
    let mode = get(spec, "completionMode").as_str();
    let indexed = mode == Some("Indexed");
    if let Some(mode) = mode {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(&child(path, "completionMode"), mode, &["NonIndexed", "Indexed"]));
        }
        if indexed {
            if completions.is_none() {
                errs.push(FieldError::required(&child(path, "completions"), "when completion mode is Indexed"));
            }
            if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    &child(path, "parallelism"),
                    p,
                    "must be less than or equal to 100000 when completion mode is Indexed",
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                errs.push(FieldError::invalid(
                    &child(path, "maxFailedIndexes"),
                    m,
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    &child(path, "maxFailedIndexes"),
                    m,
                    "must be less than or equal to 100000",
                ));
            }
            if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index {
                let high = "when completions are above 100000 and used with backoff limit per index";
                if max_failed.is_none() {
                    errs.push(FieldError::required(
                        &child(path, "maxFailedIndexes"),
                        "must be specified when completions is above 100000",
                    ));
                }
                if let Some(p) = parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(
                        &child(path, "parallelism"),
                        p,
                        format!("must be less than or equal to 10000 {high}"),
                    ));
                }
                if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(
                        &child(path, "maxFailedIndexes"),
                        m,
                        format!("must be less than or equal to 10000 {high}"),
                    ));
                }
            }
        }
    }
    if mode.is_none_or(|m| m == "NonIndexed") {
        for field in ["backoffLimitPerIndex", "maxFailedIndexes"] {
            if let Some(v) = int_at(spec, field) {
                errs.push(FieldError::invalid(&child(path, field), v, "requires indexed completion mode"));
            }
        }
    }
    let template = get(spec, "template");
    let failure_policy = object(spec, "podFailurePolicy");
    if let Some(policy) = failure_policy {
        errs.extend(pod_failure_policy(policy, spec, &child(path, "podFailurePolicy")));
    }
    if let Some(policy) = object(spec, "successPolicy") {
        let at = child(path, "successPolicy");
        if indexed {
            errs.extend(success_policy(policy, completions.unwrap_or(0), &at));
        } else {
            errs.push(FieldError::invalid(&at, policy.clone(), "requires indexed completion mode"));
        }
    }
    if let Some(replacement) = get(spec, "podReplacementPolicy").as_str() {
        let at = child(path, "podReplacementPolicy");
        if failure_policy.is_some() {
            if replacement != "Failed" {
                errs.push(FieldError::not_supported(&at, replacement, &["Failed"]));
            }
        } else if replacement != "Failed" && replacement != "TerminatingOrFailed" {
            errs.push(FieldError::not_supported(&at, replacement, &["Failed", "TerminatingOrFailed"]));
        }
    }
    let template_path = child(path, "template");
    errs.extend(validate_pod_template(template, &template_path, true));
    let restart_path = child(&child(&template_path, "spec"), "restartPolicy");
    match str_at(get(template, "spec"), "restartPolicy") {
        "Always" | "" => {
            errs.push(FieldError::required(&restart_path, "valid values: \"OnFailure\", \"Never\""));
        }
        "OnFailure" | "Never" => {}
        other => errs.push(FieldError::not_supported(&restart_path, other, &["OnFailure", "Never"])),
    }
    let policy = str_at(get(template, "spec"), "restartPolicy");
    if failure_policy.is_some() && policy == "OnFailure" {
        errs.push(FieldError::invalid(
            &restart_path,
            policy,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    errs
}

/// `IsDomainPrefixedPath` (`managedBy`).
fn domain_prefixed_path(value: &str, path: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((host, rest)) = value.split_once('/').filter(|(h, r)| !h.is_empty() && !r.is_empty()) else {
        return vec![FieldError::invalid(path, value, "must be a domain-prefixed path (such as \"acme.io/foo\")")];
    };
    let mut errs: Vec<FieldError> =
        names::dns1123_subdomain(host).into_iter().map(|m| FieldError::invalid(path, host, m)).collect();
    let http_path = |b: u8| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b);
    if !rest.bytes().all(http_path) {
        errs.push(FieldError::invalid(
            path,
            rest,
            names::regex_error("Invalid path", "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+", &[]),
        ));
    }
    errs
}

/// Go's `%q` of a string list, as `fmt.Sprintf("valid values: %q", ...)` prints it.
fn go_quoted_list(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[{}]", quoted.join(" "))
}

/// `validatePodFailurePolicy`.
fn pod_failure_policy(policy: &Value, spec: &Value, path: &str) -> Vec<FieldError> {
    let rules = arr_at(policy, "rules");
    let rules_path = child(path, "rules");
    let mut errs = Vec::new();
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(FieldError::too_many(&rules_path, rules.len(), MAX_POD_FAILURE_POLICY_RULES));
    }
    let pod = get(get(spec, "template"), "spec");
    let containers: BTreeSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| arr_at(pod, list).iter().map(|c| str_at(c, "name")))
        .collect();
    for (i, rule) in rules.iter().enumerate() {
        let at = index(&rules_path, i);
        let action_path = child(&at, "action");
        match str_at(rule, "action") {
            "" => errs.push(FieldError::required(
                &action_path,
                format!("valid values: {}", go_quoted_list(POD_FAILURE_ACTIONS)),
            )),
            "FailIndex" if !json::has(spec, "backoffLimitPerIndex") => {
                errs.push(FieldError::invalid(
                    &action_path,
                    "FailIndex",
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
            "FailIndex" => {}
            a if !POD_FAILURE_ACTIONS.contains(&a) => {
                errs.push(FieldError::not_supported(&action_path, a, POD_FAILURE_ACTIONS));
            }
            _ => {}
        }
        let exit_codes = object(rule, "onExitCodes");
        let conditions = arr_at(rule, "onPodConditions");
        if let Some(req) = exit_codes {
            errs.extend(on_exit_codes(req, &child(&at, "onExitCodes"), &containers));
        }
        if !conditions.is_empty() {
            errs.extend(on_pod_conditions(conditions, &child(&at, "onPodConditions")));
        }
        match (exit_codes.is_some(), !conditions.is_empty()) {
            (true, true) => errs.push(FieldError::invalid_omit(
                &at,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, false) => errs
                .push(FieldError::invalid_omit(&at, "specifying one of OnExitCodes and OnPodConditions is required")),
            _ => {}
        }
    }
    errs
}

/// `validatePodFailurePolicyRuleOnExitCodes`.
fn on_exit_codes(req: &Value, path: &str, containers: &BTreeSet<&str>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let operator = str_at(req, "operator");
    let operator_path = child(path, "operator");
    if operator.is_empty() {
        errs.push(FieldError::required(
            &operator_path,
            format!("valid values: {}", go_quoted_list(EXIT_CODE_OPERATORS)),
        ));
    } else if !EXIT_CODE_OPERATORS.contains(&operator) {
        errs.push(FieldError::not_supported(&operator_path, operator, EXIT_CODE_OPERATORS));
    }
    if let Some(name) = get(req, "containerName").as_str()
        && !containers.contains(name)
    {
        errs.push(FieldError::invalid(
            &child(path, "containerName"),
            name,
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values_value = get(req, "values");
    let values: Vec<i64> = arr_at(req, "values").iter().map(|v| v.as_i64().unwrap_or(0)).collect();
    let values_path = child(path, "values");
    if values.is_empty() {
        errs.push(
            FieldError::invalid(&values_path, values_value.clone(), "at least one value is required")
                .with_value_text(go_int32_slice(values_value)),
        );
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        errs.push(FieldError::too_many(&values_path, values.len(), MAX_ON_EXIT_CODES_VALUES));
    }
    let mut seen = BTreeSet::new();
    for (j, v) in values.iter().enumerate() {
        let at = index(&values_path, j);
        if operator == "In" && *v == 0 {
            errs.push(FieldError::invalid(&at, 0, "must not be 0 for the In operator"));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(&at, *v));
        }
    }
    if values.windows(2).any(|w| w[0] > w[1]) {
        errs.push(
            FieldError::invalid(&values_path, values_value.clone(), "must be ordered")
                .with_value_text(go_int32_slice(values_value)),
        );
    }
    errs
}

/// `validatePodFailurePolicyRuleOnPodConditions`.
fn on_pod_conditions(patterns: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if patterns.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
        errs.push(FieldError::too_many(path, patterns.len(), MAX_ON_POD_CONDITIONS_PATTERNS));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let at = index(path, j);
        let condition = str_at(pattern, "type");
        for m in names::qualified_name(condition) {
            errs.push(FieldError::invalid(&child(&at, "type"), condition, m));
        }
        let status = str_at(pattern, "status");
        if status.is_empty() {
            errs.push(FieldError::required(
                &child(&at, "status"),
                format!("valid values: {}", go_quoted_list(CONDITION_STATUSES)),
            ));
        } else if !CONDITION_STATUSES.contains(&status) {
            errs.push(FieldError::not_supported(&child(&at, "status"), status, CONDITION_STATUSES));
        }
    }
    errs
}

/// `validateSuccessPolicy` (an Indexed Job's).
fn success_policy(policy: &Value, completions: i64, path: &str) -> Vec<FieldError> {
    let rules = arr_at(policy, "rules");
    let rules_path = child(path, "rules");
    let mut errs = Vec::new();
    if rules.is_empty() {
        errs.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(FieldError::too_many(&rules_path, rules.len(), MAX_SUCCESS_POLICY_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = index(&rules_path, i);
        let indexes = get(rule, "succeededIndexes").as_str();
        let count = int_at(rule, "succeededCount");
        if indexes.is_none() && count.is_none() {
            errs.push(FieldError::required(
                &at,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(indexes) = indexes {
            let indexes_path = child(&at, "succeededIndexes");
            if indexes.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(&indexes_path, MAX_SUCCEEDED_INDEXES_LENGTH));
            }
            match indexes_format(indexes, completions) {
                Ok(t) => total = t,
                Err(e) => errs.push(FieldError::invalid(
                    &indexes_path,
                    indexes,
                    format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(count) = count {
            let count_path = child(&at, "succeededCount");
            errs.extend(nonnegative(rule, "succeededCount", &at));
            if count > completions {
                errs.push(FieldError::invalid(
                    &count_path,
                    count,
                    format!("must be less than or equal to {completions} (the number of specified completions)"),
                ));
            }
            if indexes.is_some() && count > total {
                errs.push(FieldError::invalid(
                    &count_path,
                    count,
                    format!(
                        "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                    ),
                ));
            }
        }
    }
    errs
}

/// `validateIndexesFormat`: intervals `x` or `x-y`, increasing, below `completions`; the number of indexes.
fn indexes_format(indexes: &str, completions: i64) -> Result<i64, String> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let (x, y) = index_interval(interval, completions)?;
        if let Some(l) = last.filter(|l| *l >= x) {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

fn index_interval(interval: &str, completions: i64) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = interval.split('-').collect();
    if limits.len() > 2 {
        return Err(format!(
            "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
            go_quote(interval)
        ));
    }
    let parse = |s: &str| -> Result<i64, String> {
        let n = s.parse::<i64>().map_err(|_| format!("cannot convert string to integer for index: {}", go_quote(s)))?;
        if n >= completions {
            return Err(format!("too large index: {}", go_quote(s)));
        }
        Ok(n)
    };
    let x = parse(limits[0])?;
    if let Some(high) = limits.get(1) {
        let y = parse(high)?;
        if x >= y {
            return Err(format!("non-increasing order, previous: {x}, current: {y}"));
        }
        return Ok((x, y));
    }
    Ok((x, x))
}

/// An immutable field that changed: `Invalid value: <new>: field is immutable` (a nil pointer prints as
/// `"null"`).
fn immutable(new: &Value, old: &Value, field: &str, path: &str) -> Option<FieldError> {
    let (n, o) = (get(new, field), get(old, field));
    (!json::same(n, o)).then(|| {
        let e = FieldError::invalid(&child(path, field), n.clone(), FIELD_IMMUTABLE);
        if n.is_null() { e.with_value_text(go_quote("null")) } else { e }
    })
}

/// `ValidateJobSpecUpdate` (without the spec rules, already checked once).
fn job_spec_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (spec, old_spec) = (get(new, "spec"), get(old, "spec"));
    let mut errs = Vec::new();
    // validateCompletions (ElasticIndexedJob is GA): an Indexed Job may scale completions with parallelism.
    if str_at(spec, "completionMode") == "Indexed" {
        let completions = get(spec, "completions");
        if !json::same(completions, get(old_spec, "completions"))
            && let Some(c) = completions.as_i64()
            && Some(c) != int_at(spec, "parallelism")
        {
            errs.push(FieldError::invalid(
                "spec.completions",
                c,
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    } else {
        errs.extend(immutable(spec, old_spec, "completions", "spec"));
    }
    let sel = get(spec, "selector");
    if !json::same(sel, get(old_spec, "selector")) {
        let text = if sel.is_null() { go_quote("null") } else { go_label_selector(sel) };
        errs.push(FieldError::invalid("spec.selector", sel.clone(), FIELD_IMMUTABLE).with_value_text(text));
    }
    errs.extend(template_update(new, old));
    for field in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"] {
        errs.extend(immutable(spec, old_spec, field, "spec"));
    }
    errs
}

/// `validatePodTemplateUpdate`: the template is immutable, except that a suspended Job that never started
/// may change its scheduling directives (node affinity, node selector, tolerations, scheduling gates) and
/// the template's labels and annotations.
fn template_update(new: &Value, old: &Value) -> Option<FieldError> {
    let template = get(get(new, "spec"), "template");
    let mut old_template = get(get(old, "spec"), "template").clone();
    let suspended = get(get(old, "spec"), "suspend").as_bool() == Some(true);
    let never_started = !json::has(get(old, "status"), "startTime");
    if suspended && never_started {
        mutable_scheduling_directives(template, &mut old_template);
    }
    (!json::same(template, &old_template))
        .then(|| FieldError::invalid("spec.template", template.clone(), FIELD_IMMUTABLE))
}

/// Copies into `old` what a suspended, never started Job may change in its template.
fn mutable_scheduling_directives(new: &Value, old: &mut Value) {
    let Some(old_map) = old.as_object_mut() else { return };
    let new_meta = get(new, "metadata");
    let meta = old_map.entry("metadata").or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        for field in ["labels", "annotations"] {
            meta.insert(field.into(), get(new_meta, field).clone());
        }
    }
    let new_spec = get(new, "spec");
    let spec = old_map.entry("spec").or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(spec) = spec.as_object_mut() else { return };
    for field in ["nodeSelector", "tolerations", "schedulingGates"] {
        spec.insert(field.into(), get(new_spec, field).clone());
    }
    let new_affinity = get(new_spec, "affinity");
    let new_node_affinity = get(new_affinity, "nodeAffinity").clone();
    match (new_affinity.is_null(), spec.get("affinity").is_none_or(Value::is_null)) {
        (true, false) => {
            if let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut) {
                affinity.remove("nodeAffinity");
                if affinity.values().all(Value::is_null) {
                    spec.remove("affinity");
                }
            }
        }
        (false, true) => {
            spec.insert("affinity".into(), serde_json::json!({"nodeAffinity": new_node_affinity}));
        }
        (false, false) => {
            if let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut) {
                affinity.insert("nodeAffinity".into(), new_node_affinity);
            }
        }
        (true, true) => {}
    }
}

// --- CronJob --------------------------------------------------------------------------------------------

/// `ValidateCronJobCreate` / `ValidateCronJobUpdate` (without the name length, which only a create checks).
fn cron_job(obj: &Value, old: Option<&Value>, info: KindInfo) -> Vec<FieldError> {
    let mut errs = meta::validate(get(obj, "metadata"), meta_rules(info));
    let spec = get(obj, "spec");
    let old_spec = old.map(|o| get(o, "spec"));
    let time_zone = get(spec, "timeZone");
    let schedule = str_at(spec, "schedule");
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if let Err(e) = parse_standard(schedule) {
            errs.push(FieldError::invalid("spec.schedule", schedule, e));
        }
        // A schedule stored with a TZ before timeZone existed may keep it.
        let allow_tz = old_spec.is_some_and(|o| str_at(o, "schedule").contains("TZ"));
        if schedule.contains("TZ") {
            if allow_tz && !time_zone.is_null() {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                ));
            } else if !allow_tz {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ));
            }
        }
    }
    errs.extend(nonnegative(spec, "startingDeadlineSeconds", "spec"));
    if old_spec.is_none_or(|o| !json::same(get(o, "timeZone"), time_zone))
        && let Some(tz) = time_zone.as_str()
        && let Some(msg) = time_zone_errors(tz)
    {
        errs.push(FieldError::invalid("spec.timeZone", tz, msg));
    }
    match str_at(spec, "concurrencyPolicy") {
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        "Allow" | "Forbid" | "Replace" => {}
        other => errs.push(FieldError::not_supported("spec.concurrencyPolicy", other, &["Allow", "Forbid", "Replace"])),
    }
    errs.extend(job_template_spec(get(spec, "jobTemplate"), "spec.jobTemplate"));
    errs.extend(nonnegative(spec, "successfulJobsHistoryLimit", "spec"));
    errs.extend(nonnegative(spec, "failedJobsHistoryLimit", "spec"));
    errs
}

/// `ValidateJobTemplateSpec`: a Job spec whose selector the CronJob's Jobs generate.
fn job_template_spec(template: &Value, path: &str) -> Vec<FieldError> {
    let spec = get(template, "spec");
    let spec_path = child(path, "spec");
    let mut errs = job_spec(spec, &spec_path);
    let sel = get(spec, "selector");
    if !sel.is_null() {
        errs.push(invalid_selector(&child(&spec_path, "selector"), sel, "`selector` will be auto-generated"));
    }
    if get(spec, "manualSelector").as_bool() == Some(true) {
        errs.push(FieldError::not_supported(&child(&spec_path, "manualSelector"), true, &["nil", "false"]));
    }
    errs
}
