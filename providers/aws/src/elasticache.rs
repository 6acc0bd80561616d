//! Redis as an ElastiCache replication group: what is ElastiCache's own in
//! observe → decide → act over the steps shared with RDS
//! ([`crate::database`]): [`Group`] (tags batched through the resource
//! groups tagging API when listing), [`differences`], [`reconcile`]. Defaults are the Go operator's
//! (`buildElasticacheCreateStrategy`, pkg/providers/aws/provider_redis.go):
//! two nodes with automatic failover, encryption at rest, 31 days of
//! snapshots; `spec.size` is the node type. The Secret's `uri` is the
//! primary endpoint's host, as in the Go operator. Deletion takes a tagged
//! final snapshot unless the tier says otherwise.

use std::collections::BTreeMap;

use aws_sdk_elasticache::{Client, types::ReplicationGroup};
use cro_provider_api::{
    Change, ConnectionDetails, Deletion, IdentifierRules, ProviderError, Provisioned,
    ResourceRequest, Timing,
};

use crate::{
    clients::Clients,
    database::{self, Begun, Database, Plan, State},
    errors::Answer,
    listing::Listing,
    plan::{Split, change},
    strategy::{FieldType, Fields, Section, Tier},
    tags::{self, Tagging},
};

pub const PROVIDER: &str = "aws-elasticache";

pub const CREATE_STRATEGY: Section = Section {
    name: "createStrategy",
    api: "elasticache:CreateReplicationGroup",
    fields: &[
        ("CacheNodeType", FieldType::String),
        ("EngineVersion", FieldType::String),
        ("NumCacheClusters", FieldType::Int),
        ("AutomaticFailoverEnabled", FieldType::Bool),
        ("MultiAZEnabled", FieldType::Bool),
        ("AtRestEncryptionEnabled", FieldType::Bool),
        ("TransitEncryptionEnabled", FieldType::Bool),
        ("SnapshotRetentionLimit", FieldType::Int),
        ("SnapshotWindow", FieldType::String),
        ("PreferredMaintenanceWindow", FieldType::String),
        ("CacheSubnetGroupName", FieldType::String),
        ("SecurityGroupIds", FieldType::Strings),
        ("CacheParameterGroupName", FieldType::String),
        ("Port", FieldType::Int),
    ],
};
pub const DELETE_STRATEGY: Section = Section {
    name: "deleteStrategy",
    api: "elasticache:DeleteReplicationGroup",
    fields: &[("SkipFinalSnapshot", FieldType::Bool)],
};

/// What the tier (and `spec.size`) asks for of a running group.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub node_type: String,
    pub snapshot_retention: i32,
    pub snapshot_window: Option<String>,
    pub maintenance_window: Option<String>,
}

impl Desired {
    pub fn from_tier(req: &ResourceRequest, f: &Fields<'_>) -> Result<Self, ProviderError> {
        // spec.size wins over the tier's CacheNodeType.
        let size = req.options.size.clone().filter(|s| !s.is_empty());
        Ok(Desired {
            node_type: match size {
                Some(size) => size,
                None => f
                    .string("CacheNodeType")?
                    .unwrap_or_else(|| "cache.t3.micro".into()),
            },
            snapshot_retention: f.int("SnapshotRetentionLimit")?.unwrap_or(31),
            snapshot_window: f.string("SnapshotWindow")?,
            maintenance_window: f.string("PreferredMaintenanceWindow")?,
        })
    }
}

/// The live replication group, as far as decisions need it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    pub arn: String,
    pub status: String,
    pub node_type: String,
    pub snapshot_retention: i32,
    pub snapshot_window: String,
    pub primary: Option<(String, i32)>,
    /// Read separately (ListTagsForResource): describe does not carry them.
    pub tags: BTreeMap<String, String>,
}

impl From<&ReplicationGroup> for Group {
    fn from(g: &ReplicationGroup) -> Self {
        let primary = g.node_groups().first().and_then(|n| n.primary_endpoint());
        Group {
            arn: g.arn().unwrap_or_default().into(),
            status: g.status().unwrap_or_default().into(),
            node_type: g.cache_node_type().unwrap_or_default().into(),
            snapshot_retention: g.snapshot_retention_limit().unwrap_or_default(),
            snapshot_window: g.snapshot_window().unwrap_or_default().into(),
            primary: primary.map(|e| {
                (
                    e.address().unwrap_or_default().to_string(),
                    e.port().unwrap_or(6379),
                )
            }),
            tags: BTreeMap::new(),
        }
    }
}

/// Every field of the group that differs from the tier (pure).
pub fn differences(have: &Group, want: &Desired) -> Vec<Change> {
    let mut out = Vec::new();
    if !have.node_type.is_empty() && have.node_type != want.node_type {
        let timing = Timing::MaintenanceWindow;
        out.push(change(
            "CacheNodeType",
            &have.node_type,
            &want.node_type,
            timing,
            false,
        ));
    }
    if have.snapshot_retention != want.snapshot_retention {
        let (have, want) = (have.snapshot_retention, want.snapshot_retention);
        out.push(change(
            "SnapshotRetentionLimit",
            have,
            want,
            Timing::Now,
            false,
        ));
    }
    if let Some(window) = want
        .snapshot_window
        .as_ref()
        .filter(|w| !w.eq_ignore_ascii_case(&have.snapshot_window))
    {
        out.push(change(
            "SnapshotWindow",
            &have.snapshot_window,
            window,
            Timing::Now,
            false,
        ));
    }
    out
}

