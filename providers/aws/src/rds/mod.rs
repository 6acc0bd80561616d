//! Postgres as an RDS DB instance: what is RDS's own in observe → decide →
//! act over the steps shared with ElastiCache ([`crate::database`]):
//! - observe: the live instance as a plain [`Instance`] (tags included,
//!   from DescribeDBInstances itself, one instance or a page of a hundred);
//! - decide: [`differences`] and [`decide`], pure, from the instance, the
//!   tier's [`Desired`] state and the CR's gate to a [`Plan`];
//! - act: `Database::act` runs the plan's calls.
//!
//! Defaults are the Go operator's (`buildRDSCreateStrategy`,
//! pkg/providers/aws/provider_postgres.go), so an instance it created does
//! not read as drift: Multi-AZ on every tier, minor version upgrades off,
//! automated backups deleted with the instance. The master password is
//! generated once and kept in `<name>-aws-rds-credentials` (its Secret).

use std::collections::BTreeMap;

use aws_sdk_rds::{
    Client,
    operation::{
        delete_db_instance::DeleteDBInstanceError, modify_db_instance::ModifyDBInstanceError,
    },
};
use cro_provider_api::{
    ConnectionDetails, Deletion, Health, IdentifierRules, Outcome, ProviderError, Provisioned,
    ResourceRequest, Timing,
};

use crate::clients::Clients;
use crate::cloud_metrics::Target;
use crate::credentials::{self, CredentialsStore};
use crate::database::{self, Database, Plan, Removal, ServiceInfo, State};
use crate::errors::{Answer, Created, created};
use crate::listing::Listing;
use crate::network::{self, Engine, Placement};
use crate::plan::{Difference, Split, difference};
use crate::sdk::VpcHint;
use crate::strategy::Tier;
use crate::versions::{is_upgrade, postgres_major};
use crate::{At, describe, maintenance, service_updates, tags};

pub mod instance;
mod strategy;

pub use instance::{Instance, Settings};
pub use strategy::{CreateStrategy, DeleteStrategy, Field};

pub const PROVIDER: &str = "aws-rds";

/// What this operator last saw of RDS in one account and region, shared
/// by every Postgres there (see [`crate::listing`]).
pub struct AccountCache {
    pub instances: Listing<Instance>,
    /// Pending maintenance, by instance ARN (see [`crate::maintenance`]).
    maintenance: Listing<Vec<cro_provider_api::Maintenance>>,
    /// The memory of each instance class EC2 has answered for.
    class_memory: tokio::sync::Mutex<std::collections::HashMap<String, Option<i64>>>,
}

impl AccountCache {
    pub fn new(memory: &std::sync::Arc<cro_provider_api::Memory>) -> Self {
        AccountCache {
            instances: Listing::new(memory),
            maintenance: Listing::new(memory),
            class_memory: Default::default(),
        }
    }
}

pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-rds-credentials")
}

/// What the tier asks for, with the operator's (the Go operator's)
/// defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// No default: AWS picks its current default major for a new instance,
    /// and an existing one keeps its version.
    pub engine_version: Option<String>,
    /// `AllowMajorVersionUpgrade` (ModifyDBInstance's name): an existing
    /// instance moves to a higher major only when the tier says so. The Go
    /// operator forced its supported version at create and never made a
    /// major upgrade; a tier version it overrode must not become one.
    pub allow_major_upgrade: bool,
    pub settings: Settings,
    pub max_storage: i32,
    pub backup_window: Option<String>,
    pub maintenance_window: Option<String>,
    pub db_name: String,
    pub port: i32,
}

/// States an instance does not leave by itself.
const STUCK: [&str; 2] = ["failed", "incompatible-restore"];

/// States AWS brings an instance out of once their cause is fixed, and
/// what fixes it (RDS User Guide, "DB instance status").
const IMPAIRED: [(&str, &str); 4] = [
    (
        "storage-full",
        "raise AllocatedStorage or MaxAllocatedStorage in the tier, or free space",
    ),
    (
        "incompatible-parameters",
        "fix the DB parameter group's values (the instance restarts with them)",
    ),
    (
        "incompatible-network",
        "free IP addresses in the DB subnet group's subnets, or fix its subnets",
    ),
    (
        "inaccessible-encryption-credentials",
        "enable the KMS key again and restore the instance's access to it",
    ),
];

/// A disruptive change: for the maintenance window, or already scheduled
/// there when AWS holds the desired value as pending.
fn gated(
    field: Field,
    have: impl ToString,
    want: impl ToString,
    pending: bool,
    restarts: bool,
) -> Difference<Field> {
    let timing = if pending {
        Timing::Scheduled
    } else {
        Timing::MaintenanceWindow
    };
    difference(field, have, want, timing, restarts)
}

/// Class, storage growth, engine upgrades, Multi-AZ and the port.
fn disruptive(have: &Instance, want: &Desired) -> Vec<Difference<Field>> {
    let (h, w, pending) = (&have.settings, &want.settings, &have.pending);
    let mut out = Vec::new();
    if h.class != w.class {
        let scheduled = pending.class.as_ref() == Some(&w.class);
        out.push(gated(
            Field::DbInstanceClass,
            &h.class,
            &w.class,
            scheduled,
            true,
        ));
    }
    if h.storage < w.storage {
        let scheduled = pending.storage == Some(w.storage);
        out.push(gated(
            Field::AllocatedStorage,
            h.storage,
            w.storage,
            scheduled,
            false,
        ));
    } else if h.storage > w.storage && !autoscaled(have) {
        let never = Timing::Never("RDS storage cannot shrink".into());
        out.push(difference(
            Field::AllocatedStorage,
            h.storage,
            w.storage,
            never,
            false,
        ));
    }
    let current = &have.engine_version;
    if let Some(wanted) = want.engine_version.as_ref().filter(|v| *v != current) {
        let major = postgres_major(current) != postgres_major(wanted);
        out.push(if is_upgrade(current, wanted) && (!major || want.allow_major_upgrade) {
            let scheduled = pending.engine_version.as_ref() == Some(wanted);
            gated(Field::EngineVersion, current, wanted, scheduled, true)
        } else if is_upgrade(current, wanted) {
            let why = "a major version upgrade is made only when the tier's createStrategy sets AllowMajorVersionUpgrade: true";
            difference(Field::EngineVersion, current, wanted, Timing::Never(why.into()), true)
        } else {
            let never = Timing::Never("engine versions only move up".into());
            difference(Field::EngineVersion, current, wanted, never, true)
        });
    }
    if h.multi_az != w.multi_az {
        let scheduled = pending.multi_az == Some(w.multi_az);
        out.push(gated(
            Field::MultiAz,
            h.multi_az,
            w.multi_az,
            scheduled,
            false,
        ));
    }
    // The Go operator moved an instance to the tier's Port
    // (buildRDSUpdateStrategy); its Secret's port follows the endpoint.
    if let Some(port) = have.port.filter(|p| *p != want.port) {
        let scheduled = pending.port == Some(want.port);
        out.push(gated(Field::Port, port, want.port, scheduled, true));
    }
    out
}

