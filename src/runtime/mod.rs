//! What any Kubernetes controller needs and none of this operator's kinds
//! or providers: watches and the shared caches on them, the client whose
//! writes go behind the fence, sharding, and text others wrote made safe
//! to print. It names no resource kind and
//! no provider (`tests/shape.rs` checks), so it can become a crate of its
//! own.

pub mod cache;
pub mod fenced_client;
pub mod printable;
pub mod shard;
pub mod watch;
