//! PostgresSnapshot and RedisSnapshot.

use super::common::{SnapshotSpec, SnapshotStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A manual snapshot of the Postgres CR named in `resourceName`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "PostgresSnapshot",
    doc = "A manual snapshot of the Postgres named in `spec.resourceName` (same namespace): an RDS DB snapshot for an AWS Postgres. `status.snapshotID` holds the cloud's identifier once `complete`; a Postgres with `restoreFromSnapshot` naming this CR is created from it. Deleting the CR deletes the snapshot unless `spec.skipDelete` is set.",
    category = "cloudresources",
    plural = "postgressnapshots",
    namespaced,
    status = "SnapshotStatus",
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".spec.resourceName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
)]
pub struct PostgresSnapshotSpec {
    #[serde(flatten)]
    pub snapshot: SnapshotSpec,
}

/// A manual snapshot of the Redis CR named in `resourceName`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "RedisSnapshot",
    doc = "A manual snapshot of the Redis named in `spec.resourceName` (same namespace): an ElastiCache snapshot for an AWS Redis. `status.snapshotID` holds the cloud's identifier once `complete`; a Redis with `restoreFromSnapshot` naming this CR is created from it. Deleting the CR deletes the snapshot unless `spec.skipDelete` is set.",
    category = "cloudresources",
    plural = "redissnapshots",
    namespaced,
    status = "SnapshotStatus",
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".spec.resourceName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
)]
pub struct RedisSnapshotSpec {
    #[serde(flatten)]
    pub snapshot: SnapshotSpec,
}