/// The CA the Go operator moved instances off, and the one it moved them
/// to, in the maintenance window (buildRDSUpdateStrategy).
const RETIRED_CA: &str = "rds-ca-2019";
const NEW_CA: &str = "rds-ca-rsa2048-g1";

/// An instance still on the retired CA moves to its successor in the
/// maintenance window, as the Go operator moved it (clients must trust
/// the new CA: the instance restarts).
fn ca_certificate(have: &Instance) -> Option<Difference<Field>> {
    (have.ca_certificate == RETIRED_CA).then(|| {
        let window = match have.pending.ca_certificate.as_deref() {
            Some(NEW_CA) => Timing::Scheduled,
            _ => Timing::MaintenanceWindow,
        };
        difference(
            Field::CaCertificateIdentifier,
            RETIRED_CA,
            NEW_CA,
            window,
            true,
        )
    })
}

/// Storage autoscaling grew the instance within its MaxAllocatedStorage:
/// AWS's doing, as the tier allows, not drift.
fn autoscaled(have: &Instance) -> bool {
    have.max_storage
        .is_some_and(|max| have.settings.storage <= max)
}

/// Modifications queued on the instance (by the Go operator, a person, or
/// AWS) that the tier does not ask for: shown as scheduled, as AWS will
/// make them in its window; never pulled forward, never undone.
fn queued(have: &Instance, want: &Desired) -> Vec<Difference<Field>> {
    let (h, w, p) = (&have.settings, &want.settings, &have.pending);
    let scheduled = |field: Field, current: String, queued: String| {
        difference(field, current, queued, Timing::Scheduled, false)
    };
    let mut out = Vec::new();
    if let Some(class) = p.class.as_ref().filter(|c| **c != w.class) {
        out.push(scheduled(
            Field::DbInstanceClass,
            h.class.clone(),
            class.clone(),
        ));
    }
    if let Some(storage) = p.storage.filter(|s| *s != w.storage) {
        out.push(scheduled(
            Field::AllocatedStorage,
            h.storage.to_string(),
            storage.to_string(),
        ));
    }
    if let Some(version) =
        (p.engine_version.as_ref()).filter(|v| want.engine_version.as_ref() != Some(*v))
    {
        out.push(scheduled(
            Field::EngineVersion,
            have.engine_version.clone(),
            version.clone(),
        ));
    }
    if let Some(multi_az) = p.multi_az.filter(|m| *m != w.multi_az) {
        out.push(scheduled(
            Field::MultiAz,
            h.multi_az.to_string(),
            multi_az.to_string(),
        ));
    }
    if let Some(retention) = p.backup_retention.filter(|r| *r != w.backup_retention) {
        out.push(scheduled(
            Field::BackupRetentionPeriod,
            h.backup_retention.to_string(),
            retention.to_string(),
        ));
    }
    out
}

/// Settings AWS changes online (see `Timing::Online`); backup retention to
/// or from 0 restarts the instance, so it is disruptive.
fn safe(have: &Instance, want: &Desired) -> Vec<Difference<Field>> {
    let (h, w, now) = (&have.settings, &want.settings, Timing::Online);
    let mut out = Vec::new();
    let retention = Field::BackupRetentionPeriod;
    let (from, to) = (h.backup_retention, w.backup_retention);
    if from != to {
        out.push(if from == 0 || to == 0 {
            let scheduled = have.pending.backup_retention == Some(to);
            gated(retention, from, to, scheduled, true)
        } else {
            difference(retention, from, to, now.clone(), false)
        });
    }
    if have.max_storage != Some(want.max_storage) {
        let current = have.max_storage.map_or("unset".into(), |m| m.to_string());
        let max = Field::MaxAllocatedStorage;
        out.push(difference(
            max,
            current,
            want.max_storage,
            now.clone(),
            false,
        ));
    }
    let flags = [
        (
            Field::DeletionProtection,
            h.deletion_protection,
            w.deletion_protection,
        ),
        (
            Field::AutoMinorVersionUpgrade,
            h.auto_minor_version_upgrade,
            w.auto_minor_version_upgrade,
        ),
        (
            Field::PubliclyAccessible,
            h.publicly_accessible,
            w.publicly_accessible,
        ),
    ];
    for (field, h, w) in flags.into_iter().filter(|(_, h, w)| h != w) {
        out.push(difference(field, h, w, now.clone(), false));
    }
    let windows = [
        (
            Field::PreferredBackupWindow,
            &have.backup_window,
            &want.backup_window,
        ),
        (
            Field::PreferredMaintenanceWindow,
            &have.maintenance_window,
            &want.maintenance_window,
        ),
    ];
    for (field, h, w) in windows {
        if let Some(w) = w.as_ref().filter(|w| !w.eq_ignore_ascii_case(h)) {
            out.push(difference(field, h, w, now.clone(), false));
        }
    }
    out
}

database::live_and_sections!(Instance, CreateStrategy, DeleteStrategy);

