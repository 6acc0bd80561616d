//! What Postgres on RDS and Redis on ElastiCache share, written once over
//! one small trait per service, [`Database`] (which `service/databases.rs`
//! makes the provider's `Service`):
//! - observe: [`observe`], batched through the service's [`Listing`] for
//!   rechecks, one describe otherwise;
//! - decide: [`decide`], pure: vanished, someone else's, the service's
//!   state, then tags and the tier's differences;
//! - act: [`act`] runs the plan: the service's own create and modify
//!   calls, tags, and what the CR reports; [`delete`] runs every
//!   deletion around the service's own calls;
//! - plan: [`shown`] (pure) shows what [`decide`] says a reconcile would
//!   do.

use std::{collections::BTreeMap, future::Future};

use cro_provider_api::{
    Adoption, Change, ConnectionDetails, Deletion, IdentifierRules, Outcome, ProviderError,
    Provisioned, ResourceRequest,
};

use crate::{
    At, InAccount, RECHECK,
    clients::Clients,
    credentials::CredentialsStore,
    errors::{Created, not_yet_visible, taken},
    listing::Listing,
    plan::{self, Difference, Gate, Settled, Split, settle, split, vanished},
    snapshots::{self, Snapshots},
    strategy::{Tier, TypedSection},
};

/// The live resource, as far as the shared steps need it.
pub trait Live: Clone + Default + Send + Sync + 'static {
    fn arn(&self) -> &str;
    fn status(&self) -> &str;
    fn tags(&self) -> &BTreeMap<String, String>;
}

/// The resource as the Go operator's info and availability gauges show
/// it: its status, and whether that status is one of `healthy`.
pub fn health<L: Live>(have: Option<&L>, healthy: &[&str]) -> cro_provider_api::Health {
    cro_provider_api::Health {
        status: have.map(|h| h.status().to_string()).unwrap_or_default(),
        available: have.is_some_and(|h| healthy.contains(&h.status())),
        allocated_storage_bytes: None,
        max_memory_bytes: None,
        maintenance: None,
        snapshots_not_found: None,
    }
}

/// What a state of the service's resource means.
#[derive(Debug, PartialEq)]
pub enum State {
    Usable,
    /// Changes by itself (creating, modifying, backing up, ...).
    Busy,
    /// Does not change by itself: needs a person; the message says why.
    Stuck(String),
    /// Impaired, and recovers once its cause is fixed (storage grown, the
    /// parameter group or KMS key repaired): looked at again at the busy
    /// pace, as the Go operator did, rather than failed for good.
    Impaired(String),
}

/// What tells one database service from another in the shared steps.
pub struct ServiceInfo {
    /// The report's `provider`: "aws-rds".
    pub provider: &'static str,
    /// The rules its resources' identifiers follow.
    pub rules: IdentifierRules,
    /// For messages: "RDS instance".
    pub what: &'static str,
    /// The resource's AWS API name, for plan lines: "DBInstance".
    pub api_name: &'static str,
    /// The rules its final snapshots' identifiers follow.
    pub snapshot_rules: IdentifierRules,
    /// The credentials Secret it keeps for a CR, by the CR's name; it goes
    /// once the resource is gone.
    pub credentials_secret: Option<fn(&str) -> String>,
}

/// What the shared steps read of a service's createStrategy: the
/// identifier it pins, which the Go operator used as given
/// (buildRDSCreateStrategy, buildElasticacheCreateStrategy).
pub trait CreateSection: TypedSection + Send + Sync {
    fn identifier(&self) -> Option<&str>;
}

/// What the shared deletion reads of a service's deleteStrategy (the Go
/// operator's buildRDSDeleteConfig and its ElastiCache twin).
pub trait DeleteSection: TypedSection + Send + Sync {
    fn identifier(&self) -> Option<&str>;
    fn final_snapshot(&self) -> Option<&str>;
    fn skip_final_snapshot(&self) -> bool;
}

