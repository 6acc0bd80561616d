//! Which identifier a CR's resource has. The Go operator's
//! `<clusterID>-<namespace>-<name>` drops separators, so `team-a/db` and
//! `teama/db` share one. A CR that has recorded none, and whose shared
//! identifier names another CR's resource by its tags
//! ([`plan::another_crs`]), gets one of its own,
//! [`separate_identifier`]; resources already made keep their names.

use cro_provider_api::{ProviderError, ResourceRequest, separate_identifier};

use super::Kind;
use crate::{clients::Clients, plan, tags};

/// The identifier `req` (its own, recorded none, pinned by no tier) uses
/// instead of the shared one, if any: its separate identifier when a
/// resource was made for it there (a create whose answer was lost, after
/// which the other CR may have gone), or when the shared identifier's
/// resource is another CR's.
pub async fn separate(
    kind: &dyn Kind,
    c: &Clients,
    req: &ResourceRequest,
) -> Result<Option<String>, ProviderError> {
    let own = own_separate(kind, req);
    if let Some(found) = kind.tags_of(c, &own).await?
        && tags::made_for(&req.tag_keys, &req.creation_tags(), &found)
    {
        return Ok(Some(own));
    }
    Ok(match kind.tags_of(c, &req.identifier).await? {
        Some(found) if plan::another_crs(req, &found).is_some() => Some(own),
        _ => None,
    })
}

/// The separate identifier of `req`'s CR, conformed to its kind's rules
/// (the owner tag's value is the cluster ID).
pub fn own_separate(kind: &dyn Kind, req: &ResourceRequest) -> String {
    let cluster_id = &req.owner_tag.1;
    (kind.rules()).conform(&separate_identifier(cluster_id, &req.namespace, &req.name))
}

/// The request with the identifier it may act on. The CR's
/// `resourceIdentifier` annotation (`recorded_identifier`) is written by
/// the operator but can be written by anyone who may edit the CR, so it is
/// accepted only when it is one of the CR's own identifiers: the default
/// for its namespace and name (`req.identifier`, computed by the
/// operator), its separate one, or the one its tier pins (`pinned`:
/// `DBInstanceIdentifier`, `ReplicationGroupId`, `Bucket`, as the Go
/// operator used them). Another would let a CR reset, rotate, snapshot or
/// delete a resource that is not its own. A delete ignores such an
/// annotation (it removes only what is the CR's own), so the CR can still
/// go.
pub fn claimed(
    kind: &dyn Kind,
    req: &ResourceRequest,
    pinned: Option<String>,
    deleting: bool,
) -> Result<ResourceRequest, ProviderError> {
    let rules = kind.rules();
    let (default, pinned) = (
        rules.conform(&req.identifier),
        pinned.map(|p| rules.conform(&p)),
    );
    let separate = own_separate(kind, req);
    let mut req = req.clone();
    let own = pinned.clone().unwrap_or_else(|| default.clone());
    match req.recorded_identifier.as_deref().map(|r| rules.conform(r)) {
        None => req.identifier = own,
        Some(r) if r == default || r == separate || Some(&r) == pinned.as_ref() => {
            req.identifier = r
        }
        Some(_) if deleting => {
            req.recorded_identifier = None;
            req.identifier = own;
        }
        Some(r) => return Err(foreign_annotation(&r, &own)),
    }
    Ok(req)
}

/// [`claimed`], then, for a CR that recorded no identifier and whose tier
/// pins none, its separate identifier when the shared one is another
/// CR's (see [`separate`]).
pub async fn resolved(
    kind: &dyn Kind,
    c: &Clients,
    req: &ResourceRequest,
    pinned: Option<String>,
    deleting: bool,
) -> Result<ResourceRequest, ProviderError> {
    let pins = pinned.is_some();
    let mut req = claimed(kind, req, pinned, deleting)?;
    if req.recorded_identifier.is_none()
        && !pins
        && let Some(own) = separate(kind, c, &req).await?
    {
        req.identifier = own;
    }
    Ok(req)
}

pub fn foreign_annotation(recorded: &str, own: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "annotation resourceIdentifier {recorded:?} is not this resource's identifier ({own:?}): the operator records it, and a resource may not name another one; remove the annotation (the operator records {own:?} again)"
    ))
}
