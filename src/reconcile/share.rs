//! Each namespace's share of a controller's reconcile slots. Watching
//! every namespace, one controller per kind serves them all, and kube's
//! queue takes CRs in the order they came: a namespace that creates
//! hundreds at once would hold every slot until its backlog drained, and
//! its reconciles' AWS calls would fill the account's call budget ahead of
//! everyone else's. No namespace may hold more than three quarters of the
//! slots; a reconcile over its namespace's share gives its slot back and
//! comes again shortly, so the rest stay free for other namespaces (and
//! their AWS calls queue behind at most that share).

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
            limit: (concurrency - concurrency / 4).max(1),
        }
    }

    /// A slot for a reconcile of a `kind` CR in `namespace`, unless that
    /// namespace already holds its share of the kind's slots.
    pub fn take(&self, kind: &str, namespace: &str) -> Option<Slot> {
        let key = (kind.to_string(), namespace.to_string());
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(key.clone()).or_default();
        if *count >= self.limit {
            return None;
        }
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
    fn one_slot_is_always_a_share() {
        let shares = Shares::new(1);
        let held = shares.take("Redis", "a");
        assert!(held.is_some());
        assert!(shares.take("Redis", "a").is_none());
        drop(held);
        assert!(shares.take("Redis", "a").is_some());
    }
}
