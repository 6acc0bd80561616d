//! The controller's cache shows the operator's own writes a moment late.
//! A reconcile that starts from a cached CR older than the operator's last
//! write to it (a requeue, or an owned Secret's event that came before the
//! write's echo) would write again what was just written, so it waits for
//! the cache to catch up: the stale-cache mitigation of Kubernetes'
//! controllers (KEP-5647). The watch showing the write wakes it
//! ([`LastWrite::seen`]), so the wait costs the queue nothing; a
//! reconcile that started from a version the watch has passed already
//! runs again at once. Resource versions are compared as Kubernetes
//! defines them since 1.35 (KEP-5504): decimal integers, later is larger.
//!
//! The wait is bounded: after an etcd restore rewound the versions, the
//! cache never reaches the noted one, and the CR is reconciled anyway once
//! [`CATCH_UP_LIMIT`] has passed since the write.

use std::time::{Duration, Instant};

use kube::{Resource, api::DynamicObject, runtime::reflector::ObjectRef};

use crate::cache::version_number;

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
    /// the write ([`LastWrite::seen`] wakes it).
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

/// The version a CR's last write of this process made, and when, until
/// the cache shows it (held in the CR's entry of the reconcile state).
#[derive(Default)]
pub struct LastWrite(Option<Entry>);

impl LastWrite {
    /// A write of this process made `version` of the CR.
    pub fn note(&mut self, version: &str) {
        self.note_at(version, Instant::now());
    }

    fn note_at(&mut self, version: &str, at: Instant) {
        if let Some(written) = version_number(version) {
            self.0 = Some(Entry {
                written,
                at,
                seen: 0,
                waiting: false,
            });
        }
    }

    /// Whether the cached `version` of the CR is older than the last
    /// write, which was less than [`CATCH_UP_LIMIT`] ago. A cache that
    /// caught up, or a write too old to wait for, is forgotten.
    pub fn cache_behind(&mut self, version: Option<&str>) -> Cached {
        self.behind_at(version, Instant::now())
    }

    fn behind_at(&mut self, version: Option<&str>, now: Instant) -> Cached {
        let Some(entry) = &mut self.0 else {
            return Cached::Current;
        };
        let cached = version.and_then(version_number);
        let behind = cached.is_some_and(|c| c < entry.written)
            && now.saturating_duration_since(entry.at) < CATCH_UP_LIMIT;
        if !behind {
            self.0 = None;
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

    /// The watch shows `version` of the CR; true when a reconcile waits
    /// for it (the write it waited for is now in the cache), once.
    pub fn seen(&mut self, version: Option<&str>) -> bool {
        let Some(version) = version.and_then(version_number) else {
            return false;
        };
        let Some(entry) = &mut self.0 else {
            return false;
        };
        entry.seen = entry.seen.max(version);
        let wake = entry.waiting && entry.seen >= entry.written;
        if wake {
            entry.waiting = false;
        }
        wake
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_behind_the_last_write_waits_until_it_catches_up() {
        let mut write = LastWrite::default();
        assert_eq!(
            write.cache_behind(Some("5")),
            Cached::Current,
            "never written"
        );
        write.note("9");
        assert_eq!(write.cache_behind(Some("8")), Cached::Behind);
        assert_eq!(
            write.cache_behind(Some("10")),
            Cached::Current,
            "caught up, and past it"
        );
        assert_eq!(
            write.cache_behind(Some("8")),
            Cached::Current,
            "forgotten once caught up"
        );
        // Versions compare as numbers, not as text.
        write.note("100");
        assert_eq!(write.cache_behind(Some("99")), Cached::Behind);
    }

    #[test]
    fn the_watch_showing_the_write_wakes_the_reconcile_waiting_for_it_once() {
        let mut write = LastWrite::default();
        assert!(!write.seen(Some("9")), "never written");
        write.note("9");
        assert!(!write.seen(Some("8")), "nobody waits yet");
        assert_eq!(write.cache_behind(Some("8")), Cached::Behind);
        assert!(!write.seen(Some("8")), "not the write yet");
        assert!(write.seen(Some("9")), "the write: wake");
        assert!(!write.seen(Some("10")), "woken once");
        // The woken reconcile reads the cache, which holds the write.
        assert_eq!(write.cache_behind(Some("10")), Cached::Current);
    }

    #[test]
    fn a_reconcile_from_an_old_version_the_watch_has_passed_runs_again_now() {
        let mut write = LastWrite::default();
        write.note("9");
        // The echo came before any reconcile waited: no wake, but a
        // reconcile that started from version 8 must not wait for one.
        assert!(!write.seen(Some("9")));
        assert_eq!(write.cache_behind(Some("8")), Cached::Superseded);
        // Still version 8 (a relist took the cache back): no second
        // immediate run, a wait for the wake.
        assert_eq!(write.cache_behind(Some("8")), Cached::Behind);
        assert_eq!(write.cache_behind(Some("9")), Cached::Current);
    }

    #[test]
    fn a_version_that_never_comes_holds_the_reconcile_for_the_limit_only() {
        let mut write = LastWrite::default();
        // An etcd restore took the CR back to version 40.
        let written = Instant::now();
        write.note_at("5000", written);
        let almost = written + CATCH_UP_LIMIT - Duration::from_millis(1);
        assert_eq!(write.behind_at(Some("40"), almost), Cached::Behind);
        assert_eq!(
            write.behind_at(Some("40"), written + CATCH_UP_LIMIT),
            Cached::Current
        );
        assert_eq!(
            write.behind_at(Some("40"), written),
            Cached::Current,
            "forgotten"
        );
    }

    #[test]
    fn versions_that_are_not_numbers_never_hold_a_reconcile() {
        let mut write = LastWrite::default();
        write.note("9");
        assert_eq!(
            write.cache_behind(Some("08")),
            Cached::Current,
            "a leading zero"
        );
        write.note("9");
        assert_eq!(write.cache_behind(Some("abc")), Cached::Current);
        write.note("9");
        assert_eq!(write.cache_behind(None), Cached::Current);
        write.note("x9");
        write.note("09");
        assert!(
            write.0.is_none(),
            "versions that are not numbers are not noted"
        );
    }
}
