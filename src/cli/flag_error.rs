//! Flags that cannot work together or at all: each error names the flag
//! (and its environment variable) and what to set instead.

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FlagError {
    #[error(transparent)]
    Shard(#[from] cro_runtime::shard::ShardError),
    #[error(transparent)]
    LeaderElection(#[from] crate::leader::TimingError),
    #[error(transparent)]
    ClusterId(#[from] crate::providers::cluster_id::ClusterIdError),
    #[error("--extra-tag (EXTRA_TAGS) {0:?} is not key=value")]
    Tag(String),
    #[error("{0:?} is not a duration: give a whole number of seconds, at least 1, e.g. 300")]
    Seconds(String),
}
