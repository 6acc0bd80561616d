//! Postgres, Redis, BlobStorage and SMTPCredentialSet: one spec shape each.

use super::common::{ResourceTypeSpec, ResourceTypeStatus, RestoreSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A PostgreSQL database; the Secret holds `username`, `password`, `host`, `port`, `database`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "Postgres",
    plural = "postgres",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct PostgresSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
    #[serde(flatten)]
    pub restore: RestoreSpec,
}

/// A Redis cache; the Secret holds `uri` and `port`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "Redis",
    plural = "redis",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct RedisSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
    #[serde(flatten)]
    pub restore: RestoreSpec,
}

/// An object-storage bucket; the Secret holds `bucketName`, `bucketRegion`, `credentialKeyID`, `credentialSecretKey`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "BlobStorage",
    plural = "blobstorages",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct BlobStorageSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
}

/// SMTP credentials; the Secret holds `username`, `password`, `host`, `port`, `tls`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "SMTPCredentialSet",
    plural = "smtpcredentialsets",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct SMTPCredentialSetSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
}
