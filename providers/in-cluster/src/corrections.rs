//! Another writer that changes an owned object back after each of the
//! operator's corrections (a second controller, a mutating webhook that
//! rewrites the image) would have both write in turn for ever, each write
//! the other's watch event. Corrections of an object that exists are
//! counted per object; past [`FREE`] within [`WINDOW`], the next one waits,
//! longer each time, and the reconcile says who else writes it.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use cro_provider_api::{Memory, backoff::doubling};

/// Corrections of one object allowed within [`WINDOW`] without waiting:
/// a tier change and a person's edit or two.
pub const FREE: usize = 3;
pub const WINDOW: Duration = Duration::from_secs(300);
/// The first wait past [`FREE`]; each further one doubles, up to [`MAX_HOLD`].
pub const FIRST_HOLD: Duration = Duration::from_secs(30);
pub const MAX_HOLD: Duration = Duration::from_secs(600);

/// A correction that must wait.
#[derive(Debug, PartialEq)]
pub struct Held {
    /// The whole wait after the last correction.
    pub hold: Duration,
    /// What is left of it.
    pub left: Duration,
}

/// Recent corrections, by object UID, marked in the providers' [`Memory`].
pub struct Corrections {
    memory: Arc<Memory>,
    scope: u64,
}

impl Corrections {
    pub fn new(memory: &Arc<Memory>) -> Self {
        Corrections {
            memory: memory.clone(),
            scope: memory.scope(),
        }
    }

    /// `Ok` when the object may be corrected now, else the hold it is in
    /// and how long until it may.
    pub fn allowed(&self, uid: &str, now: Instant) -> Result<(), Held> {
        let key = Memory::key(self.scope, uid);
        self.memory.mark(&key, |marks| {
            let times = &mut marks.corrected;
            times.retain(|t| now.saturating_duration_since(*t) < WINDOW);
            let extra = times.len().saturating_sub(FREE);
            let Some(last) = times.last().copied().filter(|_| times.len() >= FREE) else {
                return Ok(());
            };
            let extra = u32::try_from(extra).unwrap_or(u32::MAX);
            let hold = doubling(FIRST_HOLD, MAX_HOLD, extra.saturating_add(1));
            match (last + hold).checked_duration_since(now) {
                Some(left) if !left.is_zero() => Err(Held { hold, left }),
                _ => Ok(()),
            }
        })
    }

    pub fn corrected(&self, uid: &str, now: Instant) {
        let key = Memory::key(self.scope, uid);
        self.memory.mark(&key, |marks| marks.corrected.push(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrections_past_the_free_ones_wait_longer_each_time() {
        let c = Corrections::new(&Arc::default());
        let start = Instant::now();
        for i in 0..FREE {
            let now = start + Duration::from_secs(i as u64);
            assert_eq!(c.allowed("u", now), Ok(()));
            c.corrected("u", now);
        }
        let last = start + Duration::from_secs(FREE as u64 - 1);
        // The next waits FIRST_HOLD from the last correction.
        let held = |hold: Duration, left: Duration| Err(Held { hold, left });
        let at = last + Duration::from_secs(10);
        assert_eq!(
            c.allowed("u", at),
            held(FIRST_HOLD, Duration::from_secs(20))
        );
        assert_eq!(c.allowed("other", last), Ok(()));
        let then = last + FIRST_HOLD;
        assert_eq!(c.allowed("u", then), Ok(()));
        c.corrected("u", then);
        // One more within the window: twice as long.
        let at = then + Duration::from_secs(1);
        let left = 2 * FIRST_HOLD - Duration::from_secs(1);
        assert_eq!(c.allowed("u", at), held(2 * FIRST_HOLD, left));
        // A quiet window forgets them.
        assert_eq!(c.allowed("u", then + WINDOW), Ok(()));
    }
}
