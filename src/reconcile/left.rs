//! How each object's last reconcile left it: the resourceVersion after its
//! own writes, and the versions it wrote past. A reconcile of an object
//! still at that version answers no change (a recheck, a wake, a restart)
//! and may use batched cloud observations; one of a version written past is
//! skipped, as the watch delivers the newer one next. Every write of the
//! operator's own is noted the moment it is answered, so the watch's echo
//! of it, which may come while the reconcile still runs, starts no other.

use std::{collections::HashMap, sync::Mutex};

#[derive(Default)]
pub struct LeftAt {
    left: Mutex<HashMap<String, Left>>,
    /// The versions this process's own writes made, oldest first (the
    /// last few): each but the last was written past by the next.
    wrote: Mutex<HashMap<String, Vec<String>>>,
}

/// Versions kept per object in `LeftAt::wrote`: a reconcile writes a CR
/// at most four times (finalizer, identifier, window, status).
const WRITES_KEPT: usize = 8;

struct Left {
    /// Its resourceVersion after the reconcile's last write.
    version: String,
    /// Versions it wrote past (the one it started from, the finalizer's,
    /// an error's status), which the watch may still deliver.
    passed: Vec<String>,
}

impl LeftAt {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Left>> {
        self.left.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.wrote.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A write of this process's own made `version` of `key`. A write
    /// that changed nothing (another reconcile had written the same a
    /// moment before) answers the version it found: noted twice, it would
    /// count as written past by itself, and the object would wait for a
    /// newer version that never comes.
    pub fn wrote(&self, key: &str, version: String) {
        let mut writes = self.writes();
        let versions = writes.entry(key.to_string()).or_default();
        if versions.last() == Some(&version) {
            return;
        }
        versions.push(version);
        if versions.len() > WRITES_KEPT {
            versions.remove(0);
        }
    }

    /// Whether `key` is at the version its last reconcile left it at (or
    /// has not been reconciled since this process started).
    pub fn unchanged(&self, key: &str, version: Option<&str>) -> bool {
        self.map()
            .get(key)
            .is_none_or(|l| Some(l.version.as_str()) == version)
    }

    /// Whether `version` of `key` is one this process wrote past: its last
    /// reconcile did, or a later write of its own did.
    pub fn written_past(&self, key: &str, version: Option<&str>) -> bool {
        let Some(version) = version else {
            return false;
        };
        let superseded = self.writes().get(key).is_some_and(|w| {
            w.iter()
                .position(|v| v == version)
                .is_some_and(|at| at + 1 < w.len())
        });
        let map = self.map();
        let passed = map.get(key).map_or(&[][..], |l| &l.passed[..]);
        superseded || passed.iter().any(|p| p == version)
    }

    /// Whether the watch's `version` of `key` is what this process's own
    /// reconcile left it at or wrote past: the echo of its own writes,
    /// which holds no change to reconcile.
    pub fn own_write(&self, key: &str, version: Option<&str>) -> bool {
        let Some(version) = version else {
            return false;
        };
        if self
            .writes()
            .get(key)
            .is_some_and(|w| w.iter().any(|v| v == version))
        {
            return true;
        }
        let map = self.map();
        map.get(key)
            .is_some_and(|left| left.version == version || left.passed.iter().any(|p| p == version))
    }

    /// Whether this process has reconciled `key` before.
    pub fn contains(&self, key: &str) -> bool {
        self.map().contains_key(key)
    }

    /// A reconcile left `key` at `version` (`None`: it is gone), having
    /// written past `passed`.
    pub fn record(&self, key: &str, version: Option<String>, mut passed: Vec<String>) {
        let mut map = self.map();
        match version {
            Some(version) => {
                // A write that changed nothing left it where it started.
                passed.retain(|p| *p != version);
                map.insert(key.to_string(), Left { version, passed })
            }
            None => {
                self.writes().remove(key);
                map.remove(key)
            }
        };
    }

    /// Forgets every key that starts with `prefix`: a relist may show
    /// versions noted here that an etcd restore brought back, which must
    /// not count as written past (they would wait for a newer version
    /// that never comes).
    pub fn forget(&self, prefix: &str) {
        self.map().retain(|key, _| !key.starts_with(prefix));
        self.writes().retain(|key, _| !key.starts_with(prefix));
    }