/// The plumbing RDS and ElastiCache share word for word: `Live` for their
/// live resource type (fields `arn`, `status`, `tags`), and the sections
/// for their tier's createStrategy and deleteStrategy types (fields
/// `identifier`, `final_snapshot`, `skip_final_snapshot`).
macro_rules! live_and_sections {
    ($live:ty, $create:ty, $delete:ty) => {
        impl $crate::database::Live for $live {
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

        impl $crate::database::CreateSection for $create {
            fn identifier(&self) -> Option<&str> {
                self.identifier.as_deref()
            }
        }

        impl $crate::database::DeleteSection for $delete {
            fn identifier(&self) -> Option<&str> {
                self.identifier.as_deref()
            }
            fn final_snapshot(&self) -> Option<&str> {
                self.final_snapshot.as_deref()
            }
            fn skip_final_snapshot(&self) -> bool {
                self.skip_final_snapshot.unwrap_or(false)
            }
        }
    };
}
pub(crate) use live_and_sections;

/// One managed database service: RDS or ElastiCache.
#[async_trait::async_trait]
pub trait Database: Snapshots + Sized {
    type Live: Live;
    /// What the tier asks for of a running resource.
    type Desired: Send + Sync;
    /// The tier's sections for this service's create and delete calls.
    type Create: CreateSection;
    type Delete: DeleteSection;
    /// The fields it compares with the tier and modifies.
    type Field: plan::Field + Send + Sync;
    const SERVICE: ServiceInfo;

    /// This service's client among the account's clients.
    fn client(c: &Clients) -> &Self;
    /// Its resources as the account's last listing holds them.
    fn listing(a: &InAccount) -> &Listing<Self::Live>;
    /// A reconcile's act: what the service does around [`act`] (its
    /// credentials, network, health and maintenance), and what the CR
    /// reports.
    async fn act(
        at: &At<'_>,
        req: (&ResourceRequest, &Tier),
        create: &Self::Create,
        observed: (Option<Self::Live>, Plan<Self::Field>),
    ) -> Result<Provisioned, ProviderError>;
    /// What the tier's createStrategy (and the request) ask for, with the
    /// Go operator's defaults where it sets nothing (pure).
    fn desired(req: &ResourceRequest, create: &Self::Create) -> Self::Desired;
    /// Every field of the resource that differs from `want` (pure).
    fn differences(have: &Self::Live, want: &Self::Desired) -> Vec<Difference<Self::Field>>;
    fn state(status: &str) -> State;
    /// One resource with its tags (read through `c`'s refusals, see
    /// [`crate::tags::or_refused`]).
    async fn describe(&self, c: &Clients, id: &str) -> Result<Option<Self::Live>, ProviderError>;
    /// Every resource of the account and region with its tags, by
    /// identifier: a few paginated calls, whatever their number.
    async fn list(&self, c: &Clients) -> Result<BTreeMap<String, Self::Live>, ProviderError>;
    /// Requests `changes.apply` of `want` in one call.
    async fn modify(
        &self,
        id: &str,
        want: &Self::Desired,
        changes: Split<Self::Field>,
    ) -> Result<(), ProviderError>;
    async fn remove(
        &self,
        r: Removal<'_, Self::Live, Self::Delete>,
    ) -> Result<Deletion, ProviderError>;
}

/// A deletion the service carries out: its resource, ours and not deleting
/// yet, and how the tier deletes it.
pub struct Removal<'a, L, S> {
    pub id: &'a str,
    pub live: L,
    /// The tier's deleteStrategy.
    pub strategy: &'a S,
    /// The final snapshot to leave; `None`: the tier skips it.
    pub final_snapshot: Option<String>,
}

/// The resource under `req.identifier`, if it exists. A recheck reads it
/// from the service's listing (one call for a hundred resources); anything
/// else, anything the listing lacks, and anything it shows untagged (a
/// group the Go operator tagged through its nodes reads its tags from
/// them) is read on its own.
pub async fn observe<D: Database>(
    (c, listing): (&Clients, &Listing<D::Live>),
    req: &ResourceRequest,
) -> Result<Option<D::Live>, ProviderError> {
    let svc = D::client(c);
    let id = req.identifier.as_str();
    if let Some(max_age) = req.options.observed_within
        && let Some(live) = listing.get(id, max_age, || svc.list(c)).await?
        && !live.tags().is_empty()
    {
        return Ok(Some(live));
    }
    let described = svc.describe(c, id).await;
    listing.described(id);
    described
}

/// The resource's state as the service shows it, for the `status`
/// command: one describe call.
pub async fn state<D: Database>(c: &Clients, id: &str) -> Result<String, ProviderError> {
    let what = D::SERVICE.what;
    Ok(match D::client(c).describe(c, id).await? {
        Some(live) => format!("{what} {id} is {} in {}", live.status(), c.region),
        None => format!("{what} {id} does not exist in {}", c.region),
    })
}

/// What differs on a resource that is there: the tags it lacks and the
/// tier's differences, split by when they are requested.
#[derive(Debug, PartialEq)]
pub struct Drift<F> {
    pub tags: Vec<(String, String)>,
    pub changes: Split<F>,
}

