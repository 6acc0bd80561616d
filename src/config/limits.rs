//! What a tier lets a CR ask for: `minSnapshotFrequency` and
//! `maxSnapshotRetention` (durations such as `1d`) bound
//! `spec.snapshotFrequency` and `spec.snapshotRetention`, and
//! `allowedSizes` lists the `spec.size` values (ElastiCache node types) a
//! CR may name. `maxManualSnapshots` bounds the PostgresSnapshot or
//! RedisSnapshot CRs a namespace holds that no schedule made (each is an
//! RDS or ElastiCache manual snapshot, of which an account has a quota,
//! 100 by default for RDS). A tier with none lets a CR ask for anything, as
//! in the Go operator; a CR asking for more is `failed` naming the limit.

use serde_json::Value;

use super::TierKeyError;
use crate::api::Duration;

pub const MIN_SNAPSHOT_FREQUENCY_KEY: &str = "minSnapshotFrequency";
pub const MAX_SNAPSHOT_RETENTION_KEY: &str = "maxSnapshotRetention";
pub const ALLOWED_SIZES_KEY: &str = "allowedSizes";
pub const MAX_MANUAL_SNAPSHOTS_KEY: &str = "maxManualSnapshots";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// Both longer than zero.
    min_snapshot_frequency: Option<Duration>,
    max_snapshot_retention: Option<Duration>,
    allowed_sizes: Option<Vec<String>>,
    max_manual_snapshots: Option<usize>,
}

/// What a CR asks for that a tier may limit.
pub struct Asked<'a> {
    pub snapshot_frequency: Option<&'a Duration>,
    pub snapshot_retention: Option<&'a Duration>,
    pub size: Option<&'a str>,
}