    /// A failed reconcile wrote its error into the status, moving `key`
    /// from `from` to `to`. When `from` is where the last reconcile left
    /// it, nobody else changed it: `to` is as unchanged as `from` was (a
    /// wake or retry that follows still reads batched observations).
    pub fn wrote_status(&self, key: &str, from: Option<&str>, to: String) {
        if let Some(l) = self.map().get_mut(key)
            && Some(l.version.as_str()) == from
            && l.version != to
        {
            let from = std::mem::replace(&mut l.version, to);
            l.passed.push(from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_objects_own_writes_do_not_count_as_changes() {
        let left = LeftAt::default();
        assert!(
            left.unchanged("ns/db", Some("1")),
            "not reconciled yet: a restart's first look"
        );
        assert!(!left.contains("ns/db"));
        // The reconcile added the finalizer (2) and wrote the status (3).
        left.record("ns/db", Some("3".into()), vec!["1".into(), "2".into()]);
        assert!(left.unchanged("ns/db", Some("3")));
        assert!(
            ["1", "2", "3"]
                .iter()
                .all(|v| left.own_write("ns/db", Some(v))),
            "the watch's echoes of its own writes"
        );
        assert!(left.written_past("ns/db", Some("2")) && !left.written_past("ns/db", Some("3")));
        // A later reconcile failed and wrote its error (4).
        left.wrote_status("ns/db", Some("3"), "4".into());
        assert!(
            left.unchanged("ns/db", Some("4")),
            "its own error status is no change"
        );
        assert!(left.written_past("ns/db", Some("3")));
        // A person's edit (5) is a change, and an error written over it
        // keeps it one.
        assert!(!left.unchanged("ns/db", Some("5")));
        assert!(
            !left.own_write("ns/db", Some("5")),
            "a person's edit is no echo"
        );
        left.wrote_status("ns/db", Some("5"), "6".into());
        assert!(!left.unchanged("ns/db", Some("6")));
        left.record("ns/db", None, Vec::new());
        assert!(!left.contains("ns/db"));
    }

    #[test]
    fn a_write_is_known_as_its_own_while_the_reconcile_still_runs() {
        let left = LeftAt::default();
        // A new CR: its finalizer (2), its identifier (3), then its status
        // (4), noted as each is answered, before the reconcile records.
        left.wrote("ns/db", "2".into());
        assert!(left.own_write("ns/db", Some("2")));
        assert!(!left.written_past("ns/db", Some("2")), "the latest write");
        left.wrote("ns/db", "3".into());
        left.wrote("ns/db", "4".into());
        assert!(
            ["2", "3", "4"]
                .iter()
                .all(|v| left.own_write("ns/db", Some(v)))
        );
        assert!(left.written_past("ns/db", Some("2")) && left.written_past("ns/db", Some("3")));
        assert!(!left.written_past("ns/db", Some("4")));
        assert!(!left.own_write("ns/db", Some("1")), "the person's create");
        assert!(
            left.unchanged("ns/db", Some("4")) && !left.contains("ns/db"),
            "still the first look: only a finished reconcile records how it left it"
        );
        left.record("ns/db", None, Vec::new());
        assert!(!left.own_write("ns/db", Some("4")), "gone with the CR");
    }

    #[test]
    fn a_write_that_changed_nothing_is_not_written_past() {
        let left = LeftAt::default();
        // Two reconciles wrote the same status within one second (one from
        // a stale copy): the second write changed nothing and answered the
        // version the first made.
        left.wrote("ns/db", "3".into());
        left.wrote("ns/db", "3".into());
        assert!(left.own_write("ns/db", Some("3")));
        assert!(
            !left.written_past("ns/db", Some("3")),
            "the latest version would wait for a newer one forever"
        );
        // Its reconcile started from 3 and left it at 3.
        left.record("ns/db", Some("3".into()), vec!["2".into(), "3".into()]);
        assert!(!left.written_past("ns/db", Some("3")));
        assert!(left.written_past("ns/db", Some("2")));
        // An error status that changed nothing moves nothing.
        left.wrote_status("ns/db", Some("3"), "3".into());
        assert!(!left.written_past("ns/db", Some("3")) && left.unchanged("ns/db", Some("3")));
    }

    #[test]
    fn a_relist_forgets_the_versions_of_its_scope_only() {
        let left = LeftAt::default();
        left.wrote("Redis/a/db", "2".into());
        left.wrote("Redis/a/db", "3".into());
        left.record("Redis/a/db", Some("3".into()), vec!["1".into()]);
        left.wrote("Redis/b/db", "5".into());
        left.wrote("Redis/b/db", "6".into());
        left.wrote("Postgres/a/db", "8".into());
        left.wrote("Postgres/a/db", "9".into());
        // A restore brought back version 2 of Redis a/db.
        assert!(left.written_past("Redis/a/db", Some("2")));
        left.forget("Redis/a/");
        assert!(
            !left.written_past("Redis/a/db", Some("2")) && !left.contains("Redis/a/db"),
            "the relisted version is reconciled, as at a start"
        );
        assert!(
            left.written_past("Redis/b/db", Some("5")),
            "another namespace"
        );
        assert!(
            left.written_past("Postgres/a/db", Some("8")),
            "another kind"
        );
    }

    #[test]
    fn an_error_before_any_reconcile_records_nothing() {
        let left = LeftAt::default();
        left.wrote_status("ns/db", Some("1"), "2".into());
        assert!(
            !left.contains("ns/db"),
            "the first successful reconcile still counts as the first look"
        );
    }
}
