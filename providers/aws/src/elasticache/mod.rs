//! Redis as an ElastiCache replication group: what is ElastiCache's own in
//! observe → decide → act over the steps shared with RDS
//! ([`crate::database`]): [`Group`] (tags batched through the resource
//! groups tagging API when listing), [`differences`], `Database::act`. Defaults are the Go operator's
//! (`buildElasticacheCreateStrategy`, pkg/providers/aws/provider_redis.go):
//! two nodes with automatic failover, encryption at rest, 31 days of
//! snapshots; `spec.size` is the node type. The Secret's `uri` is the
//! primary endpoint's host, as in the Go operator. Deletion takes a tagged
//! final snapshot unless the tier says otherwise.
//!
//! Unlike the Go operator, a group this operator creates has in-transit
//! encryption and an AUTH token (kept in `<name>-aws-elasticache-credentials`
//! before the create is sent, so a lost answer loses no token), and its
//! Secret says `tls: "true"` and holds the token as `password`; a tier with
//! `TransitEncryptionEnabled: false` turns both off. Groups that exist are
//! never changed to it: their clients would lose the connection.

use std::collections::BTreeMap;

use aws_sdk_elasticache::{
    Client, operation::delete_replication_group::DeleteReplicationGroupError,
};
use cro_provider_api::{
    ConnectionDetails, Deletion, IdentifierRules, ProviderError, Provisioned, ResourceRequest,
    Timing,
};

use crate::clients::Clients;
use crate::cloud_metrics::Target;
use crate::credentials::{self, CredentialsStore};
use crate::database::{self, Database, Plan, Removal, ServiceInfo, State};
use crate::errors::{Answer, Created, created};
use crate::listing::Listing;
use crate::network::{self, Engine};
use crate::plan::{Difference, Split, difference};
use crate::sdk::VpcHint;
use crate::strategy::Tier;
use crate::tags;
use crate::{At, describe, maintenance, service_updates};

pub mod observed;
mod offering;
mod snapshot_tags;
mod strategy;

pub use observed::{Group, Node};
pub use strategy::{CreateStrategy, DeleteStrategy, Field};

pub const PROVIDER: &str = "aws-elasticache";

/// What this operator last saw of ElastiCache in one account and region,
/// shared by every Redis there (see [`crate::listing`]).
pub struct AccountCache {
    pub groups: Listing<Group>,
    /// Pending maintenance, by group (see [`crate::maintenance`]).
    maintenance: Listing<Vec<cro_provider_api::Maintenance>>,
    /// Snapshots with their tags, by group (see [`snapshot_tags`]).
    snapshots: Listing<Vec<observed::Snapshot>>,
}

impl AccountCache {
    pub fn new(memory: &std::sync::Arc<cro_provider_api::Memory>) -> Self {
        AccountCache {
            groups: Listing::new(memory),
            maintenance: Listing::new(memory),
            snapshots: Listing::new(memory),
        }
    }
}

/// The group's health as the Go operator's gauges show it
/// (`exposeRedisMetrics`), with its pending maintenance and the tags of
/// its snapshots kept; CloudWatch reads follow the group while it exists.
async fn observed_health(
    c: &Clients,
    cache: &AccountCache,
    req: &ResourceRequest,
    have: Option<&Group>,
) -> cro_provider_api::Health {
    let mut health = database::health(have, &HEALTHY);
    let Some(group) = have else {
        // Gone (deleted outside the operator): no more CloudWatch reads.
        c.watched.forget(&req.identifier);
        return health;
    };
    let nodes = group.members.clone();
    c.watched.watch(&req.identifier, Target::Group { nodes });
    let (listing, within) = (&cache.maintenance, req.options.observed_within);
    let list = || maintenance::list_elasticache(&c.elasticache);
    health.maintenance = maintenance::pending(listing, &req.identifier, within, list).await;
    let first_node = group.members.first().map_or("", String::as_str);
    // Only a group that is this CR's: another's (or one awaiting
    // adoption) keeps its snapshots' tags as they are.
    let ours = crate::plan::ours(req, &group.tags);
    let recheck = within
        .filter(|_| ours)
        .map(|_| req.options.recheck_interval);
    health.snapshots_not_found = snapshot_tags::ensure(
        (c, &cache.snapshots),
        &req.identifier,
        first_node,
        &req.creation_tags(),
        recheck,
    )
    .await;
    health
}