impl Limits {
    /// Takes the limit keys out of `tier`.
    pub fn take(tier: &mut Value) -> Result<Limits, TierKeyError> {
        let Some(t) = tier.as_object_mut() else {
            return Ok(Limits::default());
        };
        let mut bound = |key: &'static str| -> Result<Option<Duration>, TierKeyError> {
            let Some(value) = t.remove(key) else {
                return Ok(None);
            };
            let parsed = value.as_str().map(str::parse::<Duration>);
            match parsed {
                Some(Ok(d)) if d.seconds().is_some() => Ok(Some(d)),
                _ => Err(TierKeyError::Limit {
                    key,
                    value: value.to_string(),
                }),
            }
        };
        let min_snapshot_frequency = bound(MIN_SNAPSHOT_FREQUENCY_KEY)?;
        let max_snapshot_retention = bound(MAX_SNAPSHOT_RETENTION_KEY)?;
        let allowed_sizes = match t.remove(ALLOWED_SIZES_KEY) {
            None => None,
            Some(v) => Some(serde_json::from_value(v).map_err(|_| TierKeyError::AllowedSizes)?),
        };
        let max_manual_snapshots = match t.remove(MAX_MANUAL_SNAPSHOTS_KEY) {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| TierKeyError::Count {
                        key: MAX_MANUAL_SNAPSHOTS_KEY,
                        value: v.to_string(),
                    })?,
            ),
        };
        Ok(Limits {
            min_snapshot_frequency,
            max_snapshot_retention,
            allowed_sizes,
            max_manual_snapshots,
        })
    }

    /// The most manual snapshots of a kind a namespace may hold.
    pub fn max_manual_snapshots(&self) -> Option<usize> {
        self.max_manual_snapshots
    }

    /// What `asked` exceeds, as a sentence naming the limit; `None` when
    /// it keeps within them. Retention is bounded only where snapshots are
    /// scheduled.
    pub fn exceeded(&self, asked: &Asked<'_>) -> Option<String> {
        let seconds = |d: Option<&Duration>| d.and_then(Duration::seconds);
        let frequency = seconds(asked.snapshot_frequency);
        if let (Some(every), Some(min)) = (frequency, &self.min_snapshot_frequency)
            && min.seconds().is_some_and(|min| every < min)
        {
            return Some(format!(
                "spec.snapshotFrequency {} is more often than the tier allows ({MIN_SNAPSHOT_FREQUENCY_KEY} {min})",
                asked
                    .snapshot_frequency
                    .map(Duration::as_str)
                    .unwrap_or_default(),
            ));
        }
        if let (Some(_), Some(max)) = (frequency, &self.max_snapshot_retention) {
            match seconds(asked.snapshot_retention) {
                None => {
                    return Some(format!(
                        "spec.snapshotRetention is not set, so scheduled snapshots would be kept forever; the tier keeps them at most {max} ({MAX_SNAPSHOT_RETENTION_KEY}): set spec.snapshotRetention"
                    ));
                }
                Some(keep) if max.seconds().is_some_and(|max| keep > max) => {
                    return Some(format!(
                        "spec.snapshotRetention {} is longer than the tier allows ({MAX_SNAPSHOT_RETENTION_KEY} {max})",
                        asked
                            .snapshot_retention
                            .map(Duration::as_str)
                            .unwrap_or_default(),
                    ));
                }
                Some(_) => {}
            }
        }
        if let (Some(size), Some(allowed)) =
            (asked.size.filter(|s| !s.is_empty()), &self.allowed_sizes)
            && !allowed.iter().any(|a| a == size)
        {
            return Some(format!(
                "spec.size {size} is not one the tier allows ({ALLOWED_SIZES_KEY}: {})",
                allowed.join(", ")
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(tier: Value) -> Result<Limits, TierKeyError> {
        let mut tier = tier;
        let limits = Limits::take(&mut tier)?;
        assert!(
            tier.as_object()
                .is_none_or(|t| t.keys().all(|k| k == "strategy")),
            "limit keys left for the provider: {tier}"
        );
        Ok(limits)
    }

    fn asked<'a>(
        frequency: Option<&'a str>,
        retention: Option<&'a str>,
        size: Option<&'a str>,
    ) -> Asked<'a> {
        // Durations live as long as the test: leaked, a few bytes.
        let parse = |d: &str| -> &'a Duration {
            Box::leak(Box::new(d.parse().unwrap_or_else(|e| panic!("{e}"))))
        };
        Asked {
            snapshot_frequency: frequency.map(parse),
            snapshot_retention: retention.map(parse),
            size,
        }
    }

    #[test]
    fn a_cr_asking_for_more_than_its_tier_allows_is_told_which_limit() {
        let l = limits(json!({"strategy": {}, "minSnapshotFrequency": "1d", "maxSnapshotRetention": "7d", "allowedSizes": ["cache.t3.micro"]}))
            .unwrap_or_else(|e| panic!("{e}"));
        let refused = |a: Asked<'_>, needle: &str| {
            let e = l.exceeded(&a).unwrap_or_default();
            assert!(e.contains(needle), "{e}");
        };
        refused(
            asked(Some("1h"), Some("1d"), None),
            "spec.snapshotFrequency 1h is more often than the tier allows (minSnapshotFrequency 1d)",
        );
        refused(
            asked(Some("1d"), Some("30d"), None),
            "spec.snapshotRetention 30d is longer than the tier allows (maxSnapshotRetention 7d)",
        );
        refused(asked(Some("1d"), None, None), "kept forever");
        refused(
            asked(None, None, Some("cache.r6g.16xlarge")),
            "allowedSizes: cache.t3.micro",
        );
        for within in [
            asked(Some("1d"), Some("7d"), Some("cache.t3.micro")),
            asked(Some("2d"), Some("1d"), None),
            // Retention matters only where snapshots are scheduled.
            asked(None, None, None),
            asked(Some("0"), None, Some("")),
        ] {
            assert_eq!(l.exceeded(&within), None);
        }
        // No limits: anything goes.
        let open = limits(json!({"strategy": {}})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(open.exceeded(&asked(Some("1m"), None, Some("any"))), None);
    }

    #[test]
    fn malformed_limits_name_the_key() {
        for (tier, key) in [
            (
                json!({"minSnapshotFrequency": "daily"}),
                "minSnapshotFrequency",
            ),
            (json!({"maxSnapshotRetention": 7}), "maxSnapshotRetention"),
            (json!({"maxSnapshotRetention": "0"}), "maxSnapshotRetention"),
            (json!({"allowedSizes": "cache.t3.micro"}), "allowedSizes"),
        ] {
            let e = limits(tier)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with(key), "{e}");
        }
    }

    #[test]
    fn max_manual_snapshots_is_a_whole_number() {
        assert_eq!(
            limits(json!({"maxManualSnapshots": 10, "strategy": {}}))
                .map(|l| l.max_manual_snapshots()),
            Ok(Some(10))
        );
        assert_eq!(
            limits(json!({"strategy": {}})).map(|l| l.max_manual_snapshots()),
            Ok(None)
        );
        for bad in [json!("10"), json!(-1), json!(2.5)] {
            assert!(
                limits(json!({"maxManualSnapshots": bad})).is_err(),
                "{bad} accepted"
            );
        }
    }
}
