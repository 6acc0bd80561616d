//! Spec and status types shared by several kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lenient;

/// A duration such as `1d`, `12h30m` or `0`: the Go operator's format
/// (its `types.Duration`), days, hours and minutes in that order, each
/// optional. Read once, wherever it is written (a CR's spec, a tier key),
/// and kept as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Duration {
    text: String,
    seconds: Option<u64>,
}

/// The CRD's pattern of a [`Duration`] (the Go operator's).
pub const DURATION_PATTERN: &str = r"^(0|([0-9]+d)?([0-9]+h)?([0-9]+m)?)$";

impl Duration {
    /// As written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// In seconds; `None` for `0` or empty (no schedule).
    pub fn seconds(&self) -> Option<u64> {
        self.seconds
    }
}

impl std::str::FromStr for Duration {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, DurationError> {
        Ok(Duration {
            seconds: seconds(text)?,
            text: text.to_string(),
        })
    }
}

impl std::fmt::Display for Duration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|e: DurationError| {
            serde::de::Error::custom(format!("{e}; write e.g. 1d, 12h30m, 45m or 0"))
        })
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": DURATION_PATTERN})
    }
}

/// Seconds in a duration of the CRD's format (`1d`, `12h30m`, `0`); `None`
/// for `0` or empty (no schedule). Units come in the order d, h, m, each
/// once, as the CRD's pattern has them, so a tier key reads exactly what a
/// CR field may hold.
pub fn seconds(duration: &str) -> Result<Option<u64>, DurationError> {
    const UNITS: [(char, u64); 3] = [('d', 86_400), ('h', 3_600), ('m', 60)];
    let text = || duration.to_string();
    let mut total = 0u64;
    let mut digits = String::new();
    let mut next_unit = 0;
    for c in duration.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let Some(at) = UNITS.iter().position(|(u, _)| *u == c) else {
            return Err(DurationError::UnknownUnit(text(), c));
        };
        if at < next_unit {
            return Err(DurationError::OutOfOrder(text()));
        }
        next_unit = at + 1;
        let unit = UNITS[at].1;
        let n: u64 = (digits.parse()).map_err(|_| DurationError::NoNumber(text(), c))?;
        total = total.saturating_add(n.saturating_mul(unit));
        digits.clear();
    }
    if !digits.trim_start_matches('0').is_empty() {
        return Err(DurationError::NoUnit(text()));
    }
    Ok((total > 0).then_some(total))
}

/// Why a text is not a duration of the CRD's format.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is not a duration: unknown unit {1:?}")]
    UnknownUnit(String, char),
    #[error("{0:?} is not a duration: units go in the order d, h, m, each once (e.g. 1d12h30m)")]
    OutOfOrder(String),
    #[error("{0:?} is not a duration: a number must come before {1:?}")]
    NoNumber(String, char),
    #[error("{0:?} is not a duration: the last number has no unit (d, h or m)")]
    NoUnit(String),
}

/// The spec of Postgres, Redis, BlobStorage and SMTPCredentialSet
/// (`ResourceTypeSpec` in the Go operator).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTypeSpec {
    /// Deployment type, a key of the `cloud-resource-config` ConfigMap
    /// (built in: `aws`, `managed`, `openshift`, `workshop`).
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[^\x00-\x1f\x7f]*$"))]
    pub r#type: String,
    /// Tier, a key in the provider's strategies ConfigMap (e.g. `development`, `production`).
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[^\x00-\x1f\x7f]*$"))]
    pub tier: String,
    /// Where the connection Secret is written.
    pub secret_ref: SecretRef,
    /// Apply disruptive modifications at once rather than in the maintenance window.
    #[serde(default, skip_serializing_if = "is_false")]
    pub apply_immediately: bool,
    /// Allow modifications of the cloud resource now (the caller is in its maintenance window); set back to false after a pass.
    #[serde(default, skip_serializing_if = "is_false")]
    pub maintenance_window: bool,
    /// Skip provider create/update calls (phase `paused`), e.g. during maintenance.
    #[serde(default, skip_serializing_if = "is_false")]
    pub skip_create: bool,
    /// Redis node type (e.g. `cache.t3.micro`); overrides the tier's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = r"^[^\x00-\x1f\x7f]*$"))]
    pub size: Option<String>,
    /// How often to take snapshots, e.g. `1d`, `12h30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_frequency: Option<Duration>,
    /// How long to keep snapshots, e.g. `7d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_retention: Option<Duration>,
}