/// What an application needs to reach a usable group: its primary
/// endpoint, and `tls` and the AUTH token where the group has them.
fn connection_details(have: &Group, token: Option<String>) -> ConnectionDetails {
    let (host, port) = have.primary.clone().unwrap_or_default();
    let mut details = BTreeMap::from([("uri".into(), host), ("port".into(), port.to_string())]);
    if have.transit_encryption {
        details.insert("tls".into(), "true".into());
    }
    if let Some(token) = token.filter(|_| have.auth_token) {
        details.insert("password".into(), token);
    }
    ConnectionDetails(details)
}

/// The tier's serviceUpdates, on every pass over the usable group, as the
/// Go operator applies them (applySpecifiedSecurityUpdates); what is being
/// applied, if anything.
async fn apply_service_updates(
    c: &Clients,
    cache: &AccountCache,
    id: &str,
    tier: &Tier,
) -> Result<Option<String>, ProviderError> {
    let at = (&c.elasticache, &cache.groups);
    let applied = service_updates::apply_elasticache(at, id, &tier.service_updates).await?;
    Ok((!applied.is_empty()).then(|| {
        format!(
            "applying ElastiCache service updates {} to {id} (serviceUpdates)",
            applied.join(", ")
        )
    }))
}

/// The tier as the Go operator read it for a new group: no in-transit
/// encryption where it does not say (`defaultInTransitEncryption`,
/// pkg/providers/aws/provider_redis.go), so no AUTH token, and a Secret
/// the Go operator writes whole (`uri`, `port`) loses nothing. `None`:
/// the tier as it is.
fn go_defaults(strategy: &CreateStrategy, go_compatible: bool) -> Option<CreateStrategy> {
    (go_compatible && strategy.transit_encryption.is_none()).then(|| CreateStrategy {
        transit_encryption: Some(false),
        ..strategy.clone()
    })
}

/// Where the AUTH token of a group this operator created is kept.
pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-elasticache-credentials")
}

/// The key of the AUTH token in [`credentials_secret`].
const AUTH_TOKEN: &str = "authToken";

/// What the tier (and `spec.size`) asks for of a running group.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub node_type: String,
    /// Only a tier's own: the group moves up to it, never down, and
    /// nothing is compared without it (the Go operator's
    /// buildElasticacheUpdateStrategy).
    pub engine_version: Option<String>,
    pub snapshot_retention: i32,
    pub snapshot_window: Option<String>,
    pub maintenance_window: Option<String>,
}

// The node `id`, if it exists; every node of the account and region, by
// cache cluster id.
describe::one_and_all!(describe_node, describe_nodes: Client => Node,
    "elasticache:DescribeCacheClusters", describe_cache_clusters, cache_cluster_id,
    cache_clusters, is_cache_cluster_not_found_fault);

database::live_and_sections!(Group, CreateStrategy, DeleteStrategy);

// The group `id` (without its tags), if it exists; every group of the
// account and region (without tags), by identifier.
describe::one_and_all!(describe_one, describe_all: Client => Group,
    "elasticache:DescribeReplicationGroups", describe_replication_groups, replication_group_id,
    replication_groups, is_replication_group_not_found_fault);

#[async_trait::async_trait]
impl Database for Client {
    const SERVICE: ServiceInfo = ServiceInfo {
        provider: PROVIDER,
        rules: IdentifierRules::ElastiCacheReplicationGroup,
        what: "ElastiCache replication group",
        api_name: "ReplicationGroup",
        snapshot_rules: IdentifierRules::ElastiCacheSnapshot,
        credentials_secret: Some(credentials_secret),
    };
    type Live = Group;
    type Desired = Desired;
    type Create = CreateStrategy;
    type Delete = DeleteStrategy;
    type Field = Field;

