//! Volumes. configMap and secret volumes are files under
//! `pods/{uid}/volumes/{name}` (items and modes honoured, each file replaced
//! atomically, rewritten when the object changes); emptyDir is a directory
//! there; hostPath is the host's path. The runtime mounts them: the CRI
//! runtime bind-mounts, the process runtime links them under the
//! container's working directory.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::runtime::Mount;

/// Object data by key (secrets decoded).
pub(crate) type Data = BTreeMap<String, Vec<u8>>;

/// The configmaps and secrets a pod mounts as volumes: (kind, name).
pub(crate) fn sources(pod: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v.pointer("/configMap/name").and_then(Value::as_str) {
            out.push(("configmap", n.to_owned()));
        }
        if let Some(n) = v.pointer("/secret/secretName").and_then(Value::as_str) {
            out.push(("secret", n.to_owned()));
        }
    }
    out
}

/// The data of a configmap or secret object.
pub(crate) fn object_data(kind: &str, obj: &Value) -> Data {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut data = Data::new();
    for (k, v) in obj["data"].as_object().into_iter().flatten() {
        let Some(text) = v.as_str() else { continue };
        let bytes = if kind == "secret" { b64.decode(text).ok() } else { Some(text.as_bytes().to_vec()) };
        if let Some(b) = bytes {
            data.insert(k.clone(), b);
        }
    }
    for (k, v) in obj["binaryData"].as_object().into_iter().flatten() {
        if let Some(b) = v.as_str().and_then(|t| b64.decode(t).ok()) {
            data.insert(k.clone(), b);
        }
    }
    data
}

fn volume_dir(pod_dir: &Path, name: &str) -> PathBuf {
    pod_dir.join("volumes").join(name)
}

/// Writes a configMap/secret volume's files: `items` (key → path, mode) or
/// every key, with `defaultMode` (0644 by default); keys no longer there are
/// removed.
pub(crate) fn write_object_volume(pod_dir: &Path, volume: &Value, source: &Value, data: &Data) -> std::io::Result<()> {
    let dir = volume_dir(pod_dir, volume["name"].as_str().unwrap_or_default());
    std::fs::create_dir_all(&dir)?;
    let default_mode = source["defaultMode"].as_u64().map_or(0o644, |m| m as u32);
    let mut wanted: Vec<(PathBuf, &[u8], u32)> = Vec::new();
    match source["items"].as_array() {
        Some(items) => {
            for it in items {
                let (Some(key), Some(path)) = (it["key"].as_str(), it["path"].as_str()) else { continue };
                if path.split('/').any(|p| p == "..") || path.starts_with('/') {
                    continue; // never outside the volume
                }
                if let Some(bytes) = data.get(key) {
                    wanted.push((dir.join(path), bytes, it["mode"].as_u64().map_or(default_mode, |m| m as u32)));
                }
            }
        }
        None => {
            for (k, bytes) in data {
                if k.contains('/') || k == ".." {
                    continue;
                }
                wanted.push((dir.join(k), bytes, default_mode));
            }
        }
    }
    for (path, bytes, mode) in &wanted {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(*mode))?;
        std::fs::rename(&tmp, path)?;
    }
    for e in std::fs::read_dir(&dir)?.flatten() {
        let p = e.path();
        if p.is_file() && !wanted.iter().any(|(w, _, _)| *w == p) {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

/// Prepares every volume of the pod (configMap/secret data from `sources`;
/// an optional one that does not exist is an empty directory). Whether
/// the objects it needs are there is [`crate::config::volume_error`]'s.
pub(crate) fn prepare(pod: &Value, pod_dir: &Path, sources: &crate::config::Sources) {
    let empty = Data::new();
    let data = |kind: &'static str, name: &Value| {
        sources.get(&(kind, name.as_str().unwrap_or_default().to_owned())).and_then(Option::as_ref).unwrap_or(&empty)
    };
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        let name = v["name"].as_str().unwrap_or_default();
        let result = if let Some(cm) = v.get("configMap") {
            write_object_volume(pod_dir, v, cm, data("configmap", &cm["name"]))
        } else if let Some(s) = v.get("secret") {
            write_object_volume(pod_dir, v, s, data("secret", &s["secretName"]))
        } else if v.get("emptyDir").is_some() {
            std::fs::create_dir_all(volume_dir(pod_dir, name))
        } else {
            Ok(())
        };
        if let Err(e) = result {
            tracing::warn!(volume = name, error = %e, "volume not prepared");
        }
    }
}

/// A container's volume mounts: where each one's data is on the host.
pub(crate) fn mounts(pod: &Value, container: &Value, pod_dir: &Path) -> Vec<Mount> {
    let mut out = Vec::new();
    for m in container["volumeMounts"].as_array().into_iter().flatten() {
        let (Some(name), Some(at)) = (m["name"].as_str(), m["mountPath"].as_str()) else { continue };
        let volume = pod["spec"]["volumes"].as_array().into_iter().flatten().find(|v| v["name"] == name);
        let Some(volume) = volume else {
            tracing::warn!(mount = at, volume = name, "volume mount names no volume of the pod");
            continue;
        };
        let mut host_path = match volume.pointer("/hostPath/path").and_then(Value::as_str) {
            Some(host) => PathBuf::from(host),
            None => volume_dir(pod_dir, name),
        };
        if let Some(sub) = m["subPath"].as_str().filter(|s| !s.is_empty() && !s.split('/').any(|p| p == "..")) {
            host_path = host_path.join(sub);
        }
        // configMap and secret volumes are read-only, as kubelet mounts them.
        let read_only = m["readOnly"].as_bool().unwrap_or(false)
            || volume.get("configMap").is_some()
            || volume.get("secret").is_some();
        out.push(Mount { host_path, container_path: at.to_owned(), read_only });
    }
    out
}