/// What to do about the resource.
#[derive(Debug, PartialEq)]
pub enum Plan<F> {
    Create,
    /// Not usable yet: nothing is requested; what differs waits.
    Wait(String, Drift<F>),
    /// Needs a person.
    Fail(String),
    /// Someone else's resource: changed only once a person approves.
    Unadopted(Adoption),
    /// Usable: add the tags, request the changes; the rest is pending.
    Converge(Drift<F>),
}

/// The plan for the resource (`None`: not found) under the tier's `want`
/// (pure). A recorded resource that is gone is reported, never created
/// again empty.
pub fn decide<D: Database>(
    have: Option<&D::Live>,
    want: &D::Desired,
    req: &ResourceRequest,
) -> Plan<D::Field> {
    let what = D::SERVICE.what;
    let Some(have) = have else {
        return match req.recorded_identifier.as_deref() {
            Some(id) => Plan::Fail(vanished(what, id, "restore it from a snapshot")),
            None => Plan::Create,
        };
    };
    if let Some(owner) = plan::another_crs(req, have.tags()) {
        return Plan::Fail(plan::another_crs_message(what, &req.identifier, &owner));
    }
    let differences = D::differences(have, want);
    if let Some(adoption) = plan::adoption(req, have.tags(), &plan::changes(&differences)) {
        return Plan::Unadopted(adoption);
    }
    let drift = || Drift {
        tags: crate::tags::missing(&req.tags, have.tags()),
        changes: split(differences, &Gate::of(req)),
    };
    match D::state(have.status()) {
        State::Usable => Plan::Converge(drift()),
        State::Busy => Plan::Wait(format!("{what} is {}", have.status()), drift()),
        State::Stuck(why) => Plan::Fail(why),
        State::Impaired(why) => Plan::Wait(why, drift()),
    }
}

/// What `plan` shows for `plan` (pure): each change a reconcile makes
/// now or later, and what it will not do without a person.
pub fn shown<D: Database>(
    plan: &Plan<D::Field>,
    have: Option<&D::Live>,
    req: &ResourceRequest,
) -> Vec<Change> {
    let (what, field) = (D::SERVICE.what, D::SERVICE.api_name);
    let (Some(have), plan) = (have, plan) else {
        return vec![plan::missing_resource(
            field,
            req.recorded_identifier.as_deref(),
        )];
    };
    match plan {
        Plan::Create => vec![plan::missing_resource(field, None)],
        Plan::Fail(why) => vec![plan::reported(field, have.status(), why)],
        Plan::Unadopted(adoption) => plan::awaiting_adoption(what, &req.identifier, adoption),
        Plan::Wait(_, drift) | Plan::Converge(drift) => {
            let tags = drift.tags.iter();
            (tags.map(|(k, v)| plan::tag_change(k, v, have.tags())))
                .chain(plan::changes(&drift.changes.apply))
                .chain(drift.changes.pending.iter().cloned())
                .collect()
        }
    }
}

