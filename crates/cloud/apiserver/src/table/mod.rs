//! Server-side `Table` rendering for `kubectl get`: the columns and cells Kubernetes' own printers produce.
//!
//! kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever columns the server
//! declares, upper-casing their names and hiding those of priority 1 unless `-o wide` is given. Kubernetes renders
//! every row with the wide columns included (its table convertor always asks its printers for `Wide: true`), so
//! [`cells`] always returns one cell per entry of [`columns`].
//!
//! The rules follow `pkg/printers/internalversion/printers.go` of Kubernetes 1.32 (built-in kinds, including the
//! apps/v1 and batch/v1 workloads) and the apiextensions table convertor (custom resources without
//! `additionalPrinterColumns`). Times are rendered as Kubernetes' `duration.HumanDuration` relative to a `now` the
//! caller passes in; nothing here reads the clock.
//!
//! **Invariant:** no input makes these functions panic. A missing or mistyped field reads as absent and prints
//! the way Kubernetes prints an absent field (`<none>`, `<unknown>`, `0`, or an empty string), or as the default
//! the API server would have filled in (a Service's type, a Deployment's replicas).

mod columns;
mod objects;
mod pod;
mod selector;
mod workloads;

use serde_json::{Map, Value, json};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// One column of a Kubernetes `Table` (meta.k8s.io/v1 TableColumnDefinition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// The column name as Kubernetes spells it ("Name", "Port(s)"); kubectl prints it upper-cased.
    pub name: &'static str,
    /// The JSON `type`: "string", "integer", "number", "boolean" or "date".
    pub kind: &'static str,
    /// The JSON `format`: "name" for the column holding the object's name, else "".
    pub format: &'static str,
    /// Human-readable description of the column (the documentation of the API field it shows).
    pub description: &'static str,
    /// 0 for columns shown by default, 1 for those kubectl shows only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// The column as a `TableColumnDefinition` JSON object (`name`, `type`, `format`, `description`, `priority`).
    ///
    /// ```
    /// let age = edgehive_apiserver::table::columns("devices.kubeedge.io", "Device")[1].definition();
    /// assert_eq!(age["name"], "Age");
    /// assert_eq!(age["type"], "date");
    /// ```
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// Which printer renders a group/kind; shared by [`columns`] and [`cells`] so the two always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Printer {
    Pod,
    Node,
    Namespace,
    ConfigMap,
    Secret,
    Service,
    Endpoints,
    Event,
    Lease,
    Deployment,
    ReplicaSet,
    DaemonSet,
    StatefulSet,
    ControllerRevision,
    Job,
    CronJob,
    PodDisruptionBudget,
    CustomResourceDefinition,
    /// A custom resource (KubeEdge's Device, DeviceModel, ObjectSync, ...) or any kind without a printer.
    CustomResource,
}

impl Printer {
    fn of(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Pod") => Self::Pod,
            ("", "Node") => Self::Node,
            ("", "Namespace") => Self::Namespace,
            ("", "ConfigMap") => Self::ConfigMap,
            ("", "Secret") => Self::Secret,
            ("", "Service") => Self::Service,
            ("", "Endpoints") => Self::Endpoints,
            // events.k8s.io Events are printed from their stored core form, as Kubernetes prints both
            // versions from the internal type.
            ("" | "events.k8s.io", "Event") => Self::Event,
            ("coordination.k8s.io", "Lease") => Self::Lease,
            ("apps", "Deployment") => Self::Deployment,
            ("apps", "ReplicaSet") => Self::ReplicaSet,
            ("apps", "DaemonSet") => Self::DaemonSet,
            ("apps", "StatefulSet") => Self::StatefulSet,
            ("apps", "ControllerRevision") => Self::ControllerRevision,
            ("batch", "Job") => Self::Job,
            ("batch", "CronJob") => Self::CronJob,
            ("policy", "PodDisruptionBudget") => Self::PodDisruptionBudget,
            ("apiextensions.k8s.io", "CustomResourceDefinition") => Self::CustomResourceDefinition,
            // devices.kubeedge.io Device/DeviceModel and reliablesyncs.kubeedge.io ObjectSync/ClusterObjectSync
            // declare no additionalPrinterColumns, so Kubernetes serves them the CRD default table.
            _ => Self::CustomResource,
        }
    }
}

