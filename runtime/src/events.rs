//! Events (events.k8s.io/v1) counted into a series when they repeat, as
//! kube's `Recorder` does: the first is created, a repeat within six
//! minutes patches the first one's `series`. Kube's recorder keeps every
//! Event it published for those six minutes (about 2 KiB each, the largest
//! share of the operator's memory after the metrics when thousands of CRs
//! complete at once); this keeps a hash, a name and a count per Event.

use std::{
    collections::{HashMap, hash_map::DefaultHasher},
    hash::{Hash, Hasher},
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{
        core::v1::ObjectReference,
        events::v1::{Event, EventSeries},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::events::EventType,
};

/// How long a repeat is counted into the first Event (kube's recorder's).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    /// The Events published in the last [`SERIES_WINDOW`] (and some older
    /// ones, until the next pruning), by the hash of what makes two of
    /// them the same.
    published: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    published: HashMap<u64, Published>,
    /// When older Events were last dropped: once per [`PRUNE_EVERY`], not
    /// on each publish, which would walk every Event each time (thousands
    /// of CRs completing at once).
    pruned: Option<Instant>,
}

const PRUNE_EVERY: Duration = Duration::from_secs(30);

struct Published {
    name: String,
    count: i32,
    at: Instant,
}

impl Events {
    /// Events reported by `controller` (`instance`: this replica, else
    /// the controller's name).
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Events {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            published: Mutex::default(),
        }
    }

    /// Publishes an Event about `regarding`, in its namespace: a repeat of
    /// the same type, reason and action about the same object within the
    /// window counts into the first one's series.
    pub async fn publish(
        &self,
        (type_, reason, action): (EventType, &str, &str),
        note: &str,
        regarding: &ObjectReference,
    ) -> kube::Result<()> {
        let key = key((type_, reason, action), regarding);
        let now = Instant::now();
        let repeat = {
            let mut window = self.published.lock().unwrap_or_else(|e| e.into_inner());
            if window
                .pruned
                .is_none_or(|at| now.duration_since(at) >= PRUNE_EVERY)
            {
                (window.published).retain(|_, p| now.duration_since(p.at) < SERIES_WINDOW);
                window.pruned = Some(now);
            }
            (window.published.get(&key))
                .filter(|p| now.duration_since(p.at) < SERIES_WINDOW)
                .map(|p| (p.name.clone(), p.count + 1))
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events = Api::<Event>::namespaced(self.client.clone(), namespace);
        let time = MicroTime(Timestamp::now());
        let (name, count) = match repeat {
            Some((name, count)) => {
                let series = Event {
                    series: Some(EventSeries {
                        count,
                        last_observed_time: time.clone(),
                    }),
                    ..Event::default()
                };
                let patch = Patch::Merge(&series);
                match events.patch(&name, &PatchParams::default(), &patch).await {
                    Ok(_) => (name, count),
                    // Gone already (its TTL, or deleted): a new one.
                    Err(e) if is_not_found(&e) => {
                        let event = self.event((type_, reason, action), note, regarding, time);
                        (events
                            .create(&PostParams::default(), &event)
                            .await?
                            .metadata
                            .name)
                            .map_or((name, 1), |n| (n, 1))
                    }
                    Err(e) => return Err(e),
                }
            }
            None => {
                let event = self.event((type_, reason, action), note, regarding, time);
                let name = event.metadata.name.clone().unwrap_or_default();
                events.create(&PostParams::default(), &event).await?;
                (name, 1)
            }
        };
        let published = Published {
            name,
            count,
            at: now,
        };
        let mut window = self.published.lock().unwrap_or_else(|e| e.into_inner());
        window.published.insert(key, published);
        Ok(())
    }

    /// A new Event, named as kube's recorder names them.
    fn event(
        &self,
        (type_, reason, action): (EventType, &str, &str),
        note: &str,
        regarding: &ObjectReference,
        time: MicroTime,
    ) -> Event {
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object, time.0.as_nanosecond())),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note.to_string()),
            event_time: Some(time),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(type_name(type_).to_string()),
            ..Event::default()
        }
    }
}

/// `<object>.<time in hex>`, as kube's recorder names Events, with the
/// object's name cut so the whole stays within the 253 characters of a
/// name (a CR may use them all; its Events would be refused) and ends on
/// a letter or digit.
fn event_name(object: &str, nanos: i128) -> String {
    let suffix = format!(".{nanos:x}");
    let room = 253usize.saturating_sub(suffix.len());
    let cut = object.get(..room.min(object.len())).unwrap_or(object);
    format!("{}{suffix}", cut.trim_end_matches(['-', '.']))
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// What makes two Events the same: their type, reason and action, and
/// the object they are about.
fn key((type_, reason, action): (EventType, &str, &str), regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    (type_name(type_), reason, action).hash(&mut hasher);
    let object = (
        &regarding.api_version,
        &regarding.kind,
        &regarding.namespace,
        &regarding.name,
        &regarding.uid,
        &regarding.field_path,
    );
    object.hash(&mut hasher);
    hasher.finish()
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_of_an_object_with_the_longest_name_has_a_valid_name() {
        let nanos = 1_764_000_000_000_000_000_i128;
        assert_eq!(event_name("db", nanos), format!("db.{nanos:x}"));
        let longest = format!("{}-{}", "a".repeat(233), "b".repeat(19));
        let name = event_name(&longest, nanos);
        assert_eq!(name.len(), 253, "{name}");
        assert!(name.starts_with(&"a".repeat(233)), "{name}");
        // Cut right after the dash: the dash goes too.
        assert_eq!(
            event_name(&format!("{}-{}", "a".repeat(235), "b".repeat(17)), nanos),
            format!("{}.{nanos:x}", "a".repeat(235))
        );
    }

    #[test]
    fn the_same_event_about_another_object_or_of_another_reason_is_another() {
        let object = |name: &str| ObjectReference {
            kind: Some("Postgres".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        };
        let warning = (EventType::Warning, "Failed", "Reconcile-0000abcd");
        assert_eq!(key(warning, &object("a")), key(warning, &object("a")));
        assert_ne!(key(warning, &object("a")), key(warning, &object("b")));
        let normal = (EventType::Normal, "Failed", "Reconcile-0000abcd");
        assert_ne!(key(warning, &object("a")), key(normal, &object("a")));
        let other_note = (EventType::Warning, "Failed", "Reconcile-0000abce");
        assert_ne!(key(warning, &object("a")), key(other_note, &object("a")));
    }
}
