//! What becomes of a controller's note before it is written: the note is
//! made into the Event client-go's recorder makes (`source.component` and
//! `reportingComponent` = the controller), and client-go's event correlator
//! decides — spam filter, aggregation of similar messages, counting
//! repeats. The rules themselves are shared with the edge's kubelet
//! ([`edgehive_model::event_correlator`]); this module only makes the
//! cloud's Events.

use edgehive_model::event_correlator;
pub use edgehive_model::event_correlator::Decision;
use edgehive_store::rfc3339;
use serde_json::json;
use time::OffsetDateTime;

use crate::Note;

/// The correlator's memory.
#[derive(Debug, Default)]
pub struct Correlator(event_correlator::Correlator);

impl Correlator {
    /// Tables of `cap` keys each.
    pub fn with_capacity(cap: usize) -> Correlator {
        Correlator(event_correlator::Correlator::with_capacity(cap))
    }

    /// Keys held, the largest table's.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Decides what `note` from `component` becomes at `now`.
    pub fn decide(&mut self, component: &str, note: &Note, now: OffsetDateTime) -> Decision {
        let at = rfc3339(now);
        let o = &note.involved;
        let namespace = if o.namespace.is_empty() { "default" } else { o.namespace.as_str() };
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"namespace": namespace},
            "involvedObject": o.to_value(),
            "reason": note.reason,
            "message": note.message,
            "source": {"component": component},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "type": note.type_(),
            "reportingComponent": component,
            "reportingInstance": "",
        });
        self.0.decide(event, now.into())
    }
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::ObjectRef;

    fn rs() -> ObjectRef {
        ObjectRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            namespace: "default".into(),
            name: "web-5d8f".into(),
            uid: "u-1".into(),
            resource_version: String::new(),
        }
    }

    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_795_000_000).unwrap()
    }

    #[test]
    fn a_first_note_becomes_an_event_as_client_go_writes_it() {
        let mut c = Correlator::default();
        let d = c.decide(
            "replicaset-controller",
            &Note::normal(rs(), "SuccessfulCreate", "Created pod: web-5d8f-abcde"),
            t0(),
        );
        let Decision::Create(ev) = d else { panic!("{d:?}") };
        assert_eq!(ev["metadata"]["name"], format!("web-5d8f.{:x}", t0().unix_timestamp_nanos()));
        assert_eq!(ev["metadata"]["namespace"], "default");
        assert_eq!(ev["involvedObject"]["kind"], "ReplicaSet");
        assert_eq!(ev["involvedObject"]["uid"], "u-1");
        assert_eq!(ev["reason"], "SuccessfulCreate");
        assert_eq!(ev["type"], "Normal");
        assert_eq!(ev["count"], 1);
        assert_eq!(ev["source"]["component"], "replicaset-controller");
        assert_eq!(ev["reportingComponent"], "replicaset-controller");
        assert_eq!(ev["firstTimestamp"], rfc3339(t0()));
        assert_eq!(ev["firstTimestamp"], ev["lastTimestamp"]);
    }

    #[test]
    fn a_repeat_from_the_same_controller_counts_up_another_controllers_does_not() {
        let mut c = Correlator::default();
        let note = Note::warning(rs(), "FailedCreate", "Error creating: quota");
        let Decision::Create(first) = c.decide("replicaset-controller", &note, t0()) else { panic!() };
        let later = t0() + Duration::seconds(30);
        let d = c.decide("replicaset-controller", &note, later);
        let Decision::Count { name, count, last, event, .. } = d else { panic!("{d:?}") };
        assert_eq!(name, first["metadata"]["name"].as_str().unwrap());
        assert_eq!((count, last), (2, rfc3339(later)));
        assert_eq!(event["firstTimestamp"], first["firstTimestamp"]);
        assert!(matches!(c.decide("job-controller", &note, later), Decision::Create(_)));
    }
}