// The instance `id` with its tags, if it exists; every instance of the
// account and region with their tags, by identifier.
describe::one_and_all!(describe_one, describe_all: Client => Instance,
    "rds:DescribeDBInstances", describe_db_instances, db_instance_identifier,
    db_instances, is_db_instance_not_found_fault);

#[async_trait::async_trait]
impl Database for Client {
    const SERVICE: ServiceInfo = ServiceInfo {
        provider: PROVIDER,
        rules: IdentifierRules::RdsInstance,
        what: "RDS instance",
        api_name: "DBInstance",
        snapshot_rules: IdentifierRules::RdsSnapshot,
        credentials_secret: Some(credentials_secret),
    };
    type Live = Instance;
    type Desired = Desired;
    type Create = CreateStrategy;
    type Delete = DeleteStrategy;
    type Field = Field;

    fn client(c: &Clients) -> &Self {
        &c.rds
    }

    fn listing(a: &crate::InAccount) -> &Listing<Instance> {
        &a.rds.instances
    }

    /// A reconcile of the instance, observed and decided: its credentials
    /// Secret first, then the create or the tier's changes, its network, its
    /// health and the tier's maintenance.
    async fn act(
        at: &At<'_>,
        (req, tier): (&ResourceRequest, &Tier),
        strategy: &CreateStrategy,
        (have, plan): (Option<Instance>, Plan<Field>),
    ) -> Result<Provisioned, ProviderError> {
        let (store, c, cache, hint) = (at.store, at.c, &at.account.rds, at.vpc);
        let defaults: [(&str, credentials::Generator); 2] = [
            ("user", || "postgres".to_string()),
            ("password", credentials::random_password),
        ];
        let creds =
            credentials::ensure(store, req, &credentials_secret(&req.name), &defaults).await?;
        let creds = rotate_password(store, req, creds).await?;
        let want = Client::desired(req, strategy);
        let version = have.as_ref().map(|h| h.engine_version.clone());
        let mut health = health(have.as_ref());
        if let Some(have) = &have {
            c.watched.watch(&req.identifier, Target::Instance);
            health.max_memory_bytes = class_memory(c, cache, &have.settings.class).await;
            let within = req.options.observed_within;
            let list = || maintenance::list_rds(&c.rds);
            health.maintenance =
                maintenance::pending(&cache.maintenance, &have.arn, within, list).await;
        } else {
            // Gone (deleted outside the operator): no more CloudWatch reads.
            c.watched.forget(&req.identifier);
        }
        if let (Plan::Converge(_), Some(why)) = (&plan, creds.get(PASSWORD_PENDING)) {
            return set_password(store, (c, cache), req, &creds, why).await;
        }
        if moves_port(&plan) {
            // The database network's security group admits the new port
            // before the instance moves to it (a tier placing it keeps its own).
            let places_itself =
                strategy.subnet_group.is_some() || strategy.security_groups.is_some();
            network::placement(c, req, hint, Engine::Postgres, want.port, places_itself).await?;
        }
        let arn = have.as_ref().map(|h| h.arn.clone()).unwrap_or_default();
        let create = create(store, (c, hint), req, strategy, &want, &creds);
        let ready = |have: &Instance| details(have, &want, &creds);
        let at = (c, &cache.instances);
        let mut report =
            database::act::<Client>(at, req, (have, plan), &want, create, ready).await?;
        report.version = version;
        report.health = Some(health);
        report.rotated = creds.get(ROTATION).cloned();
        // The tier's serviceUpdates, under the window only, once the instance
        // is usable; the window stays open until a pass applies none, as the
        // Go operator keeps it (ReconcilePostgres).
        if matches!(report.outcome, Outcome::Ready(_)) && req.options.maintenance_window {
            let (at, id) = (
                (&c.rds, &cache.instances),
                (req.identifier.as_str(), arn.as_str()),
            );
            let applied = service_updates::apply_rds(at, id, &tier.service_updates).await?;
            if !applied.is_empty() {
                report.maintenance_window_used = false;
                report.outcome = Outcome::InProgress(format!(
                    "applying RDS pending maintenance actions {} to {} (serviceUpdates)",
                    applied.join(", "),
                    req.identifier
                ));
            }
        }
        Ok(report)
    }

    /// The Go operator's defaults where the tier sets nothing.
    fn desired(_: &ResourceRequest, t: &CreateStrategy) -> Desired {
        let settings = Settings {
            class: t.class.clone().unwrap_or_else(|| "db.t3.small".into()),
            storage: t.storage.unwrap_or(20),
            multi_az: t.multi_az.unwrap_or(true),
            backup_retention: t.backup_retention.unwrap_or(31),
            deletion_protection: t.deletion_protection.unwrap_or(true),
            auto_minor_version_upgrade: t.auto_minor_version_upgrade.unwrap_or(false),
            publicly_accessible: t.publicly_accessible.unwrap_or(false),
        };
        Desired {
            engine_version: t.engine_version.clone(),
            allow_major_upgrade: t.allow_major_upgrade.unwrap_or(false),
            settings,
            max_storage: t.max_storage.unwrap_or(100),
            backup_window: t.backup_window.clone(),
            maintenance_window: t.maintenance_window.clone(),
            db_name: t.db_name.clone().unwrap_or_else(|| "postgres".into()),
            port: t.port.unwrap_or(5432),
        }
    }

    /// With when each may change (pure: table-tested below).
    fn differences(have: &Instance, want: &Desired) -> Vec<Difference<Field>> {
        let mut out = disruptive(have, want);
        out.extend(safe(have, want));
        out.extend(queued(have, want));
        out.extend(ca_certificate(have));
        out
    }

    fn state(status: &str) -> State {
        match status {
            "available" => State::Usable,
            stuck if STUCK.contains(&stuck) => State::Stuck(format!(
                "RDS instance is in state {stuck}; see the RDS console or events for the cause"
            )),
            status => match IMPAIRED.iter().find(|(s, _)| *s == status) {
                Some((status, fix)) => State::Impaired(format!(
                    "RDS instance is {status} and recovers once its cause is fixed: {fix}; looking again"
                )),
                None => State::Busy,
            },
        }
    }