    fn client(c: &Clients) -> &Self {
        &c.elasticache
    }

    fn listing(a: &crate::InAccount) -> &Listing<Group> {
        &a.elasticache.groups
    }

    /// A reconcile of the group, observed and decided: the node type offered
    /// where it runs, its AUTH token, then the create or the tier's changes,
    /// its health, its snapshots' tags and the tier's service updates.
    async fn act(
        at: &At<'_>,
        (req, tier): (&ResourceRequest, &Tier),
        strategy: &CreateStrategy,
        (have, plan): (Option<Group>, Plan<Field>),
    ) -> Result<Provisioned, ProviderError> {
        let (store, c, cache, hint) = (at.store, at.c, &at.account.elasticache, at.vpc);
        let go_default = go_defaults(strategy, at.go_compatible);
        let strategy = go_default.as_ref().unwrap_or(strategy);
        let want = Client::desired(req, strategy);
        let zones = have.as_ref().map(|g| g.zones.clone()).unwrap_or_default();
        let plan = offering::checked(c, plan, &want.node_type, &zones).await?;
        let token = auth_token(store, req, strategy, have.as_ref(), &plan).await?;
        let health = observed_health(c, cache, req, have.as_ref()).await;
        let create = create(c, hint, req, strategy, &want, token.clone());
        let ready = |have: &Group| connection_details(have, token);
        // The engine version as its nodes run it (what status.version shows),
        // else what the tier asked for at create.
        let version = (have.as_ref().map(|h| h.node.engine_version.clone()))
            .filter(|v| !v.is_empty())
            .or(strategy.engine_version.clone());
        let at = (c, &cache.groups);
        let mut report =
            database::act::<Client>(at, req, (have, plan), &want, create, ready).await?;
        report.version = version;
        report.health = Some(health);
        if matches!(report.outcome, cro_provider_api::Outcome::Ready(_)) {
            let applying = apply_service_updates(c, cache, &req.identifier, tier).await?;
            if let Some(message) = applying {
                report.outcome = cro_provider_api::Outcome::InProgress(message);
            }
        }
        Ok(report)
    }

    /// `spec.size` wins over the tier's CacheNodeType.
    fn desired(req: &ResourceRequest, t: &CreateStrategy) -> Desired {
        let size = req.options.size.clone().filter(|s| !s.is_empty());
        Desired {
            node_type: size
                .or_else(|| t.node_type.clone())
                .unwrap_or_else(|| "cache.t3.micro".into()),
            engine_version: t.engine_version.clone(),
            snapshot_retention: t.snapshot_retention.unwrap_or(31),
            snapshot_window: t.snapshot_window.clone(),
            maintenance_window: t.maintenance_window.clone(),
        }
    }

