//! Redis as an ElastiCache replication group: failover with two nodes,
//! encryption at rest and 31 days of snapshots by default, `spec.size` as
//! the node type, the primary endpoint in the Secret (`uri` is the host, as
//! in the Go operator), a tagged final snapshot on delete, node type
//! changes only when the CR allows them.

use std::collections::BTreeMap;

use aws_sdk_elasticache::{
    Client,
    types::{ReplicationGroup, Tag},
};
use cro_provider_api::{
    ConnectionDetails, Deletion, Outcome, ProviderError, Provisioned, ResourceRequest,
};

use crate::{
    RECHECK,
    errors::api_error,
    strategy::{FieldType, Fields, Section, Tier},
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

pub fn final_snapshot_id(id: &str) -> String {
    format!("{id}-final")
}

/// `spec.size` wins over the tier's CacheNodeType.
fn node_type(req: &ResourceRequest, f: &Fields<'_>) -> Result<String, ProviderError> {
    if let Some(size) = req.options.size.clone().filter(|s| !s.is_empty()) {
        return Ok(size);
    }
    Ok(f.string("CacheNodeType")?
        .unwrap_or_else(|| "cache.t3.micro".into()))
}

async fn describe(ec: &Client, id: &str) -> Result<Option<ReplicationGroup>, ProviderError> {
    match ec
        .describe_replication_groups()
        .replication_group_id(id)
        .send()
        .await
    {
        Ok(out) => Ok(out.replication_groups().first().cloned()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_replication_group_not_found_fault()) =>
        {
            Ok(None)
        }
        Err(e) => Err(api_error("elasticache:DescribeReplicationGroups", id, e)),
    }
}

pub async fn reconcile(
    ec: &Client,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Provisioned, ProviderError> {
    let f = Fields::new(&CREATE_STRATEGY, &tier.create)?;
    let id = req.identifier.as_str();
    let node_type = node_type(req, &f)?;
    let version = f.string("EngineVersion")?;
    let provisioned = |outcome| Provisioned {
        outcome,
        provider: PROVIDER.into(),
        version: version.clone(),
        identifier: Some(id.to_string()),
        recheck_after: Some(RECHECK),
        conditions: Vec::new(),
    };
    let Some(group) = describe(ec, id).await? else {
        if let Some(recorded) = &req.recorded_identifier {
            return Ok(provisioned(Outcome::Failed(format!(
                "ElastiCache replication group {recorded} was created for this resource but no longer exists (deleted outside the operator?); it is not re-created automatically: restore it from a snapshot, or delete the resourceIdentifier annotation to create a new, empty one"
            ))));
        }
        let tags: Vec<Tag> = req
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let create = ec
            .create_replication_group()
            .replication_group_id(id)
            .replication_group_description(format!(
                "{}/{} (cloud-resource-operator)",
                req.namespace, req.name
            ))
            .engine("redis")
            .set_engine_version(version.clone())
            .cache_node_type(&node_type)
            .num_cache_clusters(f.int("NumCacheClusters")?.unwrap_or(2))
            .automatic_failover_enabled(f.bool("AutomaticFailoverEnabled")?.unwrap_or(true))
            .multi_az_enabled(
                f.bool("MultiAZEnabled")?
                    .unwrap_or(req.tier == "production"),
            )
            .at_rest_encryption_enabled(f.bool("AtRestEncryptionEnabled")?.unwrap_or(true))
            .transit_encryption_enabled(f.bool("TransitEncryptionEnabled")?.unwrap_or(false))
            .snapshot_retention_limit(f.int("SnapshotRetentionLimit")?.unwrap_or(31))
            .set_snapshot_window(f.string("SnapshotWindow")?)
            .set_preferred_maintenance_window(f.string("PreferredMaintenanceWindow")?)
            .set_cache_subnet_group_name(f.string("CacheSubnetGroupName")?)
            .set_security_group_ids(f.strings("SecurityGroupIds")?)
            .set_cache_parameter_group_name(f.string("CacheParameterGroupName")?)
            .set_port(f.int("Port")?)
            .set_tags(Some(tags));
        create
            .send()
            .await
            .map_err(|e| api_error("elasticache:CreateReplicationGroup", id, e))?;
        return Ok(provisioned(Outcome::InProgress(format!(
            "creating ElastiCache replication group {id}"
        ))));
    };
    let status = group.status().unwrap_or_default();
    match status {
        "available" => {}
        "create-failed" => {
            return Ok(provisioned(Outcome::Failed(format!(
                "ElastiCache replication group {id} failed to create; see its events in the ElastiCache console, fix the tier, then delete it to retry"
            ))));
        }
        other => {
            return Ok(provisioned(Outcome::InProgress(format!(
                "ElastiCache replication group {id} is {other}"
            ))));
        }
    }
    ensure_tags(ec, req, group.arn().unwrap_or_default()).await?;
    if let Some(pending) = modify(ec, req, &group, &node_type).await? {
        return Ok(provisioned(Outcome::InProgress(pending)));
    }
    let primary = group
        .node_groups()
        .first()
        .and_then(|g| g.primary_endpoint());
    Ok(provisioned(Outcome::Ready(ConnectionDetails(
        BTreeMap::from([
            (
                "uri".into(),
                primary
                    .and_then(|e| e.address())
                    .unwrap_or_default()
                    .to_string(),
            ),
            (
                "port".into(),
                primary.and_then(|e| e.port()).unwrap_or(6379).to_string(),
            ),
        ]),
    ))))
}

async fn ensure_tags(ec: &Client, req: &ResourceRequest, arn: &str) -> Result<(), ProviderError> {
    let have = ec
        .list_tags_for_resource()
        .resource_name(arn)
        .send()
        .await
        .map_err(|e| api_error("elasticache:ListTagsForResource", arn, e))?;
    let have: BTreeMap<&str, &str> = have
        .tag_list()
        .iter()
        .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
        .collect();
    let missing: Vec<Tag> = crate::tags::differing(&req.tags, &have)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    if !missing.is_empty() {
        ec.add_tags_to_resource()
            .resource_name(arn)
            .set_tags(Some(missing))
            .send()
            .await
            .map_err(|e| api_error("elasticache:AddTagsToResource", arn, e))?;
    }
    Ok(())
}

/// A node type change is disruptive: only with maintenanceWindow or
/// applyImmediately.
async fn modify(
    ec: &Client,
    req: &ResourceRequest,
    group: &ReplicationGroup,
    node_type: &str,
) -> Result<Option<String>, ProviderError> {
    let id = req.identifier.as_str();
    let have = group.cache_node_type().unwrap_or(node_type);
    if have == node_type {
        return Ok(None);
    }
    if !(req.options.maintenance_window || req.options.apply_immediately) {
        return Ok(Some(format!(
            "ElastiCache replication group {id} has node type {have}, the tier or spec.size asks for {node_type}; set spec.maintenanceWindow or spec.applyImmediately to apply"
        )));
    }
    ec.modify_replication_group()
        .replication_group_id(id)
        .cache_node_type(node_type)
        .apply_immediately(true)
        .send()
        .await
        .map_err(|e| api_error("elasticache:ModifyReplicationGroup", id, e))?;
    Ok(Some(format!(
        "modifying ElastiCache replication group {id}: node type {have} -> {node_type}"
    )))
}

pub async fn delete(
    ec: &Client,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Deletion, ProviderError> {
    let f = Fields::new(&DELETE_STRATEGY, &tier.delete)?;
    let skip_final = f.bool("SkipFinalSnapshot")?.unwrap_or(false);
    let id = req.identifier.as_str();
    let Some(group) = describe(ec, id).await? else {
        if !skip_final {
            tag_final_snapshot(ec, req).await?;
        }
        return Ok(Deletion::Done);
    };
    if group.status() == Some("deleting") {
        return Ok(Deletion::InProgress(format!(
            "ElastiCache replication group {id} is deleting"
        )));
    }
    let mut delete = ec
        .delete_replication_group()
        .replication_group_id(id)
        .retain_primary_cluster(false);
    if !skip_final {
        delete = delete.final_snapshot_identifier(final_snapshot_id(id));
    }
    delete
        .send()
        .await
        .map_err(|e| api_error("elasticache:DeleteReplicationGroup", id, e))?;
    Ok(Deletion::InProgress(format!(
        "deleting ElastiCache replication group {id}"
    )))
}

async fn tag_final_snapshot(ec: &Client, req: &ResourceRequest) -> Result<(), ProviderError> {
    let name = final_snapshot_id(&req.identifier);
    let found = ec.describe_snapshots().snapshot_name(&name).send().await;
    let arn = match found {
        Ok(out) => out
            .snapshots()
            .first()
            .and_then(|s| s.arn())
            .map(str::to_string),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_snapshot_not_found_fault()) =>
        {
            None
        }
        Err(e) => return Err(api_error("elasticache:DescribeSnapshots", &name, e)),
    };
    match arn {
        Some(arn) => ensure_tags(ec, req, &arn).await,
        None => Ok(()),
    }
}