    /// Tags included: DescribeDBInstances carries them.
    async fn describe(&self, _: &Clients, id: &str) -> Result<Option<Instance>, ProviderError> {
        describe_one(self, id).await
    }

    /// Tags included: DescribeDBInstances carries them.
    async fn list(&self, _: &Clients) -> Result<BTreeMap<String, Instance>, ProviderError> {
        describe_all(self).await
    }

    async fn modify(
        &self,
        id: &str,
        want: &Desired,
        changes: Split<Field>,
    ) -> Result<(), ProviderError> {
        let call = self.modify_db_instance().db_instance_identifier(id);
        let call = changes.set_on(call, |call, field| match field {
            Field::DbInstanceClass => call.db_instance_class(&want.settings.class),
            Field::AllocatedStorage => call.allocated_storage(want.settings.storage),
            Field::EngineVersion => call
                .set_engine_version(want.engine_version.clone())
                .allow_major_version_upgrade(true),
            Field::MultiAz => call.multi_az(want.settings.multi_az),
            Field::BackupRetentionPeriod => {
                call.backup_retention_period(want.settings.backup_retention)
            }
            Field::MaxAllocatedStorage => call.max_allocated_storage(want.max_storage),
            Field::DeletionProtection => {
                call.deletion_protection(want.settings.deletion_protection)
            }
            Field::AutoMinorVersionUpgrade => {
                call.auto_minor_version_upgrade(want.settings.auto_minor_version_upgrade)
            }
            Field::PubliclyAccessible => {
                call.publicly_accessible(want.settings.publicly_accessible)
            }
            Field::PreferredBackupWindow => {
                call.set_preferred_backup_window(want.backup_window.clone())
            }
            Field::CaCertificateIdentifier => call.ca_certificate_identifier(NEW_CA),
            // AWS restarts the instance on the new port at once, whatever
            // ApplyImmediately says: requested in the window only.
            Field::Port => call.db_port_number(want.port),
            Field::PreferredMaintenanceWindow => {
                call.set_preferred_maintenance_window(want.maintenance_window.clone())
            }
        });
        let call = call.apply_immediately(changes.immediately);
        call.send().await.named("rds:ModifyDBInstance", id)?;
        Ok(())
    }

    /// Deletion protection goes first, in a call of its own.
    async fn remove(
        &self,
        r: Removal<'_, Instance, DeleteStrategy>,
    ) -> Result<Deletion, ProviderError> {
        let id = r.id;
        // An instance already gone (a lost answer's call acted) is what
        // the next pass's describe finds; its final steps follow there.
        let gone = |e: &ModifyDBInstanceError| e.is_db_instance_not_found_fault();
        if r.live.settings.deletion_protection {
            // Made at once by AWS; ApplyImmediately would also pull
            // forward anything queued, as the Go operator never did here.
            self.modify_db_instance()
                .db_instance_identifier(id)
                .deletion_protection(false)
                .send()
                .await
                .unless_missing(gone, "rds:ModifyDBInstance", id)?;
            return Ok(Deletion::InProgress(format!(
                "lifting deletion protection of RDS instance {id}"
            )));
        }
        let gone = |e: &DeleteDBInstanceError| e.is_db_instance_not_found_fault();
        self.delete_db_instance()
            .db_instance_identifier(id)
            .skip_final_snapshot(r.final_snapshot.is_none())
            .set_final_db_snapshot_identifier(r.final_snapshot)
            // The Go operator's default: automated backups go with the
            // instance (the final snapshot keeps the data).
            .delete_automated_backups(r.strategy.delete_automated_backups.unwrap_or(true))
            .send()
            .await
            .unless_missing(gone, "rds:DeleteDBInstance", id)?;
        Ok(Deletion::InProgress(format!("deleting RDS instance {id}")))
    }
}

/// RDS statuses in which the instance serves clients, as the Go operator
/// lists them (`healthyAWSDBInstanceStatuses`, provider_postgres.go).
const HEALTHY: [&str; 17] = [
    "backtracking",
    "available",
    "backing-up",
    "configuring-enhanced-monitoring",
    "configuring-iam-database-auth",
    "configuring-log-exports",
    "converting-to-vpc",
    "creating",
    "deleting",
    "maintenance",
    "modifying",
    "moving-to-vpc",
    "renaming",
    "resetting-master-credentials",
    "starting",
    "storage-optimization",
    "upgrading",
];

/// The instance as the Go operator's gauges show it
/// (`exposePostgresMetrics`): its status, whether that serves clients, and
/// its allocated storage in bytes.
fn health(have: Option<&Instance>) -> Health {
    Health {
        allocated_storage_bytes: have
            .filter(|h| h.settings.storage > 0)
            .map(|h| i64::from(h.settings.storage) * (1 << 30)),
        ..database::health(have, &HEALTHY)
    }
}

/// The memory of an RDS instance class, in bytes: EC2's instance type of
/// the same name less `db.` (as the Go operator reads it,
/// `setPostgresMaxMemoryMetric`), asked once per class. `None` when EC2
/// has no such type (`db.serverless`) or cannot be asked now: the gauge is
/// then absent, never a reason to fail a reconcile.
async fn class_memory(c: &Clients, cache: &AccountCache, class: &str) -> Option<i64> {
    // Held while EC2 is asked: the reconciles of a restart that all need
    // the same class wait for one answer instead of each asking.
    let mut memory = cache.class_memory.lock().await;
    if let Some(bytes) = memory.get(class) {
        return *bytes;
    }
    let ec2_type = class.strip_prefix("db.").unwrap_or(class);
    let asked = c
        .ec2
        .describe_instance_types()
        .instance_types(ec2_type.into())
        .send()
        .await
        .named("ec2:DescribeInstanceTypes", ec2_type);
    let bytes = match asked {
        Ok(out) => (out.instance_types().first())
            .and_then(|t| t.memory_info()?.size_in_mib())
            .map(|mib| mib * (1 << 20)),
        // An unknown type is an answer; anything else is asked again.
        Err(e)
            if e.code()
                .is_some_and(|c| c.starts_with("InvalidInstanceType")) =>
        {
            None
        }
        Err(e) => {
            tracing::debug!(class, error = %e, "reading the instance class's memory");
            return None;
        }
    };
    memory.insert(class.to_string(), bytes);
    bytes
}

