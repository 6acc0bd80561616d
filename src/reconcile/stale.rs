//! The controller's cache shows the operator's own writes a moment late.
//! A reconcile that starts from a cached CR older than the operator's last
//! write to it (a requeue, or an owned Secret's event that came before the
//! write's echo) would write again what was just written, so it waits for
//! the cache to catch up: the stale-cache mitigation of Kubernetes'
//! controllers (KEP-5647). Resource versions are compared as Kubernetes
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

/// The version each CR's last write of this process made, and when.
#[derive(Default)]
pub struct LastWrites(Mutex<HashMap<ObjectKey, (u64, Instant)>>);

impl LastWrites {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (u64, Instant)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A write of this process made `version` of `object`.
    pub fn note(&self, object: ObjectKey, version: &str) {
        self.note_at(object, version, Instant::now());
    }

    fn note_at(&self, object: ObjectKey, version: &str, at: Instant) {
        if let Some(version) = comparable(version) {
            self.map().insert(object, (version, at));
        }
    }

    /// Whether the cached `version` of `object` is older than the last
    /// write, which was less than [`CATCH_UP_LIMIT`] ago. A cache that
    /// caught up, or a write too old to wait for, is forgotten.
    pub fn cache_behind(&self, object: &ObjectKey, version: Option<&str>) -> bool {
        self.behind_at(object, version, Instant::now())
    }

    fn behind_at(&self, object: &ObjectKey, version: Option<&str>, now: Instant) -> bool {
        let mut map = self.map();
        let Some(&(written, at)) = map.get(object) else {
            return false;
        };
        let cached = version.and_then(comparable);
        let behind = cached.is_some_and(|c| c < written)
            && now.saturating_duration_since(at) < CATCH_UP_LIMIT;
        if !behind {
            map.remove(object);
        }
        behind
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
        assert!(!writes.cache_behind(&cm("db"), Some("5")), "never written");
        writes.note(cm("db"), "9");
        assert!(writes.cache_behind(&cm("db"), Some("8")));
        assert!(
            !writes.cache_behind(&cm("db"), Some("10")),
            "caught up, and past it"
        );
        assert!(
            !writes.cache_behind(&cm("db"), Some("8")),
            "forgotten once caught up"
        );
        writes.note(cm("db"), "12");
        assert!(
            !writes.cache_behind(&cm("other"), Some("1")),
            "another object"
        );
        // Versions compare as numbers, not as text.
        writes.note(cm("db"), "100");
        assert!(writes.cache_behind(&cm("db"), Some("99")));
        writes.forget(&cm("db"));
        assert!(
            !writes.cache_behind(&cm("db"), Some("99")),
            "the CR is gone"
        );
    }

    #[test]
    fn a_version_that_never_comes_holds_the_reconcile_for_the_limit_only() {
        let writes = LastWrites::default();
        // An etcd restore took the CR back to version 40.
        let written = Instant::now();
        writes.note_at(cm("db"), "5000", written);
        let almost = written + CATCH_UP_LIMIT - Duration::from_millis(1);
        assert!(writes.behind_at(&cm("db"), Some("40"), almost));
        assert!(!writes.behind_at(&cm("db"), Some("40"), written + CATCH_UP_LIMIT));
        assert!(
            !writes.behind_at(&cm("db"), Some("40"), written),
            "forgotten"
        );
    }

    #[test]
    fn versions_that_are_not_numbers_never_hold_a_reconcile() {
        let writes = LastWrites::default();
        writes.note(cm("db"), "9");
        assert!(
            !writes.cache_behind(&cm("db"), Some("08")),
            "a leading zero"
        );
        writes.note(cm("db"), "9");
        assert!(!writes.cache_behind(&cm("db"), Some("abc")));
        writes.note(cm("db"), "9");
        assert!(!writes.cache_behind(&cm("db"), None));
        writes.note(cm("db"), "x9");
        writes.note(cm("db"), "09");
        assert!(
            writes.map().is_empty(),
            "versions that are not numbers are not noted"
        );
    }
}
