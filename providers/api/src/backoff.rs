//! The one backoff curve of the operator: `backon`'s exponential backoff,
//! read at the count of consecutive failures a caller keeps (per object,
//! across reconciles, where there is no retry loop for backon to drive).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// The delay after `failures` consecutive failures (1 for the first):
/// `first`, doubling each time, never over `max`.
pub fn doubling(first: Duration, max: Duration, failures: u32) -> Duration {
    ExponentialBuilder::new()
        .with_min_delay(first)
        .with_max_delay(max)
        .with_factor(2.0)
        .without_max_times()
        .build()
        // Past 64 doublings every delay is `max`.
        .nth(failures.saturating_sub(1).min(64) as usize)
        .unwrap_or(max)
        .min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_the_first_up_to_the_cap() {
        let s = Duration::from_secs;
        let delays: Vec<u64> = (1..=8)
            .map(|n| doubling(s(5), s(300), n).as_secs())
            .collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(doubling(s(5), s(300), 0), s(5), "no failure yet: the first");
        assert_eq!(doubling(s(5), s(300), u32::MAX), s(300));
        assert_eq!(doubling(s(5), s(2), 1), s(2), "a cap under the first wins");
    }
}
