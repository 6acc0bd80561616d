//! What any Kubernetes controller needs and none of this operator's kinds
//! or providers: watches and the shared caches on them, leader election
//! on a Lease, the client whose writes go behind the fence, sharding, the
//! metrics and probe endpoints, and text others wrote made safe to print. A crate of its own: it names no resource kind and no
//! provider, and depends on no crate of the operator's but the provider
//! API, for the fence (`tests/shape.rs` checks both).

pub mod cache;
pub mod events;
pub mod fenced_client;
pub mod lease;
#[cfg(feature = "testing")]
pub mod mock_api;
pub mod own_writes;
pub mod printable;
pub mod serve;
pub mod shard;
pub mod share;
pub mod watch;
