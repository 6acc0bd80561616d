//! What Postgres on RDS and Redis on ElastiCache share, written once over
//! one small trait per service, [`Database`]:
//! - observe: [`observe`], batched through the service's [`Listing`] for
//!   rechecks, one describe otherwise;
//! - decide: [`decide`], pure: vanished, someone else's, the service's
//!   state, then tags and the tier's differences;
//! - act: [`act`] runs the plan: the service's own create and modify
//!   calls, tags, and what the CR reports; [`begin_delete`] is every
//!   deletion's first step.

use std::{collections::BTreeMap, future::Future};

use cro_provider_api::{
    Adoption, Change, ConnectionDetails, IdentifierRules, Outcome, ProviderError, Provisioned,
    ResourceRequest,
};

use crate::{
    RECHECK,
    clients::Clients,
    listing::Listing,
    plan::{self, Gate, Settled, Split, settle, split, vanished},
    snapshots::{self, Snapshots},
};

/// The live resource, as far as the shared steps need it.
pub trait Live: Clone + Default + Send + Sync + 'static {
    fn arn(&self) -> &str;
    fn status(&self) -> &str;
    fn tags(&self) -> &BTreeMap<String, String>;
}

/// `Live` for a struct with `arn`, `status` and `tags` fields.
macro_rules! live {
    ($ty:ty) => {
        impl $crate::database::Live for $ty {
            fn arn(&self) -> &str {
                &self.arn
            }
            fn status(&self) -> &str {
                &self.status
            }
            fn tags(&self) -> &std::collections::BTreeMap<String, String> {
                &self.tags
            }
        }
    };
}
pub(crate) use live;

/// What a state of the service's resource means.
#[derive(Debug, PartialEq)]
pub enum State {
    Usable,
    /// Changes by itself (creating, modifying, backing up, ...).
    Busy,
    /// Does not change by itself: needs a person; the message says why.
    Stuck(String),
}

/// One managed database service: RDS or ElastiCache.
#[async_trait::async_trait]
pub trait Database: Snapshots + Sized {
    type Live: Live;
    /// The report's `provider`: "aws-rds".
    const PROVIDER: &'static str;
    /// For messages: "RDS instance".
    const WHAT: &'static str;
    /// The resource's AWS API name, for plan lines: "DBInstance".
    const API_NAME: &'static str;
    /// The rules its final snapshots' identifiers follow.
    const SNAPSHOT_RULES: IdentifierRules;

    /// This service's client and listing among the account's clients.
    fn of(c: &Clients) -> (&Self, &Listing<Self::Live>);
    /// One resource with its tags.
    async fn describe(&self, id: &str) -> Result<Option<Self::Live>, ProviderError>;
    /// Every resource of the account and region with its tags, by
    /// identifier: a few paginated calls, whatever their number.
    async fn list(&self, c: &Clients) -> Result<BTreeMap<String, Self::Live>, ProviderError>;
    fn state(status: &str) -> State;
}

/// The resource under `req.identifier`, if it exists. A recheck reads it
/// from the service's listing (one call for a hundred resources); anything
/// else, and anything the listing lacks, is read on its own.
pub async fn observe<D: Database>(
    c: &Clients,
    req: &ResourceRequest,
) -> Result<Option<D::Live>, ProviderError> {
    let (svc, listing) = D::of(c);
    let id = req.identifier.as_str();
    if let Some(max_age) = req.options.observed_within
        && let Some(live) = listing.get(id, max_age, || svc.list(c)).await?
    {
        return Ok(Some(live));
    }
    svc.describe(id).await
}

/// What to do about the resource.
#[derive(Debug, PartialEq)]
pub enum Plan {
    Create,
    /// Not usable yet.
    Wait(String),
    /// Needs a person.
    Fail(String),
    /// Someone else's resource: changed only once a person approves.
    Unadopted(Adoption),
    /// Usable: add these tags, request these changes; the rest is pending.
    Converge {
        tags: Vec<(String, String)>,
        changes: Split,
    },
}

/// The plan for the resource (`None`: not found) given its differences
/// from the tier (pure). A recorded resource that is gone is reported,
/// never created again empty.
pub fn decide<D: Database>(
    have: Option<&D::Live>,
    differences: impl Fn(&D::Live) -> Vec<Change>,
    req: &ResourceRequest,
) -> Plan {
    let Some(have) = have else {
        return match req.recorded_identifier.as_deref() {
            Some(id) => Plan::Fail(vanished(D::WHAT, id, "restore it from a snapshot")),
            None => Plan::Create,
        };
    };
    if let Some(adoption) = plan::adoption(req, have.tags(), &differences(have)) {
        return Plan::Unadopted(adoption);
    }
    match D::state(have.status()) {
        State::Usable => Plan::Converge {
            tags: crate::tags::missing(&req.tags, have.tags()),
            changes: split(differences(have), &Gate::of(&req.options)),
        },
        State::Busy => Plan::Wait(format!("{} is {}", D::WHAT, have.status())),
        State::Stuck(why) => Plan::Fail(why),
    }
}

