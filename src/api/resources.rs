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
    doc = "A PostgreSQL database for an application. `spec.type` picks the provider through the `cloud-resource-config` ConfigMap (AWS RDS, or a Deployment in the cluster), `spec.tier` the settings in that provider's strategies ConfigMap; the connection details are written to the Secret `spec.secretRef` names (keys `username`, `password`, `host`, `port`, `database`).",
    category = "cloudresources",
    plural = "postgres",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Connectable","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Connectable\")].status"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
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
    doc = "A Redis cache for an application. `spec.type` picks the provider through the `cloud-resource-config` ConfigMap (AWS ElastiCache, or a Deployment in the cluster), `spec.tier` the settings in that provider's strategies ConfigMap; the connection details are written to the Secret `spec.secretRef` names (keys `uri`, `port`).",
    category = "cloudresources",
    plural = "redis",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Connectable","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Connectable\")].status"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
)]
pub struct RedisSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
    #[serde(flatten)]
    pub restore: RestoreSpec,
}

/// An object-storage bucket; the Secret holds `bucketName`, `bucketRegion`, `credentialKeyID`, `credentialSecretKey` (and `bucketEndpoint` for an in-cluster store).
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "integreatly.org",
    version = "v1alpha1",
    kind = "BlobStorage",
    doc = "An object-storage bucket for an application. `spec.type` picks the provider through the `cloud-resource-config` ConfigMap (an AWS S3 bucket with its own IAM user, or in the cluster), `spec.tier` the settings in that provider's strategies ConfigMap; the details are written to the Secret `spec.secretRef` names (keys `bucketName`, `bucketRegion`, `credentialKeyID`, `credentialSecretKey`; an in-cluster store of its own adds `bucketEndpoint`).",
    category = "cloudresources",
    plural = "blobstorages",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Connectable","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Connectable\")].status"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
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
    doc = "SMTP credentials for an application to send mail. `spec.type` picks the provider through the `cloud-resource-config` ConfigMap (AWS SES through an IAM user, or in the cluster), `spec.tier` the settings in that provider's strategies ConfigMap; the details are written to the Secret `spec.secretRef` names (keys `username`, `password`, `host`, `port`, `tls`).",
    category = "cloudresources",
    plural = "smtpcredentialsets",
    namespaced,
    status = "ResourceTypeStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".status.provider"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Connectable","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Connectable\")].status"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#
)]
pub struct SMTPCredentialSetSpec {
    #[serde(flatten)]
    pub resource: ResourceTypeSpec,
}