    fn differences(have: &Group, want: &Desired) -> Vec<Difference<Field>> {
        let mut out = Vec::new();
        if !have.node_type.is_empty() && have.node_type != want.node_type {
            let timing = Timing::MaintenanceWindow;
            out.push(difference(
                Field::CacheNodeType,
                &have.node_type,
                &want.node_type,
                timing,
                false,
            ));
        }
        // An upgrade on the nodes' version, for the maintenance window
        // (the Go operator sent it with ApplyImmediately under
        // maintenanceWindow, buildElasticacheUpdateStrategy).
        let version = &have.node.engine_version;
        if let Some(wanted) = (want.engine_version.as_ref())
            .filter(|w| !version.is_empty() && crate::versions::is_upgrade(version, w))
        {
            let field = Field::EngineVersion;
            out.push(difference(
                field,
                version,
                wanted,
                Timing::MaintenanceWindow,
                false,
            ));
        }
        if have.snapshot_retention != want.snapshot_retention {
            let (have, want) = (have.snapshot_retention, want.snapshot_retention);
            out.push(difference(
                Field::SnapshotRetentionLimit,
                have,
                want,
                Timing::Online,
                false,
            ));
        }
        if let Some(window) = want
            .snapshot_window
            .as_ref()
            .filter(|w| !w.eq_ignore_ascii_case(&have.snapshot_window))
        {
            out.push(difference(
                Field::SnapshotWindow,
                &have.snapshot_window,
                window,
                Timing::Online,
                false,
            ));
        }
        // Compared on the nodes, as the Go operator compares it
        // (buildElasticacheUpdateStrategy); AWS changes it online.
        let window = &have.node.maintenance_window;
        if let Some(w) = (want.maintenance_window.as_ref())
            .filter(|w| !window.is_empty() && !w.eq_ignore_ascii_case(window))
        {
            let field = Field::PreferredMaintenanceWindow;
            out.push(difference(field, window, w, Timing::Online, false));
        }
        out
    }

    fn state(status: &str) -> State {
        match status {
            "available" => State::Usable,
            "create-failed" => State::Stuck(
                "ElastiCache replication group failed to create; see its events in the ElastiCache console, fix the tier, then delete it to retry".into(),
            ),
            _ => State::Busy,
        }
    }

    /// The group and its tags (ListTagsForResource: describe has none).
    async fn describe(&self, c: &Clients, id: &str) -> Result<Option<Group>, ProviderError> {
        let Some(mut group) = describe_one(self, id).await? else {
            return Ok(None);
        };
        if !group.arn.is_empty() {
            group.tags = tags::or_refused(c, self, &group.arn).await?;
        }
        if group.tags.is_empty()
            && let Some(node) = group.first_member_arn()
        {
            group.tags = tags::or_refused(c, self, &node).await?;
        }
        if let Some(member) = group.members.first() {
            group.node = describe_node(self, member).await?.unwrap_or_default();
        }
        Ok(Some(group))
    }

    /// Every group, with the tags of all of them from the resource groups
    /// tagging API: two paginated calls for a hundred groups.
    async fn list(&self, c: &Clients) -> Result<BTreeMap<String, Group>, ProviderError> {
        // The filter is the service alone (`service[:resourceType]` in
        // AWS's documentation of GetResources), narrowed to replication
        // groups by their ARNs (`arn:aws:elasticache:…:replicationgroup:<id>`).
        let mut tags = crate::tags::tagged(c, "elasticache", |arn| {
            arn.contains(":replicationgroup:").then(|| arn.to_string())
        })
        .await?;
        let mut groups = describe_all(self).await?;
        let mut nodes = describe_nodes(self).await?;
        for group in groups.values_mut() {
            // A group never tagged is not in the tagging API's answer (and
            // is then read on its own, see `database::observe`).
            group.tags = tags.remove(&group.arn).unwrap_or_default();
            let node = group.members.first().and_then(|m| nodes.remove(m));
            group.node = node.unwrap_or_default();
        }
        Ok(groups)
    }

    async fn modify(
        &self,
        id: &str,
        want: &Desired,
        changes: Split<Field>,
    ) -> Result<(), ProviderError> {
        let call = self.modify_replication_group().replication_group_id(id);
        let call = changes.set_on(call, |call, field| match field {
            Field::CacheNodeType => call.cache_node_type(&want.node_type),
            Field::EngineVersion => call.set_engine_version(want.engine_version.clone()),
            Field::SnapshotRetentionLimit => call.snapshot_retention_limit(want.snapshot_retention),
            Field::SnapshotWindow => call.set_snapshot_window(want.snapshot_window.clone()),
            Field::PreferredMaintenanceWindow => {
                call.set_preferred_maintenance_window(want.maintenance_window.clone())
            }
        });
        let call = call.apply_immediately(changes.immediately);
        let op = "elasticache:ModifyReplicationGroup";
        call.send().await.named(op, id)?;
        Ok(())
    }

