//! Batched observation: one paginated listing of a service per account and
//! region serves every settled resource's recheck, instead of one describe
//! each. AWS sends no events and limits calls per account; a restart over
//! 1,000 instances then costs ten DescribeDBInstances pages, not 1,000.
//!
//! Only rechecks are judged from a listing (the operator says how old an
//! observation may be, `Options::observed_within`, a minute by default).
//! A resource the listing lacks (new, or gone) and any resource the
//! operator is changing are described on their own, and a listing taken
//! before the operator's last write to a resource no longer speaks for it
//! — whether that write was answered or not (a lost answer may still have
//! acted) — so no decision is taken twice on the state from before its
//! own call. Nor does it after the operator described the resource on its
//! own: an instance seen `available` is never judged `creating` again
//! from a listing taken while it was.

use std::{collections::BTreeMap, future::Future, sync::Arc, time::Duration};

use cro_provider_api::{
    ProviderError,
    memory::{FORGET_AFTER, Memory},
};
use tokio::{sync::Mutex, time::Instant};

/// The last listing of one service, by resource identifier. When this
/// process last wrote to each resource (the write's end) and last
/// described it on its own are kept in the providers' [`Memory`].
pub struct Listing<T> {
    taken: Mutex<Option<Taken<T>>>,
    memory: Arc<Memory>,
    scope: u64,
}

struct Taken<T> {
    at: Instant,
    items: BTreeMap<String, T>,
}

impl<T: Clone> Listing<T> {
    pub fn new(memory: &Arc<Memory>) -> Self {
        Listing {
            taken: Mutex::new(None),
            memory: memory.clone(),
            scope: memory.scope(),
        }
    }

    /// `id` as listed no more than `max_age` ago, listing again (with
    /// `list`) when the last listing is older. Concurrent callers wait for
    /// one listing rather than each taking their own. `None`: the listing
    /// does not hold it; describe it on its own.
    pub async fn get<F, Fut>(
        &self,
        id: &str,
        max_age: Duration,
        list: F,
    ) -> Result<Option<T>, ProviderError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<BTreeMap<String, T>, ProviderError>>,
    {
        // Never older than the memory of writes that it must not outlive.
        let max_age = max_age.min(FORGET_AFTER);
        let mut taken = self.taken.lock().await;
        let fresh = taken.as_ref().is_some_and(|t| t.at.elapsed() <= max_age);
        if !fresh {
            let at = Instant::now();
            *taken = Some(Taken {
                at,
                items: list().await?,
            });
        }
        let marks = self.memory.marks(&Memory::key(self.scope, id));
        let after = |mark: Option<std::time::Instant>, at: Instant| {
            mark.is_some_and(|m| m >= at.into_std())
        };
        let taken = (taken.as_ref())
            .filter(|t| !after(marks.written, t.at) && !after(marks.described, t.at));
        Ok(taken.and_then(|t| t.items.get(id).cloned()))
    }

    /// Sends `write`, a call that changes `id`, and notes it whatever the
    /// answer (a lost answer may still have acted): every write to a
    /// listed resource goes through here.
    pub async fn writing<R>(&self, id: &str, write: impl Future<Output = R>) -> R {
        let answer = write.await;
        self.wrote(id);
        answer
    }

    /// Says the operator just wrote to `id` (answered or not): listings
    /// taken until now no longer say how it is.
    fn wrote(&self, id: &str) {
        let now = Instant::now().into_std();
        (self.memory).mark(&Memory::key(self.scope, id), |m| m.written = Some(now));
    }

    /// Says the operator just described `id` on its own: listings taken
    /// until now are older than what it knows of it.
    pub fn described(&self, id: &str) {
        let now = Instant::now().into_std();
        (self.memory).mark(&Memory::key(self.scope, id), |m| m.described = Some(now));
    }

    /// Whether this process wrote to `id` since `at` (with `None`: within
    /// the memory's [`FORGET_AFTER`]).
    pub fn written_since(&self, id: &str, at: impl Into<Option<Instant>>) -> bool {
        let at = at.into().map(Instant::into_std);
        let written = self.memory.marks(&Memory::key(self.scope, id)).written;
        written.is_some_and(|w| at.is_none_or(|at| w >= at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const MAX_AGE: Duration = Duration::from_secs(60);

    async fn listed(listing: &Listing<u32>, id: &str, calls: &AtomicUsize) -> Option<u32> {
        listing
            .get(id, MAX_AGE, || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(BTreeMap::from([("a".to_string(), 1), ("b".to_string(), 2)]))
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(start_paused = true)]
    async fn one_listing_serves_every_resource_until_it_is_a_minute_old() {
        let (listing, calls) = (Listing::new(&Arc::default()), AtomicUsize::new(0));
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        assert_eq!(listed(&listing, "b", &calls).await, Some(2));
        assert_eq!(listed(&listing, "new", &calls).await, None);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(MAX_AGE + Duration::from_secs(1)).await;
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resource_just_changed_is_not_judged_from_the_listing() {
        let (listing, calls) = (Listing::new(&Arc::default()), AtomicUsize::new(0));
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        assert!(!listing.written_since("a", None));
        tokio::time::advance(Duration::from_secs(1)).await;
        listing.wrote("a");
        assert!(listing.written_since("a", None));
        assert_eq!(listed(&listing, "a", &calls).await, None);
        assert_eq!(listed(&listing, "b", &calls).await, Some(2));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A listing taken after the write speaks for it again.
        tokio::time::advance(MAX_AGE + Duration::from_secs(1)).await;
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resource_described_since_is_not_judged_from_the_older_listing() {
        let (listing, calls) = (Listing::new(&Arc::default()), AtomicUsize::new(0));
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        listing.described("a");
        assert!(!listing.written_since("a", None), "a read is no write");
        assert_eq!(listed(&listing, "a", &calls).await, None);
        assert_eq!(listed(&listing, "b", &calls).await, Some(2));
    }

    #[tokio::test]
    async fn a_failed_listing_is_an_error_and_the_next_call_lists_again() {
        let (listing, calls) = (Listing::<u32>::new(&Arc::default()), AtomicUsize::new(0));
        let failed = listing
            .get("a", MAX_AGE, || async {
                Err(ProviderError::transient("rds:DescribeDBInstances: timeout"))
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(listed(&listing, "a", &calls).await, Some(1));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
