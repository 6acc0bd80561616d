//! Sharding: with `--shard-count N`, N groups of replicas split the
//! namespaces between them by a stable hash of the namespace name, each
//! group electing its leader on a Lease of its own. A namespace's CRs are
//! reconciled by exactly one shard; within a shard, standbys take over a
//! dead leader's work within the lease duration, as without sharding.

/// A shard that cannot be: each error names the flags to change.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ShardError {
    #[error("--shard-count (SHARD_COUNT) must be at least 1")]
    Count,
    #[error(
        "--shard-index (SHARD_INDEX) is {index}, but shards are numbered 0 to {} with --shard-count {count}",
        count - 1
    )]
    Index { index: u32, count: u32 },
}

/// Which shard this process is, of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Default for Shard {
    /// One shard: every namespace.
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// Refuses what cannot work, naming the flags.
    pub fn new(index: u32, count: u32) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::Count);
        }
        if index >= count {
            return Err(ShardError::Index { index, count });
        }
        Ok(Shard { index, count })
    }

    /// The shard of `namespace` among `count`.
    pub fn of(namespace: &str, count: u32) -> u32 {
        (fnv1a(namespace) % u64::from(count.max(1))) as u32
    }

    /// Whether this shard reconciles the CRs of `namespace`.
    pub fn owns(&self, namespace: &str) -> bool {
        self.count == 1 || Shard::of(namespace, self.count) == self.index
    }

    /// The Lease this shard's replicas elect a leader on: `base` alone
    /// without sharding (unchanged for existing installs).
    pub fn lease_name(&self, base: &str) -> String {
        if self.count == 1 {
            base.to_string()
        } else {
            format!("{base}-shard-{}-of-{}", self.index, self.count)
        }
    }
}

/// 64-bit FNV-1a, spelled out: the assignment must not change between
/// processes, builds or Rust versions (std's hashers may).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_so_it_never_changes() {
        // Published FNV-1a 64 test vectors: "" and "a".
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Shard::of("a", 7), (0xaf63_dc4c_8601_ec8c_u64 % 7) as u32);
    }

    #[test]
    fn every_namespace_has_exactly_one_shard() {
        for count in 1..6 {
            for ns in ["default", "app", "team-a", "team-b", "kube-system", ""] {
                let owners = (0..count)
                    .filter(|&i| Shard::new(i, count).is_ok_and(|s| s.owns(ns)))
                    .count();
                assert_eq!(owners, 1, "{ns} among {count}");
            }
        }
    }

    #[test]
    fn impossible_shards_name_their_flags_and_one_shard_keeps_the_lease() {
        let zero = Shard::new(0, 0).unwrap_err().to_string();
        assert!(zero.contains("--shard-count"), "{zero}");
        let over = Shard::new(2, 2).unwrap_err().to_string();
        assert!(
            over.contains("--shard-index") && over.contains("0 to 1"),
            "{over}"
        );
        assert_eq!(Shard::default().lease_name("cro"), "cro");
        assert_eq!(
            Shard::new(1, 3).map(|s| s.lease_name("cro")),
            Ok("cro-shard-1-of-3".to_string())
        );
    }
}
