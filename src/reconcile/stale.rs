//! The controller's cache shows the operator's own writes a moment late.
//! A reconcile that starts from a cached CR older than the operator's last
//! write to it (a requeue, or an owned Secret's event that came before the
//! write's echo) would write again what was just written, so it waits for
//! the cache to catch up: the stale-cache mitigation of Kubernetes'
//! controllers (KEP-5647). The watch showing the write wakes it
//! ([`LastWrites::seen`]), so the wait costs the queue nothing; a
//! reconcile that started from a version the watch has passed already
//! runs again at once. Resource versions are compared as Kubernetes
//! defines them since 1.35 (KEP-5504): decimal integers, later is larger.
//!
//! The wait is bounded: after an etcd restore rewound the versions, the
//! cache never reaches the noted one, and the CR is reconciled anyway once
//! [`CATCH_UP_LIMIT`] has passed since the write.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use kube::{Resource, api::DynamicObject, runtime::reflector::ObjectRef};

/// A CR, whatever its kind: the key of per-object state.
pub type ObjectKey = ObjectRef<DynamicObject>;

/// The key of `obj`.
pub fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectKey {
    ObjectRef::from_obj(obj).erase()
}

/// How long a reconcile waits at most for the cache to show the
/// operator's last write: echoes take milliseconds, a loaded API server
/// seconds.
pub const CATCH_UP_LIMIT: Duration = Duration::from_secs(10);

/// What the watch has shown of a CR since this process last wrote it.
struct Entry {
    /// The version the write made, and when.
    written: u64,
    at: Instant,
    /// The newest version the watch has shown since.
    seen: u64,
    /// A reconcile found the cache behind and waits for the watch to show
    /// the write ([`LastWrites::seen`] wakes it).
    waiting: bool,
}

/// What the cache holds of a CR, against the operator's last write to it.
#[derive(Debug, PartialEq, Eq)]
pub enum Cached {
    /// Nothing to wait for.
    Current,
    /// Older than the last write, which the watch has not shown yet: wait
    /// for it (a wake comes when it does).
    Behind,
    /// Older than the last write, which the watch has shown meanwhile: the
    /// cache holds a newer version than this reconcile started from, so
    /// run again now.
    Superseded,
}

/// The version each CR's last write of this process made, and when.
#[derive(Default)]
pub struct LastWrites(Mutex<HashMap<ObjectKey, Entry>>);

impl LastWrites {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A write of this process made `version` of `object`.
    pub fn note(&self, object: ObjectKey, version: &str) {
        self.note_at(object, version, Instant::now());
    }

    fn note_at(&self, object: ObjectKey, version: &str, at: Instant) {
        if let Some(written) = comparable(version) {
            let entry = Entry {
                written,
                at,
                seen: 0,
                waiting: false,
            };
            self.map().insert(object, entry);
        }
    }

    /// Whether the cached `version` of `object` is older than the last
    /// write, which was less than [`CATCH_UP_LIMIT`] ago. A cache that
    /// caught up, or a write too old to wait for, is forgotten.
    pub fn cache_behind(&self, object: &ObjectKey, version: Option<&str>) -> Cached {
        self.behind_at(object, version, Instant::now())
    }

    fn behind_at(&self, object: &ObjectKey, version: Option<&str>, now: Instant) -> Cached {
        let mut map = self.map();
        let Some(entry) = map.get_mut(object) else {
            return Cached::Current;
        };
        let cached = version.and_then(comparable);
        let behind = cached.is_some_and(|c| c < entry.written)
            && now.saturating_duration_since(entry.at) < CATCH_UP_LIMIT;
        if !behind {
            map.remove(object);
            return Cached::Current;
        }
        if entry.seen >= entry.written {
            // Once: should the cache still hold the old version (a relist
            // took it back), the next look waits as `Behind` instead of
            // running again at once, over and over.
            entry.seen = 0;
            return Cached::Superseded;
        }
        entry.waiting = true;
        Cached::Behind
    }

    /// The watch shows `version` of `object`; true when a reconcile waits
    /// for it (the write it waited for is now in the cache), once.
    pub fn seen(&self, object: &ObjectKey, version: Option<&str>) -> bool {
        let Some(version) = version.and_then(comparable) else {
            return false;
        };
        let mut map = self.map();
        let Some(entry) = map.get_mut(object) else {
            return false;
        };
        entry.seen = entry.seen.max(version);
        let wake = entry.waiting && entry.seen >= entry.written;
        if wake {
            entry.waiting = false;
        }
        wake
    }