/// The columns for objects of `group`/`kind` (group "" = core). Unknown kinds get the default custom-resource
/// table: Name + Age (as Kubernetes' default table convertor / CRD handler would show them).
///
/// ```
/// let names: Vec<_> = edgehive_apiserver::table::columns("", "Pod").iter().map(|c| c.name).collect();
/// assert_eq!(names[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
/// ```
pub fn columns(group: &str, kind: &str) -> &'static [Column] {
    match Printer::of(group, kind) {
        Printer::Pod => columns::POD,
        Printer::Node => columns::NODE,
        Printer::Namespace => columns::NAMESPACE,
        Printer::ConfigMap => columns::CONFIG_MAP,
        Printer::Secret => columns::SECRET,
        Printer::Service => columns::SERVICE,
        Printer::Endpoints => columns::ENDPOINTS,
        Printer::Event => columns::EVENT,
        Printer::Lease => columns::LEASE,
        Printer::Deployment => columns::DEPLOYMENT,
        Printer::ReplicaSet => columns::REPLICA_SET,
        Printer::DaemonSet => columns::DAEMON_SET,
        Printer::StatefulSet => columns::STATEFUL_SET,
        Printer::ControllerRevision => columns::CONTROLLER_REVISION,
        Printer::Job => columns::JOB,
        Printer::CronJob => columns::CRON_JOB,
        Printer::PodDisruptionBudget => columns::POD_DISRUPTION_BUDGET,
        Printer::CustomResourceDefinition => columns::CUSTOM_RESOURCE_DEFINITION,
        Printer::CustomResource => columns::CUSTOM_RESOURCE,
    }
}

/// The cells of one row, in the order of `columns(group, kind)`, as JSON values. `now` is the current time
/// (passed in, never read inside, so tests are deterministic).
///
/// ```
/// use serde_json::json;
/// let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::minutes(3);
/// let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": "1970-01-01T00:00:00Z"}, "data": {"a": "1"}});
/// let row = edgehive_apiserver::table::cells("", "ConfigMap", &cm, now);
/// assert_eq!(row, [json!("cfg"), json!(1), json!("3m")]);
/// ```
pub fn cells(group: &str, kind: &str, obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    match Printer::of(group, kind) {
        Printer::Pod => pod::cells(obj, now),
        Printer::Node => objects::node(obj, now),
        Printer::Namespace => objects::namespace(obj, now),
        Printer::ConfigMap => objects::config_map(obj, now),
        Printer::Secret => objects::secret(obj, now),
        Printer::Service => objects::service(obj, now),
        Printer::Endpoints => objects::endpoints(obj, now),
        Printer::Event => objects::event(obj, now),
        Printer::Lease => objects::lease(obj, now),
        Printer::Deployment => workloads::deployment(obj, now),
        Printer::ReplicaSet => workloads::replica_set(obj, now),
        Printer::DaemonSet => workloads::daemon_set(obj, now),
        Printer::StatefulSet => workloads::stateful_set(obj, now),
        Printer::ControllerRevision => workloads::controller_revision(obj, now),
        Printer::Job => workloads::job(obj, now),
        Printer::CronJob => workloads::cron_job(obj, now),
        Printer::PodDisruptionBudget => workloads::pod_disruption_budget(obj, now),
        Printer::CustomResourceDefinition => {
            vec![name(obj), field(obj, &["metadata", "creationTimestamp"]).cloned().unwrap_or(Value::Null)]
        }
        Printer::CustomResource => objects::custom_resource(obj, now),
    }
}

/// The largest span a Go `time.Duration` holds, in whole seconds (about 292 years). Kubernetes computes ages as
/// Go durations, which saturate there, so longer spans print as that.
const GO_DURATION_MAX_SECONDS: i64 = i64::MAX / 1_000_000_000;