/// What Postgres and Redis add to the shared spec: a clone.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct RestoreSpec {
    /// Create it from this snapshot CR of its kind (a PostgresSnapshot or
    /// RedisSnapshot in the same namespace, `complete`): a clone with this
    /// resource's tier. Read only while the resource is created; ignored
    /// once it exists.
    #[serde(
        default,
        rename = "restoreFromSnapshot",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 253))]
    pub restore_from_snapshot: Option<String>,
}

/// A reference to the output Secret.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SecretRef {
    /// Secret name (a DNS subdomain).
    #[schemars(length(min = 1, max = 253))]
    #[schemars(regex(
        pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    ))]
    pub name: String,
    /// Secret namespace; empty means the CR's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[schemars(regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"))]
    pub namespace: Option<String>,
}

/// Lifecycle phase, with the Go operator's exact strings.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub enum Phase {
    #[serde(rename = "in progress")]
    InProgress,
    #[serde(rename = "deletion in progress")]
    DeleteInProgress,
    #[serde(rename = "complete")]
    Complete,
    #[serde(rename = "paused")]
    Paused,
    #[serde(rename = "failed")]
    Failed,
}

impl Phase {
    /// Every phase, in the order above.
    pub const ALL: [Phase; 5] = [
        Phase::InProgress,
        Phase::DeleteInProgress,
        Phase::Complete,
        Phase::Paused,
        Phase::Failed,
    ];

    /// The exact string stored in `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::InProgress => "in progress",
            Phase::DeleteInProgress => "deletion in progress",
            Phase::Complete => "complete",
            Phase::Paused => "paused",
            Phase::Failed => "failed",
        }
    }
}

// In the schema a phase is a plain string, as in the Go operator's CRDs, so
// a status written by another operator version is never rejected.
impl JsonSchema for Phase {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Phase".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "One of: in progress, deletion in progress, complete, paused, failed."
        })
    }
    fn inline_schema() -> bool {
        true
    }
}

/// Status of Postgres, Redis, BlobStorage and SMTPCredentialSet.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTypeStatus {
    /// Provider name chosen for this CR (`aws`, `openshift`); sticky once set.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub strategy: Option<String>,
    /// Concrete provider, e.g. `aws-rds`, `openshift-postgres-template`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub provider: Option<String>,
    /// Engine version of the provisioned resource.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub version: Option<String>,
    /// The Secret that holds the connection details.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    #[schemars(schema_with = "status_secret_ref")]
    pub secret_ref: Option<SecretRef>,
    /// One of: in progress, deletion in progress, complete, paused, failed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub phase: Option<Phase>,
    /// What the operator is doing or waiting for, and for `failed`, what to change.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub message: Option<String>,
    /// Standard conditions; `Ready` is always present once reconciled.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient::conditions"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status describes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub observed_generation: Option<i64>,
    /// Differences between the live resource and its tier not applied
    /// yet, and when each applies.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient::list"
    )]
    pub pending_changes: Vec<PendingChange>,
    /// The hash of `pendingChanges` and the cloud resource they change:
    /// under a tier with `changePolicy: Plan`, annotating the CR with
    /// `integreatly.org/approve-plan` set to it applies exactly these
    /// changes, to that resource only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub plan_hash: Option<String>,
    /// Set when a cloud resource someone else made exists under the CR's
    /// identifier: annotating the CR with `integreatly.org/adopt` set to
    /// it adopts the resource (see the `Adopted` condition).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub adoption_hash: Option<String>,
    /// The last rotation of the resource's credentials.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub credentials_rotation: Option<CredentialsRotation>,
    /// A fingerprint of the CR's generation, labels and annotations that the
    /// last successful reconcile answered: a reconcile of the same inputs
    /// is a recheck, which may use batched cloud observations.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub observed_inputs: Option<String>,
}

/// A completed rotation of a resource's credentials.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsRotation {
    /// When the new credentials were in place (RFC 3339).
    pub rotated_at: String,
    /// The last `integreatly.org/rotate-credentials` value answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
}

