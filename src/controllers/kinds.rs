//! The six kinds as the controllers see them: Postgres, Redis,
//! BlobStorage and SMTPCredentialSet share a spec and status
//! ([`ResourceCr`]); PostgresSnapshot and RedisSnapshot snapshot a parent
//! ([`SnapshotCr`]). How each status reads and is written
//! ([`KindStatus`]) lives here too; what reconciling them does lives in
//! `resource` and `snapshot`.

use cro_provider_api::ResourceKind;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::object::HasStatus;
use serde_json::Value;

use crate::{
    api::{
        BlobStorage, Postgres, PostgresSnapshot, PostgresSnapshotSpec, Redis, RedisSnapshot,
        RedisSnapshotSpec, ResourceTypeSpec, ResourceTypeStatus, SMTPCredentialSet, SnapshotSpec,
        SnapshotStatus,
    },
    reconcile::{KindStatus, Managed, Report},
};

/// A kind with a `ResourceTypeSpec` and `ResourceTypeStatus`.
pub trait ResourceCr: Managed + HasStatus<Status = ResourceTypeStatus> {
    const KIND: ResourceKind;
    fn spec(&self) -> &ResourceTypeSpec;
    /// `spec.restoreFromSnapshot` (Postgres and Redis).
    fn restore_from_snapshot(&self) -> Option<&str> {
        None
    }
}

impl ResourceCr for Postgres {
    const KIND: ResourceKind = ResourceKind::Postgres;
    fn spec(&self) -> &ResourceTypeSpec {
        &self.spec.resource
    }
    fn restore_from_snapshot(&self) -> Option<&str> {
        self.spec.restore.restore_from_snapshot.as_deref()
    }
}

impl ResourceCr for Redis {
    const KIND: ResourceKind = ResourceKind::Redis;
    fn spec(&self) -> &ResourceTypeSpec {
        &self.spec.resource
    }
    fn restore_from_snapshot(&self) -> Option<&str> {
        self.spec.restore.restore_from_snapshot.as_deref()
    }
}

impl ResourceCr for BlobStorage {
    const KIND: ResourceKind = ResourceKind::BlobStorage;
    fn spec(&self) -> &ResourceTypeSpec {
        &self.spec.resource
    }
}

impl ResourceCr for SMTPCredentialSet {
    const KIND: ResourceKind = ResourceKind::Smtp;
    fn spec(&self) -> &ResourceTypeSpec {
        &self.spec.resource
    }
}

impl KindStatus for ResourceTypeStatus {
    fn report(&self) -> Option<Report> {
        Some(Report {
            phase: self.phase?,
            message: self.message.clone().unwrap_or_default(),
            strategy: self.strategy.clone(),
            provider: self.provider.clone(),
            version: self.version.clone(),
            secret_ref: self.secret_ref.clone(),
            snapshot_id: None,
            instance_id: None,
            conditions: Vec::new(),
            pending: self.pending_changes.clone(),
            plan_hash: self.plan_hash.clone(),
            adoption_hash: self.adoption_hash.clone(),
            rotation: self.credentials_rotation.clone(),
            health: None,
            observed_inputs: self.observed_inputs.clone(),
        })
    }

    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    fn json(report: &Report, conditions: Vec<Condition>, generation: Option<i64>) -> Value {
        let status = ResourceTypeStatus {
            strategy: report.strategy.clone(),
            provider: report.provider.clone(),
            version: report.version.clone(),
            secret_ref: report.secret_ref.clone(),
            phase: Some(report.phase),
            message: Some(report.message.clone()),
            conditions,
            observed_generation: generation,
            pending_changes: report.pending.clone(),
            plan_hash: report.plan_hash.clone(),
            adoption_hash: report.adoption_hash.clone(),
            credentials_rotation: report.rotation.clone(),
            observed_inputs: report.observed_inputs.clone(),
        };
        serde_json::to_value(status).unwrap_or(Value::Null)
    }
}

/// A snapshot kind, and the kind it snapshots.
pub trait SnapshotCr: Managed + HasStatus<Status = SnapshotStatus> {
    type Parent: ResourceCr;
    /// A new CR `name` of this kind (as a schedule makes them).
    fn new(name: &str, spec: SnapshotSpec) -> Self;
    fn spec(&self) -> &SnapshotSpec;
}

impl SnapshotCr for PostgresSnapshot {
    type Parent = Postgres;
    fn new(name: &str, snapshot: SnapshotSpec) -> Self {
        PostgresSnapshot::new(name, PostgresSnapshotSpec { snapshot })
    }
    fn spec(&self) -> &SnapshotSpec {
        &self.spec.snapshot
    }
}

impl SnapshotCr for RedisSnapshot {
    type Parent = Redis;
    fn new(name: &str, snapshot: SnapshotSpec) -> Self {
        RedisSnapshot::new(name, RedisSnapshotSpec { snapshot })
    }
    fn spec(&self) -> &SnapshotSpec {
        &self.spec.snapshot
    }
}

impl KindStatus for SnapshotStatus {
    fn report(&self) -> Option<Report> {
        Some(Report {
            strategy: self.strategy.clone(),
            snapshot_id: self.snapshot_id.clone(),
            ..Report::new(self.phase?, self.message.clone().unwrap_or_default())
        })
    }

    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    fn json(report: &Report, conditions: Vec<Condition>, generation: Option<i64>) -> Value {
        let status = SnapshotStatus {
            snapshot_id: report.snapshot_id.clone(),
            strategy: report.strategy.clone(),
            phase: Some(report.phase),
            message: Some(report.message.clone()),
            conditions,
            observed_generation: generation,
        };
        serde_json::to_value(status).unwrap_or(Value::Null)
    }
}