/// Runs `plan` against `have` and says what the CR reports: `create` (the
/// service's own call) runs only when the plan creates, and `ready` gives
/// the Secret's contents once the resource is usable.
pub async fn act<D: Database>(
    (c, listing): (&Clients, &Listing<D::Live>),
    req: &ResourceRequest,
    (have, plan): (Option<D::Live>, Plan<D::Field>),
    want: &D::Desired,
    create: impl Future<Output = Result<Created, ProviderError>>,
    ready: impl FnOnce(&D::Live) -> ConnectionDetails,
) -> Result<Provisioned, ProviderError> {
    let svc = D::client(c);
    let (id, what) = (req.identifier.as_str(), D::SERVICE.what);
    let mut report = Provisioned::new(D::SERVICE.provider, Outcome::InProgress(String::new()));
    report.identifier = Some(id.to_string());
    report.recheck_after = Some(RECHECK);
    report.outcome = match plan {
        Plan::Create => {
            if listing.writing(id, create).await? == Created::Already {
                made_for_it::<D>(c, req).await?;
            }
            Outcome::InProgress(format!("creating {what} {id}"))
        }
        Plan::Wait(why, _) => Outcome::InProgress(format!("{why} ({id})")),
        Plan::Fail(why) => Outcome::Failed(format!("{why} ({id})")),
        Plan::Unadopted(adoption) => {
            // Not recorded on the CR: recording would make it this CR's.
            report.identifier = None;
            report.adoption = Some(adoption);
            Outcome::Failed(plan::unadopted_message(what, id))
        }
        Plan::Converge(Drift { tags, changes }) => {
            let have = have.unwrap_or_default();
            if !tags.is_empty() {
                listing.writing(id, svc.add_tags(have.arn(), &tags)).await?;
            }
            let to_request = !changes.apply.is_empty();
            let settled = settle(changes.clone());
            if to_request {
                listing.writing(id, svc.modify(id, want, changes)).await?;
            }
            // A pass over the usable resource used the window, whether or
            // not anything differed: the Go operator clears it after every
            // such pass (ReconcilePostgres, CreateRedis).
            report.maintenance_window_used = req.options.maintenance_window;
            match settled {
                Settled::Modifying(changes) => {
                    Outcome::InProgress(format!("modifying {what} {id}: {changes}"))
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

/// After a create met a resource of its name (a retry whose first
/// attempt's answer was lost, or a race with someone else): whether a
/// fresh look finds it made for this CR; an error says what else.
async fn made_for_it<D: Database>(c: &Clients, req: &ResourceRequest) -> Result<(), ProviderError> {
    let (id, what) = (req.identifier.as_str(), D::SERVICE.what);
    match D::client(c).describe(c, id).await? {
        Some(live) if crate::tags::made_for(&req.tag_keys, &req.creation_tags(), live.tags()) => {
            Ok(())
        }
        // Untagged, or its tags may not be read: this CR's by the
        // identifier it recorded and computes (see `plan::ours`).
        Some(live) if live.tags().is_empty() && plan::ours(req, live.tags()) => Ok(()),
        Some(_) => Err(taken(what, id)),
        None => Err(not_yet_visible(what, id)),
    }
}

/// What deleting the resource (`L`, as last seen) takes.
#[derive(Debug, PartialEq)]
pub enum Removing<L> {
    /// Nothing is left: the final snapshot (if one is taken) gets the
    /// CR's tags, and the credentials Secret goes.
    Finish { tag_final: Option<String> },
    /// Someone else's resource: left as it is.
    Leave,
    /// Deleting already.
    Wait(String),
    /// This CR's: the service deletes it, taking the final snapshot.
    Remove {
        live: L,
        final_snapshot: Option<String>,
    },
}

/// The deletion rules (pure): a resource that is gone finishes, one that
/// is not this CR's stays, one deleting is waited for, and only then is
/// the service asked to delete.
pub fn decide_delete<D: Database>(
    live: Option<D::Live>,
    req: &ResourceRequest,
    final_snapshot: Option<String>,
) -> Removing<D::Live> {
    let Some(live) = live else {
        return Removing::Finish {
            tag_final: final_snapshot,
        };
    };
    if !plan::ours(req, live.tags()) {
        return Removing::Leave;
    }
    if live.status() == "deleting" {
        let (what, id) = (D::SERVICE.what, &req.identifier);
        return Removing::Wait(format!("{what} {id} is deleting"));
    }
    Removing::Remove {
        live,
        final_snapshot,
    }
}

/// Deletes the resource under `req.identifier` as [`decide_delete`] says,
/// with the tier's deleteStrategy: its final snapshot (unless skipped)
/// named by the tier or after the deletion's time.
pub async fn delete<D: Database>(
    store: &dyn CredentialsStore,
    c: &Clients,
    req: &ResourceRequest,
    strategy: &D::Delete,
) -> Result<Deletion, ProviderError> {
    let final_snapshot = match strategy.final_snapshot() {
        Some(named) => D::SERVICE.snapshot_rules.conform(named),
        None => snapshots::final_id(req, D::SERVICE.snapshot_rules),
    };
    let final_snapshot = (!strategy.skip_final_snapshot()).then_some(final_snapshot);
    let svc = D::client(c);
    let id = req.identifier.as_str();
    let live = svc.describe(c, id).await?;
    match decide_delete::<D>(live, req, final_snapshot) {
        Removing::Finish { tag_final } => {
            if let Some(snapshot) = tag_final {
                snapshots::tag_final(svc, &snapshot, &req.tags).await?;
            }
            if let Some(secret) = D::SERVICE.credentials_secret {
                store.delete(req, &secret(&req.name)).await?;
            }
            Ok(Deletion::Done)
        }
        Removing::Leave => Ok(Deletion::Done),
        Removing::Wait(why) => Ok(Deletion::InProgress(why)),
        Removing::Remove {
            live,
            final_snapshot,
        } => {
            let removal = Removal {
                id,
                live,
                strategy,
                final_snapshot,
            };
            svc.remove(removal).await
        }
    }
}

/// What `tier`, a createStrategy, asks for (for tests).
#[cfg(test)]
pub fn desired<D: Database>(req: &ResourceRequest, tier: serde_json::Value) -> D::Desired {
    let map = tier.as_object().cloned().unwrap_or_default();
    D::desired(
        req,
        &crate::strategy::parse_section(&map)
            .unwrap_or_else(|e| panic!("{e}"))
            .0,
    )
}