fn details(have: &Instance, want: &Desired, creds: &BTreeMap<String, String>) -> ConnectionDetails {
    let or_default = |v: Option<&str>, d: &str| v.unwrap_or(d).to_string();
    ConnectionDetails(BTreeMap::from([
        (
            "username".into(),
            or_default(have.master_username.as_deref(), &creds["user"]),
        ),
        ("password".into(), creds["password"].clone()),
        ("host".into(), have.address.clone()),
        ("port".into(), have.port.unwrap_or(want.port).to_string()),
        (
            "database".into(),
            or_default(have.db_name.as_deref(), &want.db_name),
        ),
    ]))
}

/// What CreateDBInstance and RestoreDBInstanceFromDBSnapshot both take
/// from the tier (and the network it is placed in), read up front.
struct Shared {
    storage_type: Option<String>,
    iops: Option<i32>,
    copy_tags_to_snapshot: bool,
    subnet_group: Option<String>,
    security_groups: Option<Vec<String>>,
    parameter_group: Option<String>,
    tags: Vec<aws_sdk_rds::types::Tag>,
}

impl Shared {
    fn read(req: &ResourceRequest, t: &CreateStrategy, placed: Option<Placement>) -> Self {
        let (placed_group, placed_security) = placed
            .map(|p| (p.subnet_group, vec![p.security_group_id]))
            .unzip();
        Shared {
            storage_type: t.storage_type.clone(),
            iops: t.iops,
            copy_tags_to_snapshot: t.copy_tags_to_snapshot.unwrap_or(true),
            subnet_group: t.subnet_group.clone().or(placed_group),
            security_groups: t.security_groups.clone().or(placed_security),
            parameter_group: t.parameter_group.clone(),
            tags: tags::sdk(&req.creation_tags().into_iter().collect::<Vec<_>>()),
        }
    }
}

/// Sets [`Shared`] and the desired settings on a CreateDBInstance or a
/// RestoreDBInstanceFromDBSnapshot builder: the SDK's two builders share
/// these setters but no trait.
macro_rules! with_shared {
    ($call:expr, $want:expr, $shared:expr) => {{
        let (want, shared): (&Desired, Shared) = ($want, $shared);
        $call
            .db_instance_class(&want.settings.class)
            .port(want.port)
            .multi_az(want.settings.multi_az)
            .deletion_protection(want.settings.deletion_protection)
            .auto_minor_version_upgrade(want.settings.auto_minor_version_upgrade)
            .publicly_accessible(want.settings.publicly_accessible)
            .copy_tags_to_snapshot(shared.copy_tags_to_snapshot)
            .set_storage_type(shared.storage_type)
            .set_iops(shared.iops)
            .set_db_subnet_group_name(shared.subnet_group)
            .set_vpc_security_group_ids(shared.security_groups)
            .set_db_parameter_group_name(shared.parameter_group)
            .set_tags(Some(shared.tags))
    }};
}

/// Kept in the credentials Secret, saying why, while the instance does not
/// have the Secret's password yet (restored with its source's, or a
/// rotation chose a new one): written before the call that makes it so
/// and removed once the password is set, so a kill in between sets it
/// again rather than never.
const PASSWORD_PENDING: &str = "passwordPending";

/// The rotation token (`Options::rotate_credentials`) the password in the
/// credentials Secret answers.
const ROTATION: &str = "rotation";