pub fn decide(have: Option<&Group>, want: &Desired, req: &ResourceRequest) -> Plan {
    database::decide::<Client>(have, |h| differences(h, want), req)
}

database::live!(Group);

#[async_trait::async_trait]
impl Database for Client {
    type Live = Group;
    const PROVIDER: &'static str = PROVIDER;
    const WHAT: &'static str = "ElastiCache replication group";
    const API_NAME: &'static str = "ReplicationGroup";
    const SNAPSHOT_RULES: IdentifierRules = IdentifierRules::ElastiCacheSnapshot;

    fn of(c: &Clients) -> (&Self, &Listing<Group>) {
        (&c.elasticache, &c.elasticache_listing)
    }

    /// The group and its tags (ListTagsForResource: describe has none).
    async fn describe(&self, id: &str) -> Result<Option<Group>, ProviderError> {
        let out = self
            .describe_replication_groups()
            .replication_group_id(id)
            .send()
            .await
            .unless_missing(
                |e| e.is_replication_group_not_found_fault(),
                "elasticache:DescribeReplicationGroups",
                id,
            )?;
        let Some(mut group) = out.and_then(|o| o.replication_groups().first().map(Group::from))
        else {
            return Ok(None);
        };
        if !group.arn.is_empty() {
            group.tags = self.tags(&group.arn).await?;
        }
        Ok(Some(group))
    }

