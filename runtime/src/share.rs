//! Each namespace's share of a controller's reconcile slots. Watching
//! every namespace, one controller per kind serves them all, and kube's
//! queue takes CRs in the order they came: a namespace that creates
//! hundreds at once would hold every slot until its backlog drained, and
//! its reconciles' AWS calls would fill the account's call budget ahead of
//! everyone else's. So three quarters of the slots are shared: a namespace
//! may hold all of them while no other namespace waits, and an even part
//! once others wait too. A reconcile over its namespace's share gives its
//! slot back and waits, parked, until a slot of its kind is given back
//! and its namespace is under its share again: then it is woken (see
//! [`Shares::wakes`]), not retried on a timer, so a backlog costs one
//! turn-away per CR. Another namespace merely holding a slot (a slow AWS
//! call) costs a busy one nothing. The last quarter keeps turning over,
//! so a namespace that holds none is reached at once, and its AWS calls
//! queue behind the others' shares only.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
};

use tokio::sync::broadcast;

/// A kind and a namespace.
type Key = (String, String);

/// A parked reconcile to run again: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Woken {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// The CRs of one kind and namespace waiting for a slot, in the order
/// they were turned away.
#[derive(Debug, Default)]
struct Parked {
    order: VecDeque<String>,
    names: HashSet<String>,
}

#[derive(Debug, Default)]
struct State {
    held: HashMap<Key, usize>,
    parked: HashMap<Key, Parked>,
}

impl State {
    /// `key`'s share: all of `limit` while no other namespace of its kind
    /// waits, else an even part among the waiting ones (itself counted),
    /// and at least one.
    fn share(&self, key: &Key, limit: usize) -> usize {
        let others = (self.parked.iter())
            .filter(|((k, ns), p)| *k == key.0 && *ns != key.1 && !p.names.is_empty())
            .count();
        (limit / (others + 1)).max(1)
    }

    fn held(&self, key: &Key) -> usize {
        self.held.get(key).copied().unwrap_or(0)
    }

    /// The next parked CR of `kind` to wake: of the waiting namespace
    /// holding the fewest slots, if it is under its share.
    fn next_woken(&mut self, kind: &str, limit: usize) -> Option<Woken> {
        let key = (self.parked.iter())
            .filter(|((k, _), p)| k == kind && !p.names.is_empty())
            .map(|(key, _)| key.clone())
            .min_by_key(|key| self.held(key))?;
        if self.held(&key) >= self.share(&key, limit) {
            return None;
        }
        let parked = self.parked.get_mut(&key)?;
        while let Some(name) = parked.order.pop_front() {
            if parked.names.remove(&name) {
                return Some(Woken {
                    kind: key.0.clone(),
                    namespace: key.1.clone(),
                    name,
                });
            }
        }
        None
    }
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    limit: usize,
    wakes: broadcast::Sender<Woken>,
}

/// The slots each namespace holds, and the reconciles parked, per kind.
#[derive(Debug)]
pub struct Shares(Arc<Inner>);

/// A slot a reconcile holds until it is dropped.
#[derive(Debug)]
pub struct Slot {
    inner: Arc<Inner>,
    key: Key,
}

impl Shares {
    /// Shares of controllers that each run `concurrency` reconciles.
    pub fn new(concurrency: u16) -> Shares {
        let concurrency = usize::from(concurrency);
        Shares(Arc::new(Inner {
            state: Mutex::default(),
            // At least one slot turns over wherever there are two.
            limit: (concurrency - (concurrency / 4).max(1)).max(1),
            wakes: broadcast::channel(1024).0,
        }))
    }

    /// A slot for a reconcile of the `kind` CR `name` in `namespace`,
    /// unless that namespace already holds its share of the kind's slots;
    /// then the CR is parked until [`Shares::wakes`] names it.
    pub fn take(&self, kind: &str, namespace: &str, name: &str) -> Option<Slot> {
        let key = (kind.to_string(), namespace.to_string());
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.held(&key) >= state.share(&key, self.0.limit) {
            let parked = state.parked.entry(key).or_default();
            if parked.names.insert(name.to_string()) {
                parked.order.push_back(name.to_string());
            }
            return None;
        }
        // Woken, or come again on its own: no longer waiting.
        if let Some(parked) = state.parked.get_mut(&key) {
            parked.names.remove(name);
            if parked.names.is_empty() {
                state.parked.remove(&key);
            }
        }
        *state.held.entry(key.clone()).or_default() += 1;
        Some(Slot {
            inner: self.0.clone(),
            key,
        })
    }

