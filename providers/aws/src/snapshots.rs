//! Manual snapshots: PostgresSnapshot as an RDS DB snapshot, RedisSnapshot
//! as an ElastiCache snapshot, both tagged; `complete` once available.

use cro_provider_api::{Deletion, Outcome, ProviderError, SnapshotRequest, Snapshotted};

use crate::errors::api_error;

fn outcome(id: &str, status: &str) -> Outcome<String> {
    match status {
        "available" => Outcome::Ready(id.to_string()),
        "failed" => Outcome::Failed(format!(
            "snapshot {id} failed; delete this resource and create a new one to retry"
        )),
        other => Outcome::InProgress(format!("snapshot {id} is {other}")),
    }
}

pub async fn rds(
    rds: &aws_sdk_rds::Client,
    req: &SnapshotRequest,
) -> Result<Snapshotted, ProviderError> {
    let id = req.identifier.as_str();
    let found = rds
        .describe_db_snapshots()
        .db_snapshot_identifier(id)
        .send()
        .await;
    match found {
        Ok(out) => {
            let status = out
                .db_snapshots()
                .first()
                .and_then(|s| s.status())
                .unwrap_or("creating")
                .to_string();
            return Ok(Snapshotted {
                outcome: outcome(id, &status),
            });
        }
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_db_snapshot_not_found_fault()) => {}
        Err(e) => return Err(api_error("rds:DescribeDBSnapshots", id, e)),
    }
    let tags = req
        .tags
        .iter()
        .map(|(k, v)| aws_sdk_rds::types::Tag::builder().key(k).value(v).build())
        .collect();
    let create = rds
        .create_db_snapshot()
        .db_instance_identifier(&req.resource_identifier)
        .db_snapshot_identifier(id)
        .set_tags(Some(tags))
        .send()
        .await;
    match create {
        Ok(_) => Ok(Snapshotted {
            outcome: Outcome::InProgress(format!("creating snapshot {id}")),
        }),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_db_instance_not_found_fault()) =>
        {
            Ok(Snapshotted {
                outcome: Outcome::Failed(format!(
                    "RDS instance {} of Postgres {} does not exist; nothing to snapshot",
                    req.resource_identifier, req.name
                )),
            })
        }
        Err(e) => Err(api_error("rds:CreateDBSnapshot", id, e)),
    }
}

pub async fn delete_rds(
    rds: &aws_sdk_rds::Client,
    req: &SnapshotRequest,
) -> Result<Deletion, ProviderError> {
    let id = req.identifier.as_str();
    match rds
        .delete_db_snapshot()
        .db_snapshot_identifier(id)
        .send()
        .await
    {
        Ok(_) => Ok(Deletion::Done),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_db_snapshot_not_found_fault()) =>
        {
            Ok(Deletion::Done)
        }
        Err(e) => Err(api_error("rds:DeleteDBSnapshot", id, e)),
    }
}

pub async fn elasticache(
    ec: &aws_sdk_elasticache::Client,
    req: &SnapshotRequest,
) -> Result<Snapshotted, ProviderError> {
    let id = req.identifier.as_str();
    let found = ec.describe_snapshots().snapshot_name(id).send().await;
    match found {
        Ok(out) if !out.snapshots().is_empty() => {
            let status = out
                .snapshots()
                .first()
                .and_then(|s| s.snapshot_status())
                .unwrap_or("creating")
                .to_string();
            return Ok(Snapshotted {
                outcome: outcome(id, &status),
            });
        }
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_snapshot_not_found_fault()) => {}
        Err(e) => return Err(api_error("elasticache:DescribeSnapshots", id, e)),
    }
    let tags = req
        .tags
        .iter()
        .map(|(k, v)| {
            aws_sdk_elasticache::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
        })
        .collect();
    let create = ec
        .create_snapshot()
        .replication_group_id(&req.resource_identifier)
        .snapshot_name(id)
        .set_tags(Some(tags))
        .send()
        .await;
    match create {
        Ok(_) => Ok(Snapshotted {
            outcome: Outcome::InProgress(format!("creating snapshot {id}")),
        }),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_replication_group_not_found_fault()) =>
        {
            Ok(Snapshotted {
                outcome: Outcome::Failed(format!(
                    "ElastiCache replication group {} of Redis {} does not exist; nothing to snapshot",
                    req.resource_identifier, req.name
                )),
            })
        }
        Err(e) => Err(api_error("elasticache:CreateSnapshot", id, e)),
    }
}

pub async fn delete_elasticache(
    ec: &aws_sdk_elasticache::Client,
    req: &SnapshotRequest,
) -> Result<Deletion, ProviderError> {
    let id = req.identifier.as_str();
    match ec.delete_snapshot().snapshot_name(id).send().await {
        Ok(_) => Ok(Deletion::Done),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_snapshot_not_found_fault()) =>
        {
            Ok(Deletion::Done)
        }
        Err(e) => Err(api_error("elasticache:DeleteSnapshot", id, e)),
    }
}
