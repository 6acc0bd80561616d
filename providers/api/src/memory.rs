//! What this process remembers of each cloud resource and owned object
//! between passes, for every provider: when it last wrote to one, described
//! it on its own, lost the answer of a create that may have made it, or
//! corrected another writer's change to it. Clouds and the API server keep
//! the rest; this is only what a process learns from its own calls.
//!
//! One table, so per-object memory has one place, and what is forgotten is
//! forgotten in one place: a resource untouched for [`FORGET_AFTER`] (one
//! deleted long ago) leaves the table.

use std::{
    collections::HashMap,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// How long marks are kept after the last one: longer than any window a
/// mark is read against (a listing's age, a lost create's, the
/// corrections' five minutes).
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How often the table is swept of what it has forgotten.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// One resource, in one user's view (a service's listing in one account,
/// the in-cluster provider's objects): users take a [`Memory::scope`]
/// each, so the same name in two accounts is two resources.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    scope: u64,
    id: String,
}

/// What the process did to one resource, and when.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    /// Its last write to it, answered or not (a lost answer may have acted).
    pub written: Option<Instant>,
    /// When it last described the resource on its own.
    pub described: Option<Instant>,
    /// When a create that may have made it lost its answer.
    pub create_lost: Option<Instant>,
    /// Its recent corrections of another writer's change.
    pub corrected: Vec<Instant>,
}

impl Marks {
    fn last(&self) -> Option<Instant> {
        [self.written, self.described, self.create_lost]
            .into_iter()
            .chain(self.corrected.iter().copied().map(Some))
            .flatten()
            .max()
    }
}

/// The table; see the module's documentation.
pub struct Memory {
    table: Mutex<Table>,
    scopes: AtomicU64,
}

struct Table {
    marks: HashMap<Key, Marks>,
    swept: Instant,
}

impl Table {
    /// Forgets what nobody touched for [`FORGET_AFTER`] before `now`.
    fn sweep(&mut self, now: Instant) {
        self.swept = now;
        (self.marks).retain(|_, m| {
            m.last()
                .is_some_and(|t| now.saturating_duration_since(t) < FORGET_AFTER)
        });
    }
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            table: Mutex::new(Table {
                marks: HashMap::new(),
                swept: Instant::now(),
            }),
            scopes: AtomicU64::new(0),
        }
    }
}

impl Memory {
    /// A scope of its own, for one user of the table.
    pub fn scope(&self) -> u64 {
        self.scopes.fetch_add(1, Ordering::Relaxed)
    }

    pub fn key(scope: u64, id: &str) -> Key {
        Key {
            scope,
            id: id.to_string(),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is remembered of `key` (nothing: all `None`).
    pub fn marks(&self, key: &Key) -> Marks {
        self.table().marks.get(key).cloned().unwrap_or_default()
    }

    /// Changes what is remembered of `key`; marks left empty are dropped.
    pub fn mark<R>(&self, key: &Key, change: impl FnOnce(&mut Marks) -> R) -> R {
        let mut table = self.table();
        let marks = table.marks.entry(key.clone()).or_default();
        let answer = change(marks);
        if *marks == Marks::default() {
            table.marks.remove(key);
        }
        let now = Instant::now();
        if now.saturating_duration_since(table.swept) >= SWEEP_EVERY {
            table.sweep(now);
        }
        answer
    }

    /// How many resources are remembered.
    pub fn len(&self) -> usize {
        self.table().marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_keep_the_same_name_apart_and_empty_marks_go() {
        let memory = Memory::default();
        let (a, b) = (memory.scope(), memory.scope());
        let now = Instant::now();
        memory.mark(&Memory::key(a, "db"), |m| m.written = Some(now));
        assert_eq!(memory.marks(&Memory::key(a, "db")).written, Some(now));
        assert_eq!(memory.marks(&Memory::key(b, "db")), Marks::default());
        memory.mark(&Memory::key(a, "db"), |m| m.written = None);
        assert!(memory.is_empty(), "a resource with no marks is not kept");
    }

    #[test]
    fn what_nobody_touched_for_a_day_is_swept() {
        let memory = Memory::default();
        let scope = memory.scope();
        let now = Instant::now();
        memory.mark(&Memory::key(scope, "old"), |m| m.described = Some(now));
        let day_on = now + FORGET_AFTER;
        memory.mark(&Memory::key(scope, "new"), |m| m.corrected.push(day_on));
        memory.table().sweep(day_on);
        assert_eq!(memory.len(), 1);
        assert_eq!(memory.marks(&Memory::key(scope, "old")), Marks::default());
        assert_eq!(memory.marks(&Memory::key(scope, "new")).corrected, [day_on]);
    }
}
