//! Which identifier a CR's resource has. The Go operator's
//! `<clusterID>-<namespace>-<name>` drops separators, so `team-a/db` and
//! `teama/db` share one. A CR that has recorded none, and whose shared
//! identifier names another CR's resource by its tags
//! ([`plan::another_crs`]), gets one of its own,
//! [`separate_identifier`]; resources already made keep their names.

use std::collections::BTreeMap;

use cro_provider_api::{ProviderError, ResourceKind, ResourceRequest, separate_identifier};

use aws_sdk_elasticache::Client as ElastiCache;
use aws_sdk_rds::Client as Rds;

use crate::{
    clients::Clients,
    database::{Database, Live},
    iam_user, plan, rules, s3, smtp, tags,
};

/// The identifier `req` (its own, recorded none, pinned by no tier) uses
/// instead of the shared one, if any: its separate identifier when a
/// resource was made for it there (a create whose answer was lost, after
/// which the other CR may have gone), or when the shared identifier's
/// resource is another CR's.
pub async fn separate(c: &Clients, req: &ResourceRequest) -> Result<Option<String>, ProviderError> {
    let own = own_separate(req);
    if let Some(found) = tags_of(c, req.kind, &own).await?
        && tags::made_for(&req.creation_tags(), &found)
    {
        return Ok(Some(own));
    }
    Ok(match tags_of(c, req.kind, &req.identifier).await? {
        Some(found) if plan::another_crs(req, &found).is_some() => Some(own),
        _ => None,
    })
}

/// The separate identifier of `req`'s CR, conformed to its kind's rules
/// (the owner tag's value is the cluster ID).
pub fn own_separate(req: &ResourceRequest) -> String {
    let cluster_id = &req.owner_tag.1;
    rules(req.kind).conform(&separate_identifier(cluster_id, &req.namespace, &req.name))
}

/// The tags of the resource `kind` is provisioned as under `id`, if it
/// exists (for an SMTPCredentialSet: its IAM user's).
pub async fn tags_of(
    c: &Clients,
    kind: ResourceKind,
    id: &str,
) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
    Ok(match kind {
        ResourceKind::Postgres => Rds::describe(&c.rds, id).await?.map(|l| l.tags().clone()),
        ResourceKind::Redis => ElastiCache::describe(&c.elasticache, id)
            .await?
            .map(|l| l.tags().clone()),
        ResourceKind::BlobStorage => s3::describe(&c.s3, id).await?,
        ResourceKind::Smtp => iam_user::user_tags(&c.iam, &smtp::user_name(id)).await?,
    })
}