/// Every change a reconcile would make (for `plan`), from read-only calls.
pub async fn planned<D: Database>(
    c: &Clients,
    req: &ResourceRequest,
    differences: impl Fn(&D::Live) -> Vec<Change>,
) -> Result<Vec<Change>, ProviderError> {
    let have = observe::<D>(c, req).await?;
    Ok(plan::planned(
        D::API_NAME,
        req,
        have.as_ref().map(|h| (h.tags(), differences(h))),
    ))
}

/// The service's own calls for [`act`]: `create` runs only when the plan
/// creates, `modify` with the changes to request now.
pub struct Calls<C, M> {
    pub create: C,
    pub modify: M,
}

/// Runs `plan` against `have` and says what the CR reports; `ready` gives
/// the Secret's contents once the resource is usable.
pub async fn act<D, C, M, MF>(
    c: &Clients,
    req: &ResourceRequest,
    have: Option<D::Live>,
    plan: Plan,
    calls: Calls<C, M>,
    ready: impl FnOnce(&D::Live) -> ConnectionDetails,
) -> Result<Provisioned, ProviderError>
where
    D: Database,
    C: Future<Output = Result<(), ProviderError>>,
    M: FnOnce(Split) -> MF,
    MF: Future<Output = Result<(), ProviderError>>,
{
    let (svc, listing) = D::of(c);
    let id = req.identifier.as_str();
    let mut report = Provisioned::new(D::PROVIDER, Outcome::InProgress(String::new()));
    report.identifier = Some(id.to_string());
    report.recheck_after = Some(RECHECK);
    report.outcome = match plan {
        Plan::Create => {
            calls.create.await?;
            Outcome::InProgress(format!("creating {} {id}", D::WHAT))
        }
        Plan::Wait(why) => Outcome::InProgress(format!("{why} ({id})")),
        Plan::Fail(why) => Outcome::Failed(format!("{why} ({id})")),
        Plan::Unadopted(adoption) => {
            // Not recorded on the CR: recording would make it this CR's.
            report.identifier = None;
            report.adoption = Some(adoption);
            Outcome::Failed(plan::unadopted_message(D::WHAT, id))
        }
        Plan::Converge { tags, changes } => {
            let have = have.unwrap_or_default();
            if !tags.is_empty() {
                svc.add_tags(have.arn(), &tags).await?;
                listing.forget(id).await;
            }
            report.maintenance_window_used = changes.window_used;
            let to_request = !changes.apply.is_empty();
            let settled = settle(changes.clone());
            if to_request {
                (calls.modify)(changes).await?;
                listing.forget(id).await;
            }
            match settled {
                Settled::Modifying(what) => {
                    Outcome::InProgress(format!("modifying {} {id}: {what}", D::WHAT))
                }
                Settled::Usable(pending) => {
                    report.pending = pending;
                    Outcome::Ready(ready(&have))
                }
            }
        }
    };
    Ok(report)
}

/// The final snapshot's identifier for this deletion.
pub fn final_snapshot_id<D: Database>(req: &ResourceRequest) -> String {
    snapshots::final_id(req, D::SNAPSHOT_RULES)
}

/// Where a deletion starts.
pub enum Begun<L> {
    /// Nothing to delete (its final snapshot, if any, is tagged).
    Gone,
    /// Someone else's: deleting the CR never deletes it.
    NotOurs,
    /// Deleting already; the message says so.
    Deleting(String),
    /// Ours and there: the service deletes it.
    Present(L),
}

/// A deletion's first step, the same for every service.
pub async fn begin_delete<D: Database>(
    c: &Clients,
    req: &ResourceRequest,
    skip_final: bool,
) -> Result<Begun<D::Live>, ProviderError> {
    let (svc, _) = D::of(c);
    let id = req.identifier.as_str();
    let Some(live) = svc.describe(id).await? else {
        if !skip_final {
            snapshots::tag_final(svc, &final_snapshot_id::<D>(req), &req.tags).await?;
        }
        return Ok(Begun::Gone);
    };
    Ok(if !plan::ours(req, live.tags()) {
        Begun::NotOurs
    } else if live.status() == "deleting" {
        Begun::Deleting(format!("{} {id} is deleting", D::WHAT))
    } else {
        Begun::Present(live)
    })
}