    async fn remove(
        &self,
        r: Removal<'_, Group, DeleteStrategy>,
    ) -> Result<Deletion, ProviderError> {
        // Already gone (a lost answer's call acted): the next pass's
        // describe finds that and finishes.
        let gone = |e: &DeleteReplicationGroupError| e.is_replication_group_not_found_fault();
        self.delete_replication_group()
            .replication_group_id(r.id)
            .retain_primary_cluster(r.strategy.retain_primary_cluster.unwrap_or(false))
            .set_final_snapshot_identifier(r.final_snapshot)
            .send()
            .await
            .unless_missing(gone, "elasticache:DeleteReplicationGroup", r.id)?;
        let what = Self::SERVICE.what;
        Ok(Deletion::InProgress(format!("deleting {what} {}", r.id)))
    }
}

/// Replication group statuses in which the group serves clients, as the
/// Go operator lists them (`healthyAWSReplicationGroupStatuses`,
/// provider_redis.go).
const HEALTHY: [&str; 5] = [
    "creating",
    "available",
    "modifying",
    "deleting",
    "snapshotting",
];

/// The group's AUTH token: made and stored before a group is created
/// (unless the tier turns in-transit encryption off), read back for a group
/// that has one; `None` for a group without.
async fn auth_token(
    store: &dyn CredentialsStore,
    req: &ResourceRequest,
    t: &CreateStrategy,
    have: Option<&Group>,
    plan: &Plan<Field>,
) -> Result<Option<String>, ProviderError> {
    let secret = credentials_secret(&req.name);
    match (have, plan) {
        (None, Plan::Create) if t.transit_encryption != Some(false) => {
            let defaults = [(
                AUTH_TOKEN,
                credentials::random_password as credentials::Generator,
            )];
            let stored = credentials::ensure(store, req, &secret, &defaults).await?;
            Ok(stored.get(AUTH_TOKEN).cloned())
        }
        (Some(group), _) if group.auth_token => {
            let stored = store.read(req, &secret).await?.unwrap_or_default();
            Ok(stored.get(AUTH_TOKEN).cloned())
        }
        _ => Ok(None),
    }
}

