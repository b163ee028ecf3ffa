//! Pod rules (core's `ValidatePodCreate`, `ValidatePodSpec`, `ValidatePodUpdate`): containers, init
//! containers, ports, env, volume mounts, volumes, resources, probes, scheduling fields and the update rule
//! that only images, activeDeadlineSeconds and added tolerations may change.

use super::container::{validate_containers, validate_init_containers};
use super::json::{self, arr_at, bool_at, child, get, index, int_at, key, obj_at, str_at, string_map};
use super::meta::{self, MetaRules};
use super::names::{self, NameRule, inclusive_range_error};
use super::{FieldError, KindInfo};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const MAX_INT32: i64 = i32::MAX as i64;
pub(crate) const MAX_ID: i64 = 0xffff_ffff;

/// The volume source fields of a `VolumeSource`, in the order Kubernetes checks them, with the path name
/// Kubernetes uses in its "more than 1 volume type" error (it spells two of them differently).
pub(crate) const VOLUME_SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

/// A Pod on create.
pub(crate) fn validate_pod(pod: &Value, info: KindInfo) -> Vec<FieldError> {
    let mut errs = metadata_and_spec(pod, info);
    let spec = get(pod, "spec");
    if !arr_at(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
    if !str_at(spec, "nodeName").is_empty() && !arr_at(spec, "schedulingGates").is_empty() {
        errs.push(FieldError::forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"));
    }
    errs
}

/// `validatePodMetadataAndSpec`.
fn metadata_and_spec(pod: &Value, info: KindInfo) -> Vec<FieldError> {
    let meta = get(pod, "metadata");
    let spec = get(pod, "spec");
    let rules = MetaRules { namespaced: info.namespaced, name_rule: NameRule::Subdomain, kube_finalizers: true };
    let mut errs = meta::validate(meta, rules);
    errs.extend(pod_specific_annotations(meta, spec, "metadata.annotations"));
    errs.extend(validate_pod_spec(spec, "spec"));
    for list in ["containers", "initContainers"] {
        for (i, c) in arr_at(spec, list).iter().enumerate() {
            let image = str_at(c, "image");
            if image.trim() != image {
                errs.push(FieldError::invalid(
                    &child(&index(&child("spec", list), i), "image"),
                    image,
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }
    errs
}

/// `ValidatePodSpecificAnnotations` (the mirror pod and deletion cost annotations) of `meta` at `path` (a
/// Pod's `metadata.annotations`, a template's `spec.template.annotations`).
pub(crate) fn pod_specific_annotations(meta: &Value, spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in string_map(meta, "annotations") {
        let at = key(path, k);
        if k == "kubernetes.io/config.mirror" && str_at(spec, "nodeName").is_empty() {
            errs.push(FieldError::invalid(&at, v, "must set spec.nodeName if mirror pod annotation is set"));
        }
        if k == "controller.kubernetes.io/pod-deletion-cost" && v.parse::<i32>().is_err() {
            errs.push(FieldError::invalid(&at, v, "must be a 32bit integer"));
        }
    }
    errs
}

/// `ValidatePodSpec`.
pub(crate) fn validate_pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !json::has(spec, "terminationGracePeriodSeconds") {
        errs.push(FieldError::required(&child(path, "terminationGracePeriodSeconds"), ""));
    }
    let (volumes, vol_errs) = validate_volumes(arr_at(spec, "volumes"), &child(path, "volumes"));
    errs.extend(vol_errs);
    let grace = int_at(spec, "terminationGracePeriodSeconds");
    errs.extend(validate_containers(arr_at(spec, "containers"), &volumes, grace, &child(path, "containers")));
    errs.extend(validate_init_containers(spec, &volumes, grace, &child(path, "initContainers")));
    if bool_at(spec, "hostNetwork") {
        for (i, c) in arr_at(spec, "containers").iter().enumerate() {
            for (j, p) in arr_at(c, "ports").iter().enumerate() {
                let host_port = int_at(p, "hostPort").unwrap_or(0);
                if host_port != int_at(p, "containerPort").unwrap_or(0) {
                    let at = child(&index(&child(&index(&child(path, "containers"), i), "ports"), j), "hostPort");
                    errs.push(FieldError::invalid(
                        &at,
                        host_port,
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }
    errs.extend(enum_field(spec, path, "restartPolicy", &["Always", "OnFailure", "Never"]));
    errs.extend(enum_field(spec, path, "dnsPolicy", &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]));
    errs.extend(meta::validate_labels(&string_map(spec, "nodeSelector"), &child(path, "nodeSelector")));
    errs.extend(validate_pod_security_context(spec, path));
    errs.extend(validate_dns_config(spec, path));
    for field in ["serviceAccountName", "nodeName", "priorityClassName"] {
        let value = str_at(spec, field);
        if !value.is_empty() {
            for msg in names::dns1123_subdomain(value) {
                errs.push(FieldError::invalid(&child(path, field), value, msg));
            }
        }
    }
    if let Some(ads) = int_at(spec, "activeDeadlineSeconds").filter(|v| !(1..=MAX_INT32).contains(v)) {
        errs.push(FieldError::invalid(&child(path, "activeDeadlineSeconds"), ads, inclusive_range_error(1, MAX_INT32)));
    }
    for field in ["hostname", "subdomain"] {
        let value = str_at(spec, field);
        if !value.is_empty() {
            errs.extend(dns_label(value, &child(path, field)));
        }
    }
    errs.extend(validate_tolerations(arr_at(spec, "tolerations"), &child(path, "tolerations")));
    for (i, alias) in arr_at(spec, "hostAliases").iter().enumerate() {
        let at = index(&child(path, "hostAliases"), i);
        let ip = str_at(alias, "ip");
        if let Some(msg) = names::ip_error(ip) {
            errs.push(FieldError::invalid(&child(&at, "ip"), ip, msg));
        }
        for (j, host) in json::string_list(alias, "hostnames").iter().enumerate() {
            for msg in names::dns1123_subdomain(host) {
                errs.push(FieldError::invalid(&index(&child(&at, "hostnames"), j), *host, msg));
            }
        }
    }
    if let Some(rc) = get(spec, "runtimeClassName").as_str() {
        for msg in names::dns1123_subdomain(rc) {
            errs.push(FieldError::invalid(&child(path, "runtimeClassName"), rc, msg));
        }
    }
    if json::has(spec, "preemptionPolicy") {
        errs.extend(enum_field(spec, path, "preemptionPolicy", &["PreemptLowerPriority", "Never"]));
    }
    if let Some(os) = obj_at(spec, "os") {
        let name = os.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&child(path, "os.name"), "cannot be empty"));
        } else if name != "linux" && name != "windows" {
            errs.push(FieldError::not_supported(&child(path, "os"), name, &["linux", "windows"]));
        }
    }
    errs
}

/// A string enumeration where "" is "Required" (after defaulting it never is).
pub(crate) fn enum_field(obj: &Value, path: &str, field: &str, allowed: &[&str]) -> Option<FieldError> {
    let value = str_at(obj, field);
    let at = child(path, field);
    if value.is_empty() {
        Some(FieldError::required(&at, ""))
    } else if !allowed.contains(&value) {
        Some(FieldError::not_supported(&at, value, allowed))
    } else {
        None
    }
}

pub(crate) fn dns_label(value: &str, path: &str) -> Vec<FieldError> {
    names::dns1123_label(value).into_iter().map(|m| FieldError::invalid(path, value, m)).collect()
}

// --- volumes ---------------------------------------------------------------------------------------------

/// `ValidateVolumes`: the valid volumes by name (for mounts to refer to), and the errors.
fn validate_volumes(volumes: &[Value], path: &str) -> (BTreeMap<String, String>, Vec<FieldError>) {
    let mut all = BTreeMap::new();
    let mut errs = Vec::new();
    for (i, vol) in volumes.iter().enumerate() {
        let at = index(path, i);
        let name_path = child(&at, "name");
        let name = str_at(vol, "name");
        let (source, mut el) = validate_volume_source(vol, &at);
        if name.is_empty() {
            el.push(FieldError::required(&name_path, ""));
        } else {
            el.extend(dns_label(name, &name_path));
        }
        if all.contains_key(name) {
            el.push(FieldError::duplicate(&name_path, name));
        }
        if el.is_empty() {
            all.insert(name.to_string(), source);
        } else {
            errs.extend(el);
        }
    }
    (all, errs)
}

/// Exactly one source, and the rules of the common sources. Returns the source's field name.
fn validate_volume_source(vol: &Value, path: &str) -> (String, Vec<FieldError>) {
    let mut errs = Vec::new();
    let mut found: Option<&str> = None;
    for (field, err_name) in VOLUME_SOURCES {
        let source = get(vol, field);
        if source.is_null() {
            continue;
        }
        if found.is_some() {
            errs.push(FieldError::forbidden(&child(path, err_name), "may not specify more than 1 volume type"));
            continue;
        }
        found = Some(field);
        let at = child(path, field);
        match *field {
            "emptyDir" => {
                if let Some(q) = get(source, "sizeLimit").as_str().and_then(|s| crate::quantity::parse_quantity(s).ok())
                    && q.nanos < 0
                {
                    errs.push(FieldError::forbidden(
                        &child(&at, "sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    ));
                }
            }
            "hostPath" => {
                let p = str_at(source, "path");
                if p.is_empty() {
                    errs.push(FieldError::required(&child(&at, "path"), ""));
                } else {
                    errs.extend(no_backsteps(p, &child(&at, "path")));
                    let t = str_at(source, "type");
                    let types = [
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if json::has(source, "type") && !types.contains(&t) {
                        errs.push(FieldError::not_supported(&child(&at, "type"), t, &types));
                    }
                }
            }
            "secret" => {
                if str_at(source, "secretName").is_empty() {
                    errs.push(FieldError::required(&child(&at, "secretName"), ""));
                }
                errs.extend(mode_and_items(source, &at, "defaultMode"));
            }
            "configMap" => {
                if str_at(source, "name").is_empty() {
                    errs.push(FieldError::required(&child(&at, "name"), ""));
                }
                errs.extend(mode_and_items(source, &at, "defaultMode"));
            }
            "persistentVolumeClaim" if str_at(source, "claimName").is_empty() => {
                errs.push(FieldError::required(&child(&at, "claimName"), ""));
            }
            "nfs" => {
                if str_at(source, "server").is_empty() {
                    errs.push(FieldError::required(&child(&at, "server"), ""));
                }
                let p = str_at(source, "path");
                if p.is_empty() {
                    errs.push(FieldError::required(&child(&at, "path"), ""));
                }
                if !p.starts_with('/') {
                    errs.push(FieldError::invalid(&child(&at, "path"), p, "must be an absolute path"));
                }
            }
            "downwardAPI" | "projected" => {
                if let Some(mode) = int_at(source, "defaultMode").filter(|m| !(0..=0o777).contains(m)) {
                    errs.push(FieldError::invalid(&child(&at, "defaultMode"), mode, FILE_MODE_ERROR));
                }
            }
            _ => {}
        }
    }
    if found.is_none() {
        errs.push(FieldError::required(path, "must specify a volume type"));
    }
    (found.unwrap_or("").to_string(), errs)
}

fn mode_and_items(source: &Value, at: &str, mode_field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(mode) = int_at(source, mode_field).filter(|m| !(0..=0o777).contains(m)) {
        errs.push(FieldError::invalid(&child(at, mode_field), mode, FILE_MODE_ERROR));
    }
    for (i, item) in arr_at(source, "items").iter().enumerate() {
        let item_path = index(&child(at, "items"), i);
        if str_at(item, "key").is_empty() {
            errs.push(FieldError::required(&child(&item_path, "key"), ""));
        }
        let p = str_at(item, "path");
        if p.is_empty() {
            errs.push(FieldError::required(&child(&item_path, "path"), ""));
        }
        errs.extend(local_non_reserved_path(p, &child(&item_path, "path")));
        if let Some(mode) = int_at(item, "mode").filter(|m| !(0..=0o777).contains(m)) {
            errs.push(FieldError::invalid(&child(&item_path, "mode"), mode, FILE_MODE_ERROR));
        }
    }
    errs
}

fn no_backsteps(p: &str, path: &str) -> Option<FieldError> {
    p.split('/').any(|part| part == "..").then(|| FieldError::invalid(path, p, "must not contain '..'"))
}

pub(crate) fn local_descending_path(p: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if p.starts_with('/') {
        errs.push(FieldError::invalid(path, p, "must be a relative path"));
    }
    errs.extend(no_backsteps(p, path));
    errs
}

fn local_non_reserved_path(p: &str, path: &str) -> Vec<FieldError> {
    let mut errs = local_descending_path(p, path);
    if p.starts_with("..") && !p.starts_with("../") {
        errs.push(FieldError::invalid(path, p, "must not start with '..'"));
    }
    errs
}

// --- pod-level settings ----------------------------------------------------------------------------------

fn validate_pod_security_context(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sc = get(spec, "securityContext");
    let sc_path = child(path, "securityContext");
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        if let Some(id) = int_at(sc, field).filter(|v| !(0..=MAX_ID).contains(v)) {
            errs.push(FieldError::invalid(&child(&sc_path, field), id, inclusive_range_error(0, MAX_ID)));
        }
    }
    for (i, gid) in arr_at(sc, "supplementalGroups").iter().enumerate() {
        if let Some(g) = gid.as_i64().filter(|v| !(0..=MAX_ID).contains(v)) {
            errs.push(FieldError::invalid(
                &index(&child(&sc_path, "supplementalGroups"), i),
                g,
                inclusive_range_error(0, MAX_ID),
            ));
        }
    }
    if get(spec, "shareProcessNamespace").as_bool() == Some(true) && bool_at(spec, "hostPID") {
        errs.push(FieldError::invalid(
            &child(&sc_path, "shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    errs
}

/// `_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?` per dot-separated part (the relaxed DNS search rule).
fn subdomain_with_underscore(s: &str) -> bool {
    s.split('.').all(|part| {
        let p = part.strip_prefix('_').unwrap_or(part).as_bytes();
        match (p.first(), p.last()) {
            (Some(&f), Some(&l)) => {
                let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                ok(f) && ok(l) && p.iter().all(|&c| ok(c) || c == b'-' || c == b'_')
            }
            _ => false,
        }
    })
}

fn validate_dns_config(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let config = get(spec, "dnsConfig");
    let cfg_path = child(path, "dnsConfig");
    if str_at(spec, "dnsPolicy") == "None" {
        if config.is_null() {
            return vec![FieldError::required(&cfg_path, "must provide `dnsConfig` when `dnsPolicy` is None")];
        }
        if arr_at(config, "nameservers").is_empty() {
            return vec![FieldError::required(
                &child(&cfg_path, "nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )];
        }
    }
    if config.is_null() {
        return errs;
    }
    let nameservers = json::string_list(config, "nameservers");
    if nameservers.len() > 3 {
        errs.push(FieldError::invalid(
            &child(&cfg_path, "nameservers"),
            nameservers.clone(),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, ns) in nameservers.iter().enumerate() {
        if let Some(msg) = names::ip_error(ns) {
            errs.push(FieldError::invalid(&index(&child(&cfg_path, "nameservers"), i), *ns, msg));
        }
    }
    let searches = json::string_list(config, "searches");
    if searches.len() > 32 {
        errs.push(FieldError::invalid(
            &child(&cfg_path, "searches"),
            searches.clone(),
            "must not have more than 32 search paths",
        ));
    }
    if searches.join(" ").len() > 2048 {
        errs.push(FieldError::invalid(
            &child(&cfg_path, "searches"),
            searches.clone(),
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        if *search == "." {
            continue;
        }
        let trimmed = search.strip_suffix('.').unwrap_or(search);
        let mut msgs = Vec::new();
        if trimmed.len() > names::DNS1123_SUBDOMAIN_MAX {
            msgs.push(names::max_len_error(names::DNS1123_SUBDOMAIN_MAX));
        }
        if !subdomain_with_underscore(trimmed) {
            msgs.push(names::regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', \
                 and must start and end with an alphanumeric character",
                "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*",
                &["example.com"],
            ));
        }
        errs.extend(
            msgs.into_iter().map(|m| FieldError::invalid(&index(&child(&cfg_path, "searches"), i), trimmed, m)),
        );
    }
    for (i, option) in arr_at(config, "options").iter().enumerate() {
        if str_at(option, "name").is_empty() {
            errs.push(FieldError::required(&index(&child(&cfg_path, "options"), i), "must not be empty"));
        }
    }
    errs
}

/// `ValidateTolerations`.
pub(crate) fn validate_tolerations(tolerations: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let at = index(path, i);
        let k = str_at(t, "key");
        let operator = str_at(t, "operator");
        let effect = str_at(t, "effect");
        let value = str_at(t, "value");
        if !k.is_empty() {
            errs.extend(names::qualified_name(k).into_iter().map(|m| FieldError::invalid(&child(&at, "key"), k, m)));
        }
        if k.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                &child(&at, "operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if json::has(t, "tolerationSeconds") && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &child(&at, "effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(&child(&at, "operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        &child(&at, "operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(&child(&at, "operator"), other, &["Equal", "Exists"])),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            errs.push(FieldError::not_supported(
                &child(&at, "effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

// --- update ----------------------------------------------------------------------------------------------

const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
`spec.tolerations` (only additions to existing tolerations),\
`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate` (metadata immutability is checked by the caller).
pub(crate) fn validate_pod_update(new: &Value, old: &Value, info: KindInfo) -> Vec<FieldError> {
    let mut errs = metadata_and_spec(new, info);
    let (new_spec, old_spec) = (get(new, "spec"), get(old, "spec"));
    let (new_ann, old_ann) =
        (string_map(get(new, "metadata"), "annotations"), string_map(get(old, "metadata"), "annotations"));
    let mirror = "kubernetes.io/config.mirror";
    let find = |list: &[(&str, &str)]| list.iter().find(|(k, _)| *k == mirror).map(|(_, v)| v.to_string());
    match (find(&old_ann), find(&new_ann)) {
        (Some(o), Some(n)) if o != n => errs.push(FieldError::forbidden(
            &key("metadata.annotations", mirror),
            "may not remove or update mirror pod annotation",
        )),
        (Some(_), None) => errs.push(FieldError::forbidden(
            &key("metadata.annotations", mirror),
            "may not remove or update mirror pod annotation",
        )),
        (None, Some(_)) => {
            errs.push(FieldError::forbidden(&key("metadata.annotations", mirror), "may not add mirror pod annotation"))
        }
        _ => {}
    }
    for list in ["containers", "initContainers"] {
        let (n, o) = (arr_at(new_spec, list), arr_at(old_spec, list));
        let at = child("spec", list);
        if n.len() != o.len() {
            errs.push(FieldError::forbidden(&at, "pod updates may not add or remove containers"));
            return errs;
        }
        for (i, c) in n.iter().enumerate() {
            let image = str_at(c, "image");
            if image.is_empty() {
                errs.push(FieldError::required(&child(&index(&at, i), "image"), ""));
            }
            if image.trim() != image {
                errs.push(FieldError::invalid(
                    &child(&index(&at, i), "image"),
                    image,
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }
    let ads_path = "spec.activeDeadlineSeconds";
    match (get(new_spec, "activeDeadlineSeconds"), int_at(old_spec, "activeDeadlineSeconds")) {
        (Value::Null, Some(_)) => errs.push(FieldError::invalid(
            ads_path,
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        (n, old_ads) if !n.is_null() => {
            let n = n.as_i64().unwrap_or(0);
            if !(0..=MAX_INT32).contains(&n) {
                errs.push(FieldError::invalid(ads_path, n, inclusive_range_error(0, MAX_INT32)));
                return errs;
            }
            if old_ads.is_some_and(|o| o < n) {
                errs.push(FieldError::invalid(ads_path, n, "must be less than or equal to previous value"));
                return errs;
            }
        }
        _ => {}
    }
    errs.extend(only_added_tolerations(arr_at(new_spec, "tolerations"), arr_at(old_spec, "tolerations")));
    let old_gates: Vec<&str> = arr_at(old_spec, "schedulingGates").iter().map(|g| str_at(g, "name")).collect();
    for (i, g) in arr_at(new_spec, "schedulingGates").iter().enumerate() {
        let name = str_at(g, "name");
        if !old_gates.contains(&name) {
            errs.push(FieldError::forbidden(
                &child(&index("spec.schedulingGates", i), "name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    let munged = munge_spec(new_spec, old_spec);
    if !json::same(&munged, old_spec) {
        let diff = spec_diff(old_spec, &munged, "");
        errs.push(FieldError::forbidden(
            "spec",
            format!("pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{}", diff.join("\n")),
        ));
    }
    errs
}

/// The new spec with the mutable fields put back to their old values.
fn munge_spec(new: &Value, old: &Value) -> Value {
    let mut munged = new.clone();
    let Some(m) = munged.as_object_mut() else { return munged };
    for list in ["containers", "initContainers"] {
        if let Some(items) = m.get_mut(list).and_then(Value::as_array_mut) {
            for (c, o) in items.iter_mut().zip(arr_at(old, list)) {
                if let Some(obj) = c.as_object_mut() {
                    match o.get("image") {
                        Some(img) => obj.insert("image".into(), img.clone()),
                        None => obj.remove("image"),
                    };
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        match old.get(field) {
            Some(v) => m.insert(field.into(), v.clone()),
            None => m.remove(field),
        };
    }
    let old_grace = int_at(old, "terminationGracePeriodSeconds");
    if old_grace.is_some_and(|g| g < 0) && int_at(new, "terminationGracePeriodSeconds") == Some(1) {
        m.insert("terminationGracePeriodSeconds".into(), get(old, "terminationGracePeriodSeconds").clone());
    }
    munged
}

/// A short listing of what differs (Kubernetes prints a go-cmp diff here; this is not that format).
fn spec_diff(old: &Value, new: &Value, path: &str) -> Vec<String> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    spec_diff(a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), &child(path, k))
                })
                .collect()
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().flat_map(|(i, (x, y))| spec_diff(x, y, &index(path, i))).collect()
        }
        (a, b) if json::same(a, b) => Vec::new(),
        (a, b) => vec![format!("  {path}: {a} -> {b}")],
    }
}

/// `validateOnlyAddedTolerations`.
fn only_added_tolerations(new: &[Value], old: &[Value]) -> Vec<FieldError> {
    let strip = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    for o in old {
        let o = strip(o);
        if !new.iter().any(|n| json::same(&strip(n), &o)) {
            return vec![FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    // Kubernetes validates the new tolerations again here; they were already checked with the spec.
    Vec::new()
}
