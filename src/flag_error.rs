//! Flags that cannot work together or at all: each error names the flag
//! (and its environment variable) and what to set instead.

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FlagError {
    #[error("--shard-count (SHARD_COUNT) must be at least 1")]
    ShardCount,
    #[error(
        "--shard-index (SHARD_INDEX) is {index}, but shards are numbered 0 to {} with --shard-count {count}",
        count - 1
    )]
    ShardIndex { index: u32, count: u32 },
    #[error(
        "--leader-election-renew-deadline must be shorter than --leader-election-lease-duration"
    )]
    RenewDeadline,
    #[error(
        "--leader-election-retry-period must be positive and shorter than --leader-election-renew-deadline"
    )]
    RetryPeriod,
    #[error(
        "--cluster-id (CLUSTER_ID) {id:?} cannot prefix valid AWS identifiers: only letters and digits are kept, and the first one must be a letter (RDS and ElastiCache identifiers must start with a letter); choose e.g. \"c{kept}\""
    )]
    ClusterId { id: String, kept: String },
    #[error("--extra-tag (EXTRA_TAGS) {0:?} is not key=value")]
    Tag(String),
    #[error("{0:?} is not a duration: give a whole number of seconds, at least 1, e.g. 300")]
    Seconds(String),
}