/// One field of the live resource that differs from the tier.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PendingChange {
    /// The cloud API's field name (e.g. `DBInstanceClass`) or the
    /// in-cluster object's spec path.
    pub field: String,
    /// The value the resource has now.
    pub current: String,
    /// The value the tier asks for.
    pub desired: String,
    /// `now`, `maintenanceWindow` (set spec.maintenanceWindow; with
    /// spec.applyImmediately too, applied at once), `scheduled for the next
    /// maintenance window`, or `never: <reason>`.
    pub when: String,
    /// Applying it restarts the resource.
    #[serde(default, skip_serializing_if = "is_false")]
    pub restarts: bool,
}

/// The spec of PostgresSnapshot and RedisSnapshot.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.resourceName == oldSelf.resourceName",
    "message": "resourceName cannot change; create a new snapshot for another resource"
}]))]
pub struct SnapshotSpec {
    /// Name of the Postgres/Redis CR, in the same namespace, to snapshot.
    #[schemars(length(min = 1, max = 253))]
    pub resource_name: String,
    /// Keep the cloud snapshot when this CR is deleted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub skip_delete: bool,
}

/// Status of PostgresSnapshot and RedisSnapshot.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// Cloud identifier of the snapshot.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub snapshot_id: Option<String>,
    /// Provider name chosen for the snapshot (`aws`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub strategy: Option<String>,
    /// One of: in progress, deletion in progress, complete, failed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub phase: Option<Phase>,
    /// What the operator is doing or waiting for, and for `failed`, what to change.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub message: Option<String>,
    /// Standard conditions; `Ready` is always present once reconciled.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient::conditions"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status describes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::field"
    )]
    pub observed_generation: Option<i64>,
}

/// `status.secretRef` as the Go operator's schema has it: it writes
/// `{name: ""}` while a resource is in progress, and API servers before 1.30
/// (no validation ratcheting) would refuse every later status write on such
/// an object if the status schema were as strict as the spec's.
fn status_secret_ref(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "The Secret that holds the connection details.",
        "properties": {
            "name": {"type": "string", "description": "Secret name."},
            "namespace": {"type": "string", "description": "Secret namespace."}
        },
        "required": ["name"]
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_the_crd_format() {
        assert_eq!(seconds("1d"), Ok(Some(86_400)));
        assert_eq!(seconds("12h30m"), Ok(Some(45_000)));
        assert_eq!(seconds("1m"), Ok(Some(60)));
        assert_eq!(seconds("0"), Ok(None));
        assert_eq!(seconds(""), Ok(None));
        assert!(seconds("5").is_err_and(|e| e.to_string().contains("no unit")));
        assert!(seconds("1w").is_err_and(|e| e.to_string().contains("unknown unit")));
        assert!(seconds("h").is_err());
        // As the CRD's pattern: d, h, m in that order, each once.
        for out_of_order in ["1h1d", "30m2h", "1d1d"] {
            assert!(
                seconds(out_of_order).is_err_and(|e| e.to_string().contains("order d, h, m")),
                "{out_of_order}"
            );
        }
        for bad in ["1", "d", "1x", "-1d", "1h 2m"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_duration_reads_and_writes_as_its_text() {
        let spec: ResourceTypeSpec = serde_json::from_value(serde_json::json!({
            "type": "aws", "tier": "production", "secretRef": {"name": "s"},
            "snapshotFrequency": "1d12h", "snapshotRetention": "0"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let frequency = spec.snapshot_frequency.as_ref();
        assert_eq!(frequency.map(Duration::seconds), Some(Some(36 * 3600)));
        assert_eq!(
            spec.snapshot_retention.as_ref().map(Duration::seconds),
            Some(None)
        );
        let written = serde_json::to_value(&spec).unwrap_or_default();
        assert_eq!(written["snapshotFrequency"], "1d12h");
        let bad = serde_json::from_value::<ResourceTypeSpec>(serde_json::json!({
            "type": "aws", "tier": "production", "secretRef": {"name": "s"},
            "snapshotFrequency": "12h1d"
        }));
        let message = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("order d, h, m") && message.contains("write e.g. 1d"),
            "{message}"
        );
    }
}