    /// `object` is gone.
    pub fn forget(&self, object: &ObjectKey) {
        self.map().remove(object);
    }
}

/// A resourceVersion as a number (KEP-5504: decimal digits without a
/// leading zero); `None` for anything else, which never holds a reconcile.
fn comparable(version: &str) -> Option<u64> {
    if version.starts_with('0') || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    version.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str) -> ObjectKey {
        ObjectRef::<ConfigMap>::new(name).within("app").erase()
    }

    #[test]
    fn a_cache_behind_the_last_write_waits_until_it_catches_up() {
        let writes = LastWrites::default();
        let behind = |v: &str| writes.cache_behind(&cm("db"), Some(v)) == Cached::Behind;
        assert!(!behind("5"), "never written");
        writes.note(cm("db"), "9");
        assert!(behind("8"));
        assert!(!behind("10"), "caught up, and past it");
        assert!(!behind("8"), "forgotten once caught up");
        writes.note(cm("db"), "12");
        let other = writes.cache_behind(&cm("other"), Some("1"));
        assert_eq!(other, Cached::Current, "another object");
        // Versions compare as numbers, not as text.
        writes.note(cm("db"), "100");
        assert!(behind("99"));
        writes.forget(&cm("db"));
        assert!(!behind("99"), "the CR is gone");
    }

    #[test]
    fn the_watch_showing_the_write_wakes_the_reconcile_waiting_for_it_once() {
        let writes = LastWrites::default();
        let db = cm("db");
        assert!(!writes.seen(&db, Some("9")), "never written");
        writes.note(db.clone(), "9");
        assert!(!writes.seen(&db, Some("8")), "nobody waits yet");
        assert_eq!(writes.cache_behind(&db, Some("8")), Cached::Behind);
        assert!(!writes.seen(&db, Some("8")), "not the write yet");
        assert!(!writes.seen(&cm("other"), Some("9")), "another object");
        assert!(writes.seen(&db, Some("9")), "the write: wake");
        assert!(!writes.seen(&db, Some("10")), "woken once");
        // The woken reconcile reads the cache, which holds the write.
        assert_eq!(writes.cache_behind(&db, Some("10")), Cached::Current);
    }

    #[test]
    fn a_reconcile_from_an_old_version_the_watch_has_passed_runs_again_now() {
        let writes = LastWrites::default();
        let db = cm("db");
        writes.note(db.clone(), "9");
        // The echo came before any reconcile waited: no wake, but a
        // reconcile that started from version 8 must not wait for one.
        assert!(!writes.seen(&db, Some("9")));
        assert_eq!(writes.cache_behind(&db, Some("8")), Cached::Superseded);
        // Still version 8 (a relist took the cache back): no second
        // immediate run, a wait for the wake.
        assert_eq!(writes.cache_behind(&db, Some("8")), Cached::Behind);
        assert_eq!(writes.cache_behind(&db, Some("9")), Cached::Current);
    }

    #[test]
    fn a_version_that_never_comes_holds_the_reconcile_for_the_limit_only() {
        let writes = LastWrites::default();
        // An etcd restore took the CR back to version 40.
        let written = Instant::now();
        writes.note_at(cm("db"), "5000", written);
        let almost = written + CATCH_UP_LIMIT - Duration::from_millis(1);
        let at = |when| writes.behind_at(&cm("db"), Some("40"), when);
        assert_eq!(at(almost), Cached::Behind);
        assert_eq!(at(written + CATCH_UP_LIMIT), Cached::Current);
        assert_eq!(at(written), Cached::Current, "forgotten");
    }

    #[test]
    fn versions_that_are_not_numbers_never_hold_a_reconcile() {
        let writes = LastWrites::default();
        let current = |v: Option<&str>| writes.cache_behind(&cm("db"), v) == Cached::Current;
        writes.note(cm("db"), "9");
        assert!(current(Some("08")), "a leading zero");
        writes.note(cm("db"), "9");
        assert!(current(Some("abc")));
        writes.note(cm("db"), "9");
        assert!(current(None));
        writes.note(cm("db"), "x9");
        writes.note(cm("db"), "09");
        assert!(
            writes.map().is_empty(),
            "versions that are not numbers are not noted"
        );
    }
}