/// A rotation asked for and not made yet: a new password in the Secret,
/// marked to be set on the instance.
async fn rotate_password(
    store: &dyn CredentialsStore,
    req: &ResourceRequest,
    creds: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ProviderError> {
    let Some(token) = &req.options.rotate_credentials else {
        return Ok(creds);
    };
    if creds.get(ROTATION) == Some(token) {
        return Ok(creds);
    }
    let mut rotated = creds;
    rotated.insert("password".into(), credentials::random_password());
    rotated.insert(ROTATION.into(), token.clone());
    rotated.insert(PASSWORD_PENDING.into(), "credential rotation".into());
    store
        .write(req, &credentials_secret(&req.name), &rotated)
        .await?;
    Ok(rotated)
}

/// Whether this pass requests the instance's move to another port.
fn moves_port(plan: &Plan<Field>) -> bool {
    matches!(plan, Plan::Converge(drift)
        if drift.changes.apply.iter().any(|d| d.field == Field::Port))
}

/// Creates the instance, or restores it from `req.restore_from_snapshot`.
async fn create(
    store: &dyn CredentialsStore,
    (c, hint): (&Clients, &VpcHint),
    req: &ResourceRequest,
    t: &CreateStrategy,
    want: &Desired,
    creds: &BTreeMap<String, String>,
) -> Result<Created, ProviderError> {
    if let Some(snapshot) = &req.restore_from_snapshot {
        crate::snapshots::check_restorable(&c.rds, req, snapshot).await?;
    }
    let places_itself = t.subnet_group.is_some() || t.security_groups.is_some();
    let (placed, _held) =
        network::placement(c, req, hint, Engine::Postgres, want.port, places_itself).await?;
    let was_placed = placed.is_some();
    let rds = &c.rds;
    if let Some(snapshot) = &req.restore_from_snapshot {
        let mut marked = creds.clone();
        marked.insert(
            PASSWORD_PENDING.into(),
            format!("restored from snapshot {snapshot}"),
        );
        store
            .write(req, &credentials_secret(&req.name), &marked)
            .await?;
        return restore(rds, req, t, want, snapshot, placed)
            .await
            .map_err(|e| network::when_placed(e, was_placed));
    }
    let id = req.identifier.as_str();
    let create = rds
        .create_db_instance()
        .db_instance_identifier(id)
        .engine("postgres")
        .set_engine_version(want.engine_version.clone())
        .allocated_storage(want.settings.storage)
        .max_allocated_storage(want.max_storage)
        .master_username(t.master_username.as_deref().unwrap_or(&creds["user"]))
        .master_user_password(&creds["password"])
        .db_name(&want.db_name)
        .backup_retention_period(want.settings.backup_retention)
        .set_preferred_backup_window(want.backup_window.clone())
        .set_preferred_maintenance_window(want.maintenance_window.clone())
        .storage_encrypted(t.storage_encrypted.unwrap_or(true))
        .set_kms_key_id(t.kms_key_id.clone())
        // Create-only fields, passed through as the Go operator did.
        .set_availability_zone(
            t.availability_zone
                .clone()
                .filter(|_| !want.settings.multi_az),
        )
        .set_monitoring_interval(t.monitoring_interval)
        .set_monitoring_role_arn(t.monitoring_role_arn.clone())
        .set_enable_performance_insights(t.performance_insights)
        .set_performance_insights_kms_key_id(t.performance_insights_kms_key_id.clone())
        .set_performance_insights_retention_period(t.performance_insights_retention)
        .set_option_group_name(t.option_group.clone())
        .set_storage_throughput(t.storage_throughput)
        .set_enable_iam_database_authentication(t.iam_database_authentication)
        .set_enable_cloudwatch_logs_exports(t.cloudwatch_logs_exports.clone())
        .set_license_model(t.license_model.clone())
        .set_network_type(t.network_type.clone())
        .set_ca_certificate_identifier(t.ca_certificate.clone());
    let sent = with_shared!(create, want, Shared::read(req, t, placed))
        .send()
        .await;
    created(sent, "rds:CreateDBInstance", id).map_err(|e| network::when_placed(e, was_placed))
}

/// A new instance from `snapshot` with the tier's settings; those a
/// restore cannot take (backups, windows, storage autoscaling) follow as
/// drift once it is available.
async fn restore(
    rds: &Client,
    req: &ResourceRequest,
    t: &CreateStrategy,
    want: &Desired,
    snapshot: &str,
    placed: Option<Placement>,
) -> Result<Created, ProviderError> {
    let restore = rds
        .restore_db_instance_from_db_snapshot()
        .db_instance_identifier(&req.identifier)
        .db_snapshot_identifier(snapshot);
    let sent = with_shared!(restore, want, Shared::read(req, t, placed))
        .send()
        .await;
    created(sent, "rds:RestoreDBInstanceFromDBSnapshot", &req.identifier)
}

/// The instance gets the Secret's master password (restored with its
/// source's, or rotated); then the mark goes.
async fn set_password(
    store: &dyn CredentialsStore,
    (c, cache): (&Clients, &AccountCache),
    req: &ResourceRequest,
    creds: &BTreeMap<String, String>,
    why: &str,
) -> Result<Provisioned, ProviderError> {
    let id = req.identifier.as_str();
    let modify = c
        .rds
        .modify_db_instance()
        .db_instance_identifier(id)
        // Applied as soon as possible without ApplyImmediately, which
        // would also pull forward every modification queued for the window.
        .master_user_password(&creds["password"])
        .send();
    (cache.instances.writing(id, modify).await).named("rds:ModifyDBInstance", id)?;
    let mut unmarked = creds.clone();
    unmarked.remove(PASSWORD_PENDING);
    store
        .write(req, &credentials_secret(&req.name), &unmarked)
        .await?;
    let mut report = Provisioned::new(
        PROVIDER,
        Outcome::InProgress(format!(
            "setting the master password of RDS instance {id} ({why})"
        )),
    );
    report.identifier = Some(id.to_string());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_rds::types::DbInstance;
    use serde_json::{Value, json};

    fn want(tier: Value) -> Desired {
        database::desired::<Client>(&req(None), tier)
    }

    /// An instance as the Go operator creates one with an empty tier
    /// (buildRDSCreateStrategy, pkg/providers/aws/provider_postgres.go), read
    /// the way DescribeDBInstances returns it.
    fn go_created() -> Instance {
        let db = DbInstance::builder()
            .db_instance_arn("arn:aws:rds:eu-west-1:1:db:x")
            .db_instance_status("available")
            .db_instance_class("db.t3.small")
            .allocated_storage(20)
            .max_allocated_storage(100)
            .engine_version("13.13")
            .multi_az(true)
            .backup_retention_period(31)
            .deletion_protection(true)
            .auto_minor_version_upgrade(false)
            .publicly_accessible(false)
            .preferred_backup_window("02:00-03:00")
            .preferred_maintenance_window("mon:04:00-mon:05:00")
            .endpoint(
                aws_sdk_rds::types::Endpoint::builder()
                    .address("x.abc.eu-west-1.rds.amazonaws.com")
                    .port(5432)
                    .build(),
            )
            .build();
        Instance::from(&db)
    }

    fn fields(differences: &[Difference<Field>]) -> Vec<(&str, &Timing)> {
        differences
            .iter()
            .map(|d| (d.change.field.as_str(), &d.change.timing))
            .collect()
    }

    #[test]
    fn defaults_are_the_go_operators() {
        let d = want(json!({}));
        assert_eq!(
            (
                d.settings.class.as_str(),
                d.settings.storage,
                d.max_storage,
                d.settings.multi_az,
                d.settings.backup_retention
            ),
            ("db.t3.small", 20, 100, true, 31)
        );
        assert!(
            d.settings.deletion_protection
                && !d.settings.auto_minor_version_upgrade
                && !d.settings.publicly_accessible
        );
        assert_eq!(
            (d.db_name.as_str(), d.port, d.engine_version),
            ("postgres", 5432, None)
        );
    }

    #[test]
    fn an_instance_the_go_operator_created_is_not_drift() {
        assert!(Client::differences(&go_created(), &want(json!({}))).is_empty());
        // Its helper's strategy with every field null, plus its windows.
        let helper = json!({"DBInstanceClass": null, "MultiAZ": null, "EngineVersion": null,
            "PreferredBackupWindow": "02:00-03:00", "PreferredMaintenanceWindow": "mon:04:00-mon:05:00"});
        assert!(Client::differences(&go_created(), &want(helper)).is_empty());
    }

    #[test]
    fn each_field_a_tier_sets_has_its_rule() {
        use Timing::*;
        let never = |r: &str| Some(Never(r.into()));
        // Row: (field a tier sets, its value, the change's timing against
        // the Go-created instance; None: no change)
        let asked = [
            (
                "DBInstanceClass",
                json!("db.m5.large"),
                Some(MaintenanceWindow),
            ),
            ("AllocatedStorage", json!(50), Some(MaintenanceWindow)),
            ("EngineVersion", json!("13.15"), Some(MaintenanceWindow)),
            (
                "EngineVersion",
                json!("16.4"),
                never(
                    "a major version upgrade is made only when the tier's createStrategy sets AllowMajorVersionUpgrade: true",
                ),
            ),
            (
                "EngineVersion",
                json!("12.9"),
                never("engine versions only move up"),
            ),
            ("EngineVersion", json!("13.13"), None),
            ("MultiAZ", json!(false), Some(MaintenanceWindow)),
            ("BackupRetentionPeriod", json!(7), Some(Online)),
            ("BackupRetentionPeriod", json!(0), Some(MaintenanceWindow)),
            ("MaxAllocatedStorage", json!(200), Some(Online)),
            ("AutoMinorVersionUpgrade", json!(true), Some(Online)),
            ("PreferredBackupWindow", json!("03:00-04:00"), Some(Online)),
            (
                "PreferredMaintenanceWindow",
                json!("MON:04:00-MON:05:00"),
                None,
            ),
            ("Port", json!(5433), Some(MaintenanceWindow)),
            ("Port", json!(5432), None),
        ];
        for (field, value, timing) in asked {
            let tier = json!({ field: value });
            let got = Client::differences(&go_created(), &want(tier.clone()));
            let expected: Vec<_> = timing.iter().map(|t| (field, t)).collect();
            assert_eq!(fields(&got), expected, "tier {tier}");
        }
    }

    #[test]
    fn each_drift_of_the_live_instance_has_its_rule() {
        use Timing::*;
        let never = |r: &str| Some(Never(r.into()));
        // Row: (tier, edit of the live instance, the one change expected)
        type Edit = fn(&mut Instance);
        let class = json!({"DBInstanceClass": "db.m5.large"});
        let edited: [(Value, Edit, &str, Timing); 7] = [
            (
                json!({"MaxAllocatedStorage": 30}),
                |i| (i.settings.storage, i.max_storage) = (40, Some(30)),
                "AllocatedStorage",
                never("RDS storage cannot shrink").unwrap(),
            ),
            // Queued on the instance (the Go operator queued it for the
            // window), not asked for by the tier: shown, never undone.
            (
                json!({}),
                |i| i.pending.class = Some("db.m5.large".into()),
                "DBInstanceClass",
                Scheduled,
            ),
            (
                json!({}),
                |i| i.pending.multi_az = Some(false),
                "MultiAZ",
                Scheduled,
            ),
            (
                json!({}),
                |i| i.settings.deletion_protection = false,
                "DeletionProtection",
                Online,
            ),
            (
                json!({}),
                |i| i.settings.publicly_accessible = true,
                "PubliclyAccessible",
                Online,
            ),
            (
                class,
                |i| i.pending.class = Some("db.m5.large".into()),
                "DBInstanceClass",
                Scheduled,
            ),
            (
                json!({"EngineVersion": "16.4", "AllowMajorVersionUpgrade": true}),
                |i| i.pending.engine_version = Some("16.4".into()),
                "EngineVersion",
                Scheduled,
            ),
        ];
        for (tier, edit, field, timing) in edited {
            let mut have = go_created();
            edit(&mut have);
            let got = Client::differences(&have, &want(tier.clone()));
            assert_eq!(fields(&got), [(field, &timing)], "tier {tier}");
        }
    }

    #[test]
    fn a_ca_move_a_major_upgrade_and_autoscaled_storage_have_their_rules() {
        use Timing::*;
        // The Go operator's CA move, in the window; then scheduled.
        let mut old_ca = go_created();
        old_ca.ca_certificate = RETIRED_CA.into();
        let got = Client::differences(&old_ca, &want(json!({})));
        assert_eq!(
            fields(&got),
            [("CACertificateIdentifier", &MaintenanceWindow)]
        );
        old_ca.pending.ca_certificate = Some(NEW_CA.into());
        let got = Client::differences(&old_ca, &want(json!({})));
        assert_eq!(fields(&got), [("CACertificateIdentifier", &Scheduled)]);
        // A major upgrade the tier allows waits for the window.
        let allowed = json!({"EngineVersion": "16.4", "AllowMajorVersionUpgrade": true});
        let got = Client::differences(&go_created(), &want(allowed));
        assert_eq!(fields(&got), [("EngineVersion", &MaintenanceWindow)]);
        // Storage autoscaling grew it within MaxAllocatedStorage: no drift.
        let mut autoscaled = go_created();
        autoscaled.settings.storage = 40;
        assert!(Client::differences(&autoscaled, &want(json!({}))).is_empty());
    }

    /// A request owned by cluster `c1`, wanting tag k=v.
    fn req(recorded: Option<&str>) -> ResourceRequest {
        let mut req = ResourceRequest::offline(cro_provider_api::ResourceKind::Postgres, json!({}));
        // The Go operator's identifier of CR app/db in cluster c1.
        (req.namespace, req.name) = ("app".into(), "db".into());
        req.identifier = "c1appdb".into();
        req.recorded_identifier = recorded.map(str::to_string);
        req.owner_tag = ("clusterID".into(), "c1".into());
        req.tags = BTreeMap::from([
            ("clusterID".to_string(), "c1".to_string()),
            ("k".to_string(), "v".to_string()),
        ]);
        req
    }

    fn ours(mut i: Instance) -> Instance {
        i.tags.insert("clusterID".into(), "c1".into());
        i
    }

    #[test]
    fn the_plan_follows_the_instance_state() {
        let decide = database::decide::<Client>;
        let d = want(json!({}));
        assert_eq!(decide(None, &d, &req(None)), Plan::Create);
        assert!(
            matches!(decide(None, &d, &req(Some("c1appdb"))), Plan::Fail(m) if m.contains("no longer exists"))
        );
        let mut creating = ours(go_created());
        creating.status = "creating".into();
        assert!(
            matches!(decide(Some(&creating), &d, &req(None)), Plan::Wait(m, _) if m.contains("creating"))
        );
        // Recovers once its cause is fixed: looked at again, saying how.
        creating.status = "storage-full".into();
        assert!(
            matches!(decide(Some(&creating), &d, &req(None)), Plan::Wait(m, _) if m.contains("storage-full") && m.contains("AllocatedStorage"))
        );
        creating.status = "incompatible-restore".into();
        assert!(
            matches!(decide(Some(&creating), &d, &req(None)), Plan::Fail(m) if m.contains("incompatible-restore"))
        );
        let Plan::Converge(database::Drift {
            tags: missing,
            changes,
        }) = decide(Some(&ours(go_created())), &d, &req(None))
        else {
            panic!("not converging")
        };
        assert_eq!(missing, vec![("k".to_string(), "v".to_string())]);
        assert!(changes.apply.is_empty() && changes.pending.is_empty());
    }

    #[test]
    fn plan_shows_what_the_decision_would_do() {
        let d = want(json!({"DBInstanceClass": "db.m5.large"}));
        let shown = |have: Option<&Instance>, req: &ResourceRequest| {
            let plan = database::decide::<Client>(have, &d, req);
            let changes = database::shown::<Client>(&plan, have, req);
            (changes.into_iter())
                .map(|c| (c.field, c.current, c.desired, c.timing))
                .collect::<Vec<_>>()
        };
        let created = |field: &str, current: &str, desired: &str, timing| {
            (
                field.to_string(),
                current.to_string(),
                desired.to_string(),
                timing,
            )
        };
        assert_eq!(
            shown(None, &req(None)),
            [created("DBInstance", "absent", "created", Timing::Now)]
        );
        assert!(matches!(
            &shown(None, &req(Some("c1appdb")))[..],
            [(_, current, _, Timing::Never(_))] if current == "vanished"
        ));
        // Usable or busy: the tag it lacks and the class, for the window.
        let drift = [
            created("tag k", "absent", "v", Timing::Now),
            created(
                "DBInstanceClass",
                "db.t3.small",
                "db.m5.large",
                Timing::MaintenanceWindow,
            ),
        ];
        let mut have = ours(go_created());
        assert_eq!(shown(Some(&have), &req(None)), drift);
        have.status = "backing-up".into();
        assert_eq!(shown(Some(&have), &req(None)), drift);
        have.status = "failed".into();
        assert!(matches!(
            &shown(Some(&have), &req(None))[..],
            [(_, status, _, Timing::Never(why))] if status == "failed" && why.contains("failed")
        ));
        // Someone else's: nothing is made without an approval.
        let unadopted = shown(Some(&go_created()), &req(None));
        assert_eq!(unadopted.len(), 3);
        assert!(
            (unadopted.iter()).all(
                |(.., t)| matches!(t, Timing::Never(m) if m.contains("integreatly.org/adopt"))
            )
        );
    }

    #[test]
    fn deletion_leaves_what_is_not_ours_and_waits_for_what_is_deleting() {
        let decide = database::decide_delete::<Client>;
        let snapshot = || Some("final-1".to_string());
        let finish = database::Removing::Finish {
            tag_final: snapshot(),
        };
        assert_eq!(decide(None, &req(None), snapshot()), finish);
        assert_eq!(
            decide(Some(go_created()), &req(None), snapshot()),
            database::Removing::Leave,
            "untagged and not recorded: someone else's"
        );
        let remove = database::Removing::Remove {
            live: go_created(),
            final_snapshot: snapshot(),
        };
        assert_eq!(
            decide(Some(go_created()), &req(Some("c1appdb")), snapshot()),
            remove
        );
        assert_eq!(
            decide(Some(ours(go_created())), &req(None), None),
            database::Removing::Remove {
                live: ours(go_created()),
                final_snapshot: None
            }
        );
        let mut deleting = ours(go_created());
        deleting.status = "deleting".into();
        assert!(matches!(
            decide(Some(deleting), &req(None), snapshot()),
            database::Removing::Wait(m) if m.contains("is deleting")
        ));
    }

    #[test]
    fn someone_elses_instance_is_adopted_only_with_its_hash() {
        let decide = database::decide::<Client>;
        let d = want(json!({"DBInstanceClass": "db.m5.large"}));
        // Recorded on the CR (the Go operator's, untagged): ours.
        assert!(matches!(
            decide(Some(&go_created()), &d, &req(Some("c1appdb"))),
            Plan::Converge(_)
        ));
        // Neither recorded nor tagged by this cluster: not touched.
        let Plan::Unadopted(adoption) = decide(Some(&go_created()), &d, &req(None)) else {
            panic!("changed without approval")
        };
        let fields: Vec<&str> = adoption.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["tag clusterID", "tag k", "DBInstanceClass"]);
        let mut approved = req(None);
        approved.options.approved_adoption = Some("0000000000".into());
        assert!(
            matches!(
                decide(Some(&go_created()), &d, &approved),
                Plan::Unadopted(_)
            ),
            "a stale hash adopts nothing"
        );
        approved.options.approved_adoption = Some(adoption.hash);
        assert!(
            matches!(decide(Some(&go_created()), &d, &approved), Plan::Converge(d) if d.tags.len() == 2)
        );
    }
}
