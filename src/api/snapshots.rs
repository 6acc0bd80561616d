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
    plural = "postgressnapshots",
    namespaced,
    status = "SnapshotStatus",
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".spec.resourceName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
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
    plural = "redissnapshots",
    namespaced,
    status = "SnapshotStatus",
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".spec.resourceName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct RedisSnapshotSpec {
    #[serde(flatten)]
    pub snapshot: SnapshotSpec,
}