    /// The parked reconciles to run again, as slots are given back.
    pub fn wakes(&self) -> broadcast::Receiver<Woken> {
        self.0.wakes.subscribe()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = state.held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.held.remove(&self.key);
            }
        }
        if let Some(woken) = state.next_woken(&self.key.0, self.inner.limit) {
            // No receiver (no controller yet): the CR's own retry runs it.
            let _ = self.inner.wakes.send(woken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take_n(shares: &Shares, kind: &str, ns: &str, n: usize) -> Vec<Slot> {
        (0..n)
            .filter_map(|i| shares.take(kind, ns, &format!("{ns}-{i}")))
            .collect()
    }

    #[test]
    fn a_namespace_holds_at_most_three_quarters_of_a_kinds_slots() {
        let shares = Shares::new(16);
        let a = take_n(&shares, "Redis", "a", 13);
        assert_eq!(a.len(), 12, "a's 13th waits");
        assert!(
            shares.take("Redis", "b", "b-0").is_some(),
            "another namespace"
        );
        assert!(shares.take("Postgres", "a", "x").is_some(), "another kind");
        drop(a);
        assert!(shares.take("Redis", "a", "a-12").is_some(), "given back");
    }

    #[test]
    fn busy_namespaces_share_evenly_and_leave_a_quarter_turning_over() {
        let shares = Shares::new(16);
        let a = take_n(&shares, "Redis", "a", 14);
        assert_eq!(a.len(), 12, "alone, a holds three quarters (two wait)");
        // b comes with a backlog: a waits, so b's share is 6; once b waits
        // too, a's is 6, which it reaches as its reconciles end.
        let b = take_n(&shares, "Redis", "b", 8);
        assert_eq!(b.len(), 6);
        let mut a: Vec<Slot> = a.into_iter().skip(7).collect();
        a.extend(shares.take("Redis", "a", "a-12"));
        assert_eq!(a.len(), 6, "a takes slots again up to its share");
        assert!(shares.take("Redis", "a", "a-13").is_none());
        // c, holding none, gets slots whatever a and b hold; once c waits
        // too, a's and b's shares shrink to 4 each.
        let c = take_n(&shares, "Redis", "c", 5);
        assert_eq!(c.len(), 4, "c at 4 of 4 waits");
        a.truncate(4);
        assert!(
            shares.take("Redis", "a", "a-14").is_none(),
            "a holds 4 of 4"
        );
    }

    #[test]
    fn a_namespace_that_only_holds_slots_takes_nothing_from_a_busy_one() {
        let shares = Shares::new(16);
        // Three namespaces each hold a slot (a slow AWS call) and want no
        // more: a still gets all of the shared three quarters.
        let quiet: Vec<Slot> = ["b", "c", "d"]
            .iter()
            .filter_map(|ns| shares.take("Redis", ns, "x"))
            .collect();
        assert_eq!(quiet.len(), 3);
        assert_eq!(take_n(&shares, "Redis", "a", 16).len(), 12);
    }

    /// The next wake, as (namespace, name), if any.
    fn next_wake(wakes: &mut broadcast::Receiver<Woken>) -> Option<(String, String)> {
        wakes.try_recv().ok().map(|w| (w.namespace, w.name))
    }

    fn pair(ns: &str, name: &str) -> Option<(String, String)> {
        Some((ns.to_string(), name.to_string()))
    }

    #[test]
    fn a_parked_reconcile_is_woken_when_its_namespace_is_under_its_share() {
        let shares = Shares::new(8);
        let mut wakes = shares.wakes();
        let mut a = take_n(&shares, "Redis", "a", 8);
        assert_eq!(a.len(), 6, "a-6 and a-7 wait");
        assert_eq!(
            next_wake(&mut wakes),
            None,
            "nothing woken while no slot is given back"
        );
        a.pop();
        assert_eq!(
            next_wake(&mut wakes),
            pair("a", "a-6"),
            "a slot given back wakes a-6"
        );
        assert_eq!(next_wake(&mut wakes), None, "one wake per slot");
        a.extend(shares.take("Redis", "a", "a-6"));
        assert_eq!(a.len(), 6);
        // b comes with a backlog: its share is 3 while a waits, and a's 3
        // while b waits.
        let mut b = take_n(&shares, "Redis", "b", 4);
        assert_eq!(b.len(), 3, "b-3 waits");
        a.pop();
        assert_eq!(
            next_wake(&mut wakes),
            None,
            "a is over its share, b at its share"
        );
        b.pop();
        assert_eq!(next_wake(&mut wakes), pair("b", "b-3"), "b under its share");
    }

    #[test]
    fn with_few_slots_one_still_turns_over() {
        let shares = Shares::new(3);
        let a = take_n(&shares, "Redis", "a", 3);
        assert_eq!(a.len(), 2, "the third slot is left for other namespaces");
        assert!(shares.take("Redis", "b", "b-0").is_some());
    }

    #[test]
    fn one_slot_is_always_a_share() {
        let shares = Shares::new(1);
        let held = shares.take("Redis", "a", "a-0");
        assert!(held.is_some());
        assert!(shares.take("Redis", "a", "a-1").is_none());
        drop(held);
        assert!(shares.take("Redis", "a", "a-1").is_some());
    }
}