/// Kubernetes' short human duration ("0s", "59s", "2m3s", "3h", "5d", "2y"...), as duration.HumanDuration.
///
/// About two significant figures: seconds below two minutes, minutes and seconds below ten minutes, minutes below
/// three hours, hours and minutes below eight hours, hours below two days, days and hours below eight days, days
/// below two years, years and days below eight years, then years. A span up to a second and a bit in the future
/// (clock skew) reads "0s"; further in the future reads "<invalid>".
///
/// ```
/// use time::Duration;
/// use edgehive_apiserver::table::human_duration;
/// assert_eq!(human_duration(Duration::seconds(190)), "3m10s");
/// assert_eq!(human_duration(Duration::hours(49)), "2d1h");
/// assert_eq!(human_duration(Duration::seconds(-5)), "<invalid>");
/// ```
pub fn human_duration(d: Duration) -> String {
    // Whole seconds, truncated toward zero like Go's int(d.Seconds()).
    let seconds = d.whole_seconds().clamp(-GO_DURATION_MAX_SECONDS, GO_DURATION_MAX_SECONDS);
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 2 * 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    }
    if minutes < 3 * 60 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_remainder(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return with_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// "3m" or "3m10s": the major unit, then the minor one unless it is zero.
fn with_remainder(major: i64, major_unit: &str, minor: i64, minor_unit: &str) -> String {
    if minor == 0 { format!("{major}{major_unit}") } else { format!("{major}{major_unit}{minor}{minor_unit}") }
}

// --- Reading fields out of an untyped object. Every reader treats a missing, null or mistyped field as absent. ---

/// The value at `path`, or `None` when a step is missing or the value is null.
fn field<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let found = path.iter().try_fold(obj, |cur, key| cur.get(*key))?;
    (!found.is_null()).then_some(found)
}

/// The string at `path`, or "" (Go's zero value) when absent.
fn text<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    field(obj, path).and_then(Value::as_str).unwrap_or("")
}

/// The array at `path`, or an empty slice when absent.
fn list<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    field(obj, path).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The object at `path`, if there is one.
fn object<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    field(obj, path).and_then(Value::as_object)
}

/// The integer at `path`, or 0 when absent. A float (as some encoders write whole numbers) is truncated.
fn int(obj: &Value, path: &[&str]) -> i64 {
    opt_int(obj, path).unwrap_or(0)
}

/// The integer at `path`, `None` when absent (Go's nil `*int32`). A float is truncated.
fn opt_int(obj: &Value, path: &[&str]) -> Option<i64> {
    field(obj, path).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

/// The boolean at `path`, or false when absent.
fn flag(obj: &Value, path: &[&str]) -> bool {
    field(obj, path).and_then(Value::as_bool).unwrap_or(false)
}

/// Unix time of Go's zero `time.Time` (0001-01-01T00:00:00Z), which Kubernetes treats as "not set".
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Parses an RFC 3339 timestamp (seconds or `MicroTime` precision); `None` for "", "null", unparseable text and
/// Go's zero time, all of which Kubernetes prints as unset.
fn parse_time(raw: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(raw, &Rfc3339).ok().filter(|t| !is_go_zero(*t))
}

/// Whether `t` is Go's zero `time.Time`, Kubernetes' "not set".
fn is_go_zero(t: OffsetDateTime) -> bool {
    t.unix_timestamp() == GO_ZERO_TIME_UNIX && t.nanosecond() == 0
}

/// The timestamp at `path`, if set.
fn timestamp(obj: &Value, path: &[&str]) -> Option<OffsetDateTime> {
    parse_time(text(obj, path))
}

/// The timestamp at an optional (`*metav1.Time`) field: `Some` whenever the field holds a timestamp, Go's zero time
/// included, as Kubernetes' nil checks see it; `None` when absent or not a timestamp.
fn present_time(obj: &Value, path: &[&str]) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text(obj, path), &Rfc3339).ok()
}

/// Elapsed time since `t` as Kubernetes' `translateTimestampSince` prints it: "<unknown>" when unset.
fn since(t: Option<OffsetDateTime>, now: OffsetDateTime) -> String {
    t.map_or_else(|| "<unknown>".to_owned(), |t| human_duration(now - t))
}

/// The AGE cell of the built-in printers.
fn age(obj: &Value, now: OffsetDateTime) -> Value {
    since(timestamp(obj, &["metadata", "creationTimestamp"]), now).into()
}

/// The NAME cell.
fn name(obj: &Value) -> Value {
    text(obj, &["metadata", "name"]).into()
}

