//! What a tier lets a CR ask for: `minSnapshotFrequency` and
//! `maxSnapshotRetention` (durations such as `1d`) bound
//! `spec.snapshotFrequency` and `spec.snapshotRetention`, and
//! `allowedSizes` lists the `spec.size` values (ElastiCache node types) a
//! CR may name. A tier with none lets a CR ask for anything, as in the Go
//! operator; a CR asking for more is `failed` naming the limit.

use serde_json::Value;

use super::TierKeyError;

pub const MIN_SNAPSHOT_FREQUENCY_KEY: &str = "minSnapshotFrequency";
pub const MAX_SNAPSHOT_RETENTION_KEY: &str = "maxSnapshotRetention";
pub const ALLOWED_SIZES_KEY: &str = "allowedSizes";

/// A duration as the tier wrote it, and in seconds.
#[derive(Clone, Debug, PartialEq)]
struct Bound {
    text: String,
    seconds: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    min_snapshot_frequency: Option<Bound>,
    max_snapshot_retention: Option<Bound>,
    allowed_sizes: Option<Vec<String>>,
}

/// What a CR asks for that a tier may limit.
pub struct Asked<'a> {
    pub snapshot_frequency: Option<&'a str>,
    pub snapshot_retention: Option<&'a str>,
    pub size: Option<&'a str>,
}

/// A spec duration in seconds; `None` when absent, `0` or unreadable (the
/// spec's own check reports that).
fn spec_seconds(value: Option<&str>) -> Option<u64> {
    value
        .and_then(|v| crate::api::seconds(v).ok().flatten())
        .filter(|s| *s > 0)
}

impl Limits {
    /// Takes the limit keys out of `tier`.
    pub fn take(tier: &mut Value) -> Result<Limits, TierKeyError> {
        let Some(t) = tier.as_object_mut() else {
            return Ok(Limits::default());
        };
        let mut bound = |key: &'static str| -> Result<Option<Bound>, TierKeyError> {
            let Some(value) = t.remove(key) else {
                return Ok(None);
            };
            let text = value.as_str().unwrap_or_default().to_string();
            match crate::api::seconds(&text) {
                Ok(Some(seconds)) if seconds > 0 => Ok(Some(Bound { text, seconds })),
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
        Ok(Limits {
            min_snapshot_frequency,
            max_snapshot_retention,
            allowed_sizes,
        })
    }

    /// What `asked` exceeds, as a sentence naming the limit; `None` when
    /// it keeps within them. Retention is bounded only where snapshots are
    /// scheduled.
    pub fn exceeded(&self, asked: &Asked<'_>) -> Option<String> {
        let frequency = spec_seconds(asked.snapshot_frequency);
        if let (Some(every), Some(min)) = (frequency, &self.min_snapshot_frequency)
            && every < min.seconds
        {
            return Some(format!(
                "spec.snapshotFrequency {} is more often than the tier allows ({MIN_SNAPSHOT_FREQUENCY_KEY} {})",
                asked.snapshot_frequency.unwrap_or_default(),
                min.text
            ));
        }
        if let (Some(_), Some(max)) = (frequency, &self.max_snapshot_retention) {
            match spec_seconds(asked.snapshot_retention) {
                None => {
                    return Some(format!(
                        "spec.snapshotRetention is not set, so scheduled snapshots would be kept forever; the tier keeps them at most {} ({MAX_SNAPSHOT_RETENTION_KEY}): set spec.snapshotRetention",
                        max.text
                    ));
                }
                Some(keep) if keep > max.seconds => {
                    return Some(format!(
                        "spec.snapshotRetention {} is longer than the tier allows ({MAX_SNAPSHOT_RETENTION_KEY} {})",
                        asked.snapshot_retention.unwrap_or_default(),
                        max.text
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
        Asked {
            snapshot_frequency: frequency,
            snapshot_retention: retention,
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
}