    /// Every group, with the tags of all of them from the resource groups
    /// tagging API: two paginated calls for a hundred groups.
    async fn list(&self, c: &Clients) -> Result<BTreeMap<String, Group>, ProviderError> {
        // The filter is the service alone (`service[:resourceType]` in
        // AWS's documentation of GetResources), narrowed to replication
        // groups by their ARNs (`arn:aws:elasticache:…:replicationgroup:<id>`).
        let mut tags = crate::tags::tagged(&c.tagging, "elasticache", |arn| {
            arn.contains(":replicationgroup:").then(|| arn.to_string())
        })
        .await?;
        let mut pages = self
            .describe_replication_groups()
            .max_records(100)
            .into_paginator()
            .send();
        let mut all = BTreeMap::new();
        while let Some(page) = pages.next().await {
            let page = page.named("elasticache:DescribeReplicationGroups", "(all)")?;
            for g in page.replication_groups() {
                let Some(id) = g.replication_group_id() else {
                    continue;
                };
                let mut group = Group::from(g);
                // A group never tagged is not in the tagging API's answer.
                group.tags = tags.remove(&group.arn).unwrap_or_default();
                all.insert(id.to_string(), group);
            }
        }
        Ok(all)
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
}

/// Every change `reconcile` would make, from read-only calls.
pub async fn plan(
    c: &Clients,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Vec<Change>, ProviderError> {
    let want = Desired::from_tier(req, &Fields::new(&CREATE_STRATEGY, &tier.create)?)?;
    database::planned::<Client>(c, req, |h| differences(h, &want)).await
}

pub async fn reconcile(
    c: &Clients,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Provisioned, ProviderError> {
    let f = Fields::new(&CREATE_STRATEGY, &tier.create)?;
    let want = Desired::from_tier(req, &f)?;
    let have = database::observe::<Client>(c, req).await?;
    let plan = decide(have.as_ref(), &want, req);
    let calls = database::Calls {
        create: create(&c.elasticache, req, &f, &want),
        modify: |changes| modify(&c.elasticache, &req.identifier, &want, changes),
    };
    let mut report = database::act::<Client, _, _, _>(c, req, have, plan, calls, |have| {
        let (host, port) = have.primary.clone().unwrap_or_default();
        ConnectionDetails(BTreeMap::from([
            ("uri".into(), host),
            ("port".into(), port.to_string()),
        ]))
    })
    .await?;
    report.version = f.string("EngineVersion")?;
    Ok(report)
}

async fn create(
    ec: &Client,
    req: &ResourceRequest,
    f: &Fields<'_>,
    want: &Desired,
) -> Result<(), ProviderError> {
    let id = req.identifier.as_str();
    let tags: Vec<(String, String)> = req.tags.clone().into_iter().collect();
    ec.create_replication_group()
        .replication_group_id(id)
        .replication_group_description(format!(
            "{}/{} (cloud-resource-operator)",
            req.namespace, req.name
        ))
        .engine("redis")
        .set_engine_version(f.string("EngineVersion")?)
        .cache_node_type(&want.node_type)
        .num_cache_clusters(f.int("NumCacheClusters")?.unwrap_or(2))
        .automatic_failover_enabled(f.bool("AutomaticFailoverEnabled")?.unwrap_or(true))
        .set_multi_az_enabled(f.bool("MultiAZEnabled")?)
        .at_rest_encryption_enabled(f.bool("AtRestEncryptionEnabled")?.unwrap_or(true))
        .transit_encryption_enabled(f.bool("TransitEncryptionEnabled")?.unwrap_or(false))
        .snapshot_retention_limit(want.snapshot_retention)
        .set_snapshot_window(want.snapshot_window.clone())
        .set_preferred_maintenance_window(want.maintenance_window.clone())
        .set_cache_subnet_group_name(f.string("CacheSubnetGroupName")?)
        .set_security_group_ids(f.strings("SecurityGroupIds")?)
        .set_cache_parameter_group_name(f.string("CacheParameterGroupName")?)
        .set_port(f.int("Port")?)
        // A clone (spec.restoreFromSnapshot): seeded from the snapshot.
        .set_snapshot_name(req.restore_from_snapshot.clone())
        .set_tags(Some(tags::sdk(&tags)))
        .send()
        .await
        .named("elasticache:CreateReplicationGroup", id)?;
    Ok(())
}

async fn modify(
    ec: &Client,
    id: &str,
    want: &Desired,
    changes: Split,
) -> Result<(), ProviderError> {
    let mut call = ec
        .modify_replication_group()
        .replication_group_id(id)
        .apply_immediately(changes.immediately);
    for c in &changes.apply {
        call = match c.field.as_str() {
            "CacheNodeType" => call.cache_node_type(&want.node_type),
            "SnapshotRetentionLimit" => call.snapshot_retention_limit(want.snapshot_retention),
            "SnapshotWindow" => call.set_snapshot_window(want.snapshot_window.clone()),
            _ => call,
        };
    }
    call.send()
        .await
        .named("elasticache:ModifyReplicationGroup", id)?;
    Ok(())
}

pub async fn delete(
    c: &Clients,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Deletion, ProviderError> {
    let f = Fields::new(&DELETE_STRATEGY, &tier.delete)?;
    let skip_final = f.bool("SkipFinalSnapshot")?.unwrap_or(false);
    let id = req.identifier.as_str();
    match database::begin_delete::<Client>(c, req, skip_final).await? {
        Begun::Gone | Begun::NotOurs => return Ok(Deletion::Done),
        Begun::Deleting(why) => return Ok(Deletion::InProgress(why)),
        Begun::Present(_) => {}
    }
    let ec = &c.elasticache;
    let mut delete = ec
        .delete_replication_group()
        .replication_group_id(id)
        .retain_primary_cluster(false);
    if !skip_final {
        delete = delete.final_snapshot_identifier(database::final_snapshot_id::<Client>(req));
    }
    delete
        .send()
        .await
        .named("elasticache:DeleteReplicationGroup", id)?;
    Ok(Deletion::InProgress(format!(
        "deleting ElastiCache replication group {id}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cro_provider_api::ResourceKind;
    use serde_json::{Value, json};

    fn req(size: Option<&str>) -> ResourceRequest {
        let mut req = ResourceRequest::offline(ResourceKind::Redis, json!({}));
        req.identifier = "g".into();
        req.options.size = size.map(str::to_string);
        req.owner_tag = ("clusterID".into(), "c1".into());
        req
    }

    fn want(tier: Value, size: Option<&str>) -> Desired {
        let map = tier.as_object().cloned().unwrap_or_default();
        let f = Fields::new(&CREATE_STRATEGY, &map).unwrap_or_else(|e| panic!("{e}"));
        Desired::from_tier(&req(size), &f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A group as the Go operator creates one with an empty tier.
    fn go_created() -> Group {
        Group {
            arn: "arn".into(),
            status: "available".into(),
            node_type: "cache.t3.micro".into(),
            snapshot_retention: 31,
            snapshot_window: "02:00-03:00".into(),
            primary: Some(("primary.example".into(), 6379)),
            tags: BTreeMap::from([("clusterID".to_string(), "c1".to_string())]),
        }
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
                vec![("SnapshotRetentionLimit", Now)],
            ),
            (
                json!({"SnapshotWindow": "05:00-06:00"}),
                None,
                vec![("SnapshotWindow", Now)],
            ),
        ];
        for (tier, size, expected) in rows {
            let got = differences(&go_created(), &want(tier.clone(), size));
            let got: Vec<(&str, Timing)> = got
                .iter()
                .map(|c| (c.field.as_str(), c.timing.clone()))
                .collect();
            assert_eq!(got, expected, "tier {tier} size {size:?}");
        }
    }

    #[test]
    fn the_plan_follows_the_group_state() {
        let d = want(json!({}), None);
        assert_eq!(decide(None, &d, &req(None)), Plan::Create);
        let mut recorded = req(None);
        recorded.recorded_identifier = Some("g".into());
        assert!(
            matches!(decide(None, &d, &recorded), Plan::Fail(m) if m.contains("no longer exists"))
        );
        let mut g = go_created();
        g.status = "modifying".into();
        assert!(matches!(decide(Some(&g), &d, &req(None)), Plan::Wait(_)));
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
            Plan::Converge { .. }
        ));
    }
}