/// `s`, or `placeholder` when `s` is empty.
fn or(s: &str, placeholder: &str) -> String {
    if s.is_empty() { placeholder.to_owned() } else { s.to_owned() }
}

/// A label map as `labels.FormatLabels` prints it: "k=v" pairs sorted by key, comma-separated, "<none>" if empty.
/// Non-string values (invalid in Kubernetes) are skipped.
fn format_labels(map: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<(&str, &str)> =
        map.into_iter().flatten().filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v))).collect();
    if pairs.is_empty() {
        return "<none>".to_owned();
    }
    // Sorted here rather than relying on the map: serde_json keeps insertion order when `preserve_order` is on.
    pairs.sort_unstable();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: i64) -> Duration {
        Duration::milliseconds(n)
    }

    const SEC: i64 = 1000;
    const MIN: i64 = 60 * SEC;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;
    const YEAR: i64 = 365 * DAY;

    /// Kubernetes' own expectations (duration_test.go: TestHumanDuration and TestHumanDurationBoundaries).
    #[test]
    fn human_duration_matches_kubernetes_table() {
        let cases: &[(Duration, &str)] = &[
            (ms(SEC), "1s"),
            (ms(70 * SEC), "70s"),
            (ms(190 * SEC), "3m10s"),
            (ms(70 * MIN), "70m"),
            (ms(47 * HOUR), "47h"),
            (ms(49 * HOUR), "2d1h"),
            (ms((8 * 24 + 2) * HOUR), "8d"),
            (ms(367 * DAY), "367d"),
            (ms(2 * YEAR + 25 * HOUR), "2y1d"),
            (ms(8 * YEAR + 2 * HOUR), "8y"),
            (ms(-2 * SEC), "<invalid>"),
            (Duration::seconds(-2) + Duration::nanoseconds(1), "0s"),
            (Duration::ZERO, "0s"),
            (ms(SEC - 1), "0s"),
            (ms(2 * MIN - 1), "119s"),
            (ms(2 * MIN), "2m"),
            (ms(2 * MIN + SEC), "2m1s"),
            (ms(10 * MIN - 1), "9m59s"),
            (ms(10 * MIN), "10m"),
            (ms(10 * MIN + SEC), "10m"),
            (ms(3 * HOUR - 1), "179m"),
            (ms(3 * HOUR), "3h"),
            (ms(3 * HOUR + MIN), "3h1m"),
            (ms(8 * HOUR - 1), "7h59m"),
            (ms(8 * HOUR), "8h"),
            (ms(8 * HOUR + 59 * MIN), "8h"),
            (ms(2 * DAY - 1), "47h"),
            (ms(2 * DAY), "2d"),
            (ms(2 * DAY + HOUR), "2d1h"),
            (ms(8 * DAY - 1), "7d23h"),
            (ms(8 * DAY), "8d"),
            (ms(8 * DAY + 23 * HOUR), "8d"),
            (ms(2 * YEAR - 1), "729d"),
            (ms(2 * YEAR), "2y"),
            (ms(2 * YEAR + 23 * HOUR), "2y"),
            (ms(2 * YEAR + 23 * HOUR + 59 * MIN), "2y"),
            (ms(2 * YEAR + DAY - 1), "2y"),
            (ms(2 * YEAR + DAY), "2y1d"),
            (ms(3 * YEAR), "3y"),
            (ms(7 * YEAR), "7y"),
            (ms(8 * YEAR - 1), "7y364d"),
            (ms(8 * YEAR), "8y"),
            (ms(8 * YEAR + 364 * DAY), "8y"),
            (ms(9 * YEAR), "9y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(*d), *want, "human_duration({d})");
        }
    }

    #[test]
    fn human_duration_extremes_do_not_overflow() {
        assert_eq!(human_duration(Duration::MAX), "292y");
        assert_eq!(human_duration(Duration::MIN), "<invalid>");
        assert_eq!(human_duration(ms(5 * SEC)), "5s");
        assert_eq!(human_duration(ms(59 * SEC)), "59s");
        assert_eq!(human_duration(ms(10 * DAY)), "10d");
    }

    #[test]
    fn every_kind_has_one_cell_per_column_even_for_garbage() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let kinds = [
            ("", "Pod"),
            ("", "Node"),
            ("", "Namespace"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "Service"),
            ("", "Endpoints"),
            ("", "Event"),
            ("coordination.k8s.io", "Lease"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "DaemonSet"),
            ("apps", "StatefulSet"),
            ("apps", "ControllerRevision"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("policy", "PodDisruptionBudget"),
            ("devices.kubeedge.io", "Device"),
            ("devices.kubeedge.io", "DeviceModel"),
            ("reliablesyncs.kubeedge.io", "ObjectSync"),
            ("reliablesyncs.kubeedge.io", "ClusterObjectSync"),
            ("example.com", "Widget"),
        ];
        let garbage = [
            json!(null),
            json!({}),
            json!(42),
            json!("pod"),
            json!({"metadata": 1, "spec": [], "status": "x"}),
            json!({"metadata": {"name": 7, "creationTimestamp": "yesterday", "labels": [1]},
                   "spec": {"containers": {}, "initContainers": [1, null], "ports": [{"port": "x"}], "type": 3},
                   "status": {"containerStatuses": [null, 3, {"state": []}], "initContainerStatuses": [{}],
                              "conditions": "Ready", "addresses": [{}], "podIPs": [3]},
                   "subsets": [{"addresses": [{}], "ports": [{}]}], "data": "x", "series": {"count": "3"}}),
            json!({"metadata": {"ownerReferences": [null, {"controller": true, "apiVersion": 7}],
                                "deletionTimestamp": 1},
                   "spec": {"replicas": "3", "selector": {"matchLabels": [], "matchExpressions": {}},
                            "template": {"spec": {"containers": [null, {"name": 1}], "nodeSelector": []}},
                            "jobTemplate": [], "completions": true, "timeZone": 3, "suspend": "yes"},
                   "status": {"conditions": [null, {"type": 5}], "active": {}, "startTime": [],
                              "lastScheduleTime": "never", "readyReplicas": -1}}),
        ];
        for (group, kind) in kinds {
            let want = columns(group, kind).len();
            for obj in &garbage {
                assert_eq!(cells(group, kind, obj, now).len(), want, "{group}/{kind} {obj}");
            }
        }
    }

    #[test]
    fn only_known_kinds_get_printers() {
        assert_eq!(Printer::of("", "Pod"), Printer::Pod);
        // Same kind name in another group is a different resource.
        assert_eq!(Printer::of("example.com", "Pod"), Printer::CustomResource);
        assert_eq!(Printer::of("", "Lease"), Printer::CustomResource);
        assert_eq!(Printer::of("devices.kubeedge.io", "Device"), Printer::CustomResource);
        assert_eq!(Printer::of("apps", "Deployment"), Printer::Deployment);
        assert_eq!(Printer::of("batch", "CronJob"), Printer::CronJob);
        // The old extensions/v1beta1 and batch/v1beta1 groups are not served here.
        assert_eq!(Printer::of("extensions", "Deployment"), Printer::CustomResource);
        assert_eq!(Printer::of("", "Job"), Printer::CustomResource);
    }

    #[test]
    fn column_definition_json() {
        let restarts = columns("", "Pod")[3].definition();
        assert_eq!(restarts["name"], "Restarts");
        assert_eq!(restarts["type"], "string");
        assert_eq!(restarts["format"], "");
        assert_eq!(restarts["priority"], 0);
        let name = columns("", "Event")[9].definition();
        assert_eq!(
            (name["name"].as_str(), name["format"].as_str(), name["priority"].as_i64()),
            (Some("Name"), Some("name"), Some(1))
        );
    }

    #[test]
    fn timestamps_unset_or_invalid_read_as_unknown() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(since(parse_time("0001-01-01T00:00:00Z"), now), "<unknown>");
        assert_eq!(since(parse_time(""), now), "<unknown>");
        assert_eq!(since(parse_time("not a time"), now), "<unknown>");
        assert_eq!(since(parse_time("1969-12-31T23:59:00.5+00:00"), now), "59s");
    }

    #[test]
    fn labels_are_sorted_and_empty_is_none() {
        let labels = json!({"b": "2", "a": "1", "c": ""});
        assert_eq!(format_labels(labels.as_object()), "a=1,b=2,c=");
        assert_eq!(format_labels(json!({}).as_object()), "<none>");
        assert_eq!(format_labels(None), "<none>");
    }
}
