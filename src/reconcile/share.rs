//! Each namespace's share of a controller's reconcile slots. Watching
//! every namespace, one controller per kind serves them all, and kube's
//! queue takes CRs in the order they came: a namespace that creates
//! hundreds at once would hold every slot until its backlog drained, and
//! its reconciles' AWS calls would fill the account's call budget ahead of
//! everyone else's. So the namespaces holding slots share three quarters
//! of them evenly (one alone may hold all three quarters), and a reconcile
//! over its namespace's share gives its slot back and comes again shortly.
//! The last quarter keeps turning over, so a namespace that holds none is
//! reached at once, and its AWS calls queue behind the others' shares only.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// The slots each namespace holds, per kind.
#[derive(Debug)]
pub struct Shares {
    held: Arc<Mutex<HashMap<(String, String), usize>>>,
    limit: usize,
}

/// A slot a reconcile holds until it is dropped.
#[derive(Debug)]
pub struct Slot {
    held: Arc<Mutex<HashMap<(String, String), usize>>>,
    key: (String, String),
}

impl Shares {
    /// Shares of controllers that each run `concurrency` reconciles.
    pub fn new(concurrency: u16) -> Shares {
        let concurrency = usize::from(concurrency);
        Shares {
            held: Arc::default(),
            // At least one slot turns over wherever there are two.
            limit: (concurrency - (concurrency / 4).max(1)).max(1),
        }
    }

    /// A slot for a reconcile of a `kind` CR in `namespace`, unless that
    /// namespace already holds its share of the kind's slots: an even part
    /// of the shared three quarters among the namespaces holding any (this
    /// one counted), and at least one.
    pub fn take(&self, kind: &str, namespace: &str) -> Option<Slot> {
        let key = (kind.to_string(), namespace.to_string());
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.get(&key).copied().unwrap_or(0);
        let others = (held.iter())
            .filter(|((k, ns), n)| k == kind && ns != namespace && **n > 0)
            .count();
        if mine >= (self.limit / (others + 1)).max(1) {
            return None;
        }
        let count = held.entry(key.clone()).or_default();
        *count += 1;
        Some(Slot {
            held: self.held.clone(),
            key,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_holds_at_most_three_quarters_of_a_kinds_slots() {
        let shares = Shares::new(16);
        let a: Vec<Slot> = (0..12)
            .map(|_| shares.take("Redis", "a").expect("within a's share"))
            .collect();
        assert!(shares.take("Redis", "a").is_none(), "a's 13th");
        assert!(shares.take("Redis", "b").is_some(), "another namespace");
        assert!(shares.take("Postgres", "a").is_some(), "another kind");
        drop(a);
        assert!(shares.take("Redis", "a").is_some(), "given back");
    }

    #[test]
    fn busy_namespaces_share_evenly_and_leave_a_quarter_turning_over() {
        let shares = Shares::new(16);
        let a: Vec<Slot> = (0..12).filter_map(|_| shares.take("Redis", "a")).collect();
        assert_eq!(a.len(), 12, "alone, a holds three quarters");
        // b comes: its share is 6; a's is 6 too, which it reaches as its
        // reconciles end.
        let b: Vec<Slot> = (0..8).filter_map(|_| shares.take("Redis", "b")).collect();
        assert_eq!(b.len(), 6);
        let mut a: Vec<Slot> = a.into_iter().skip(7).collect();
        a.extend(shares.take("Redis", "a"));
        assert_eq!(a.len(), 6, "a takes slots again up to its share");
        assert!(shares.take("Redis", "a").is_none());
        // c, holding none, gets one whatever a and b hold, and theirs
        // shrink to 4 each.
        let c = shares.take("Redis", "c");
        assert!(c.is_some());
        a.truncate(4);
        assert!(shares.take("Redis", "a").is_none(), "a holds 4 of 4");
    }

    #[test]
    fn with_few_slots_one_still_turns_over() {
        let shares = Shares::new(3);
        let a: Vec<Slot> = (0..3).filter_map(|_| shares.take("Redis", "a")).collect();
        assert_eq!(a.len(), 2, "the third slot is left for other namespaces");
        assert!(shares.take("Redis", "b").is_some());
    }

    #[test]
    fn one_slot_is_always_a_share() {
        let shares = Shares::new(1);
        let held = shares.take("Redis", "a");
        assert!(held.is_some());
        assert!(shares.take("Redis", "a").is_none());
        drop(held);
        assert!(shares.take("Redis", "a").is_some());
    }
}