async fn create(
    c: &Clients,
    hint: &VpcHint,
    req: &ResourceRequest,
    t: &CreateStrategy,
    want: &Desired,
    auth_token: Option<String>,
) -> Result<Created, ProviderError> {
    if let Some(snapshot) = &req.restore_from_snapshot {
        crate::snapshots::check_restorable(&c.elasticache, req, snapshot).await?;
    }
    let port = t.port.unwrap_or(6379);
    let places_itself = t.subnet_group.is_some() || t.security_groups.is_some();
    let (placed, _held) =
        network::placement(c, req, hint, Engine::Redis, port, places_itself).await?;
    let was_placed = placed.is_some();
    let ec = &c.elasticache;
    let id = req.identifier.as_str();
    let tags: Vec<(String, String)> = req.creation_tags().into_iter().collect();
    let sent =
        ec.create_replication_group()
            .replication_group_id(id)
            .replication_group_description(t.description.clone().unwrap_or_else(|| {
                format!("{}/{} (cloud-resource-operator)", req.namespace, req.name)
            }))
            .engine("redis")
            .set_engine_version(t.engine_version.clone())
            .cache_node_type(&want.node_type)
            .num_cache_clusters(t.num_cache_clusters.unwrap_or(2))
            .automatic_failover_enabled(t.automatic_failover.unwrap_or(true))
            .set_multi_az_enabled(t.multi_az)
            .at_rest_encryption_enabled(t.at_rest_encryption.unwrap_or(true))
            // AWS refuses an AUTH token without in-transit encryption.
            .transit_encryption_enabled(auth_token.is_some() || t.transit_encryption == Some(true))
            .set_auth_token(auth_token)
            .snapshot_retention_limit(want.snapshot_retention)
            .set_snapshot_window(want.snapshot_window.clone())
            .set_preferred_maintenance_window(want.maintenance_window.clone())
            .set_cache_subnet_group_name(
                (t.subnet_group.clone()).or(placed.as_ref().map(|p| p.subnet_group.clone())),
            )
            .set_security_group_ids(
                (t.security_groups.clone()).or(placed.map(|p| vec![p.security_group_id])),
            )
            .set_cache_parameter_group_name(t.parameter_group.clone())
            .set_port(t.port)
            // Create-only fields, passed through as the Go operator did.
            .set_kms_key_id(t.kms_key_id.clone())
            .set_preferred_cache_cluster_azs(t.preferred_zones.clone())
            .set_notification_topic_arn(t.notification_topic_arn.clone())
            .set_network_type(t.network_type.as_deref().map(Into::into))
            .set_data_tiering_enabled(t.data_tiering)
            .set_auto_minor_version_upgrade(t.auto_minor_upgrade)
            // A clone (spec.restoreFromSnapshot): seeded from the snapshot.
            .set_snapshot_name(req.restore_from_snapshot.clone())
            .set_tags(Some(tags::sdk(&tags)))
            .send()
            .await;
    created(sent, "elasticache:CreateReplicationGroup", id)
        .map_err(|e| network::when_placed(e, was_placed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::Plan;
    use aws_sdk_elasticache::types::ReplicationGroup;
    use cro_provider_api::ResourceKind;
    use serde_json::{Value, json};

    fn req(size: Option<&str>) -> ResourceRequest {
        let mut req = ResourceRequest::offline(ResourceKind::Redis, json!({}));
        // The Go operator's identifier of CR app/cache in cluster c1.
        (req.namespace, req.name) = ("app".into(), "cache".into());
        req.identifier = "c1appcache".into();
        req.options.size = size.map(str::to_string);
        req.owner_tag = ("clusterID".into(), "c1".into());
        req
    }

    /// After a switch that may be rolled back, a tier silent on it gets
    /// the Go operator's default (no in-transit encryption); one that says
    /// keeps its word, and outside that mode nothing changes.
    #[test]
    fn the_go_default_applies_only_where_the_tier_is_silent() {
        let silent = CreateStrategy::default();
        let go = go_defaults(&silent, true).map(|s| s.transit_encryption);
        assert_eq!(go, Some(Some(false)));
        assert!(go_defaults(&silent, false).is_none());
        let tls = CreateStrategy {
            transit_encryption: Some(true),
            ..CreateStrategy::default()
        };
        assert!(go_defaults(&tls, true).is_none());
    }

    fn want(tier: Value, size: Option<&str>) -> Desired {
        database::desired::<Client>(&req(size), tier)
    }

    /// A group as the Go operator creates one with an empty tier
    /// (buildElasticacheCreateStrategy, pkg/providers/aws/provider_redis.go),
    /// read the way DescribeReplicationGroups returns it. Tags come from a
    /// call of their own, so they are added after.
    fn go_created() -> Group {
        use aws_sdk_elasticache::types::{Endpoint, NodeGroup};
        let primary = Endpoint::builder().address("primary.example").port(6379);
        let group = ReplicationGroup::builder()
            .arn("arn")
            .status("available")
            .cache_node_type("cache.t3.micro")
            .snapshot_retention_limit(31)
            .snapshot_window("02:00-03:00")
            .node_groups(
                NodeGroup::builder()
                    .primary_endpoint(primary.build())
                    .build(),
            )
            .build();
        let mut g = Group::from(&group);
        g.tags.insert("clusterID".into(), "c1".into());
        g.node = Node {
            engine_version: "7.1".into(),
            maintenance_window: "mon:04:00-mon:05:00".into(),
        };
        g
    }

    #[test]
    fn the_go_operators_tags_are_read_from_the_first_node() {
        let group = ReplicationGroup::builder()
            .arn("arn:aws:elasticache:eu-west-1:123456789012:replicationgroup:g1")
            .member_clusters("g1-001")
            .member_clusters("g1-002")
            .build();
        assert_eq!(
            Group::from(&group).first_member_arn().as_deref(),
            Some("arn:aws:elasticache:eu-west-1:123456789012:cluster:g1-001")
        );
        let no_members = ReplicationGroup::builder()
            .arn("arn:aws:elasticache:r:1:replicationgroup:g")
            .build();
        assert_eq!(Group::from(&no_members).first_member_arn(), None);
    }

    #[test]
    fn each_drift_field_has_its_rule() {
        use Timing::*;
        // Row: (tier, spec.size, expected (field, timing))
        type Row<'a> = (Value, Option<&'a str>, Vec<(&'a str, Timing)>);
        let rows: Vec<Row> = vec![
            (json!({}), None, vec![]),
            (
                json!({"SnapshotWindow": "02:00-03:00", "CacheNodeType": null}),
                None,
                vec![],
            ),
            (
                json!({"CacheNodeType": "cache.m5.large"}),
                None,
                vec![("CacheNodeType", MaintenanceWindow)],
            ),
            (
                json!({"CacheNodeType": "cache.m5.large"}),
                Some("cache.t3.micro"),
                vec![],
            ),
            (
                json!({}),
                Some("cache.r6g.large"),
                vec![("CacheNodeType", MaintenanceWindow)],
            ),
            (
                json!({"SnapshotRetentionLimit": 7}),
                None,
                vec![("SnapshotRetentionLimit", Online)],
            ),
            (
                json!({"SnapshotWindow": "05:00-06:00"}),
                None,
                vec![("SnapshotWindow", Online)],
            ),
            // The window the nodes have, compared as the Go operator did.
            (
                json!({"PreferredMaintenanceWindow": "Mon:04:00-Mon:05:00"}),
                None,
                vec![],
            ),
            (
                json!({"PreferredMaintenanceWindow": "tue:04:00-tue:05:00"}),
                None,
                vec![("PreferredMaintenanceWindow", Online)],
            ),
            // The nodes run 7.1: only a newer version is an upgrade, for
            // the window; none in the tier compares nothing.
            (
                json!({"EngineVersion": "7.2"}),
                None,
                vec![("EngineVersion", MaintenanceWindow)],
            ),
            (json!({"EngineVersion": "7.1"}), None, vec![]),
            (json!({"EngineVersion": "6.2"}), None, vec![]),
        ];
        for (tier, size, expected) in rows {
            let got = Client::differences(&go_created(), &want(tier.clone(), size));
            let got: Vec<(&str, Timing)> = got
                .iter()
                .map(|d| (d.change.field.as_str(), d.change.timing.clone()))
                .collect();
            assert_eq!(got, expected, "tier {tier} size {size:?}");
        }
    }

    #[test]
    fn the_plan_follows_the_group_state() {
        let decide = database::decide::<Client>;
        let d = want(json!({}), None);
        assert_eq!(decide(None, &d, &req(None)), Plan::Create);
        let mut recorded = req(None);
        recorded.recorded_identifier = Some("c1appcache".into());
        assert!(
            matches!(decide(None, &d, &recorded), Plan::Fail(m) if m.contains("no longer exists"))
        );
        let mut g = go_created();
        g.status = "modifying".into();
        assert!(matches!(decide(Some(&g), &d, &req(None)), Plan::Wait(..)));
        g.status = "create-failed".into();
        assert!(matches!(decide(Some(&g), &d, &req(None)), Plan::Fail(_)));
        // The Go operator tagged the nodes, not the group: recorded, it is ours.
        let mut untagged = go_created();
        untagged.tags.clear();
        assert!(matches!(
            decide(Some(&untagged), &d, &req(None)),
            Plan::Unadopted(_)
        ));
        assert!(matches!(
            decide(Some(&untagged), &d, &recorded),
            Plan::Converge(_)
        ));
    }
}
