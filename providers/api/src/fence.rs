//! Fencing: whether this process may still act on the world. A replica
//! that leads holds a Lease; another replica takes it over once the
//! Lease's record has stood still for its duration. A leader frozen past
//! that (a paused VM or container, a stop signal, a long stall) must not
//! resume writing beside the new leader, and it cannot know it was frozen
//! until it looks at its clock. So every write — each AWS request and each
//! Kubernetes write — asks the fence right before it is sent, and the
//! fence answers from this process's monotonic clock (which runs on while
//! the process is stopped): only until the renew deadline after the last
//! renewal that succeeded, which ends before any other replica may take
//! the Lease over.

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

/// Shared by everything that writes; cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence(Option<Arc<Mutex<Option<Instant>>>>);

impl Fence {
    /// A fence that never closes: one replica, no leader election (also
    /// the default).
    pub fn open() -> Self {
        Fence(None)
    }

    /// A fence that allows nothing until [`Fence::extend_to`].
    pub fn leased() -> Self {
        Fence(Some(Arc::new(Mutex::new(None))))
    }

    /// Allows writes until `until` (a renewal sent at `t` succeeded: `t`
    /// plus the renew deadline).
    pub fn extend_to(&self, until: Instant) {
        if let Some(inner) = &self.0 {
            *inner.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
        }
    }

    /// Allows nothing more (leadership lost or given up).
    pub fn close(&self) {
        if let Some(inner) = &self.0 {
            *inner.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }

    /// Whether a write may be sent now.
    pub fn allows(&self) -> bool {
        self.allows_at(Instant::now())
    }

    fn allows_at(&self, now: Instant) -> bool {
        match &self.0 {
            None => true,
            Some(inner) => {
                (*inner.lock().unwrap_or_else(|e| e.into_inner())).is_some_and(|until| now < until)
            }
        }
    }
}

impl Default for Fence {
    fn default() -> Self {
        Fence::open()
    }
}

/// The error a fenced write gets instead of being sent.
pub const FENCED: &str = "not sent: this replica may no longer hold the leader Lease (its last renewal is older than the renew deadline); it stops and rejoins as a standby";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_leased_fence_allows_only_until_the_last_renewal_runs_out() {
        let fence = Fence::leased();
        let t0 = Instant::now();
        assert!(!fence.allows_at(t0), "allowed before any renewal");
        fence.extend_to(t0 + Duration::from_secs(10));
        assert!(fence.allows_at(t0 + Duration::from_secs(9)));
        // Frozen past the deadline: nothing more, whatever was in flight.
        assert!(!fence.allows_at(t0 + Duration::from_secs(10)));
        let copy = fence.clone();
        fence.extend_to(t0 + Duration::from_secs(20));
        assert!(copy.allows_at(t0 + Duration::from_secs(15)), "clones share");
        fence.close();
        assert!(!copy.allows_at(t0 + Duration::from_secs(15)));
        assert!(Fence::open().allows());
    }
}
