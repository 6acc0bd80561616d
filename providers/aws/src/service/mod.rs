//! One trait for every AWS service a resource kind is provisioned as, in
//! the shape of ACK's resource managers: the tier's sections parsed and
//! checked once ([`Service::sections`]); a reconcile is
//! [`Service::observe`] → [`Service::decide`] (pure) → [`Service::act`];
//! `plan` is observe → decide → [`Service::shown`]; a delete is
//! [`Service::remove`]. [`Kind`] is the same with its types erased, written
//! once for every service, so `lib.rs` keeps one table from resource kind
//! to service.

use std::collections::BTreeMap;

use cro_provider_api::{
    Change, Condition, ConditionType, Deletion, IdentifierRules, ProviderError, Provisioned,
    ResourceRequest,
};

use crate::{At, AwsProvider, clients::Clients, snapshots::SnapshotsOf, strategy::Tier};

mod databases;
pub mod identity;

pub use databases::DatabaseService;

/// A tier's createStrategy and deleteStrategy as one service reads them.
pub struct Sections<C, D> {
    pub create: C,
    pub delete: D,
    /// Fields of the sections this service does not read: ignored, as the
    /// Go operator ignored them, and reported (see [`ignored_condition`]).
    pub ignored: Vec<String>,
}

pub type Tags = BTreeMap<String, String>;

/// One AWS service a resource kind is provisioned as.
#[async_trait::async_trait]
pub trait Service: Send + Sync {
    type Create: Send + Sync;
    type Delete: Send + Sync;
    /// The resource as observed, absent included.
    type Live: Send + Sync;
    /// What a reconcile does about it.
    type Plan: Send + Sync;
    /// The rules its identifiers follow.
    const RULES: IdentifierRules;

    /// The tier's sections, every key, field name and type checked; no call.
    fn sections(&self, tier: &Tier) -> Result<Sections<Self::Create, Self::Delete>, ProviderError>;
    /// The identifier the tier pins, as the Go operator used it.
    fn pinned(&self, s: &Sections<Self::Create, Self::Delete>, deleting: bool) -> Option<String>;
    /// The tags of the resource under `id`, if it exists.
    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError>;
    /// One line on the resource under `id`, for the `status` command.
    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError>;

    async fn observe(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        s: &Sections<Self::Create, Self::Delete>,
    ) -> Result<Self::Live, ProviderError>;
    /// Pure: the same inputs give the same plan.
    fn decide(
        &self,
        req: &ResourceRequest,
        s: &Sections<Self::Create, Self::Delete>,
        live: &Self::Live,
    ) -> Self::Plan;
    /// Every change `plan` would make, for the `plan` command; read-only.
    async fn shown(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        observed: (&Self::Live, &Self::Plan),
    ) -> Result<Vec<Change>, ProviderError>;
    /// Carries out `plan` and says what the CR reports.
    async fn act(
        &self,
        at: &At<'_>,
        (req, tier): (&ResourceRequest, &Tier),
        s: &Sections<Self::Create, Self::Delete>,
        observed: (Self::Live, Self::Plan),
    ) -> Result<Provisioned, ProviderError>;
    async fn remove(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        s: &Sections<Self::Create, Self::Delete>,
    ) -> Result<Deletion, ProviderError>;

    /// Its snapshots: their calls, what they are called in messages and
    /// the rules of their identifiers; `None`: it has none.
    fn snapshots(&self) -> Option<SnapshotsOf> {
        None
    }
}

/// The request with the identifier it may act on, its resource as
/// observed, and what to do about it.
async fn observed_and_decided<S: Service>(
    svc: &S,
    at: &At<'_>,
    req: &ResourceRequest,
    s: &Sections<S::Create, S::Delete>,
) -> Result<(ResourceRequest, S::Live, S::Plan), ProviderError> {
    let pinned = Service::pinned(svc, s, false);
    let req = identity::resolved(svc, at.c, req, pinned, false).await?;
    let live = svc.observe(at, &req, s).await?;
    let plan = svc.decide(&req, s, &live);
    Ok((req, live, plan))
}

/// A [`Service`] with its types erased: what the provider calls.
#[async_trait::async_trait]
pub trait Kind: Send + Sync {
    fn rules(&self) -> IdentifierRules;
    fn validate(&self, tier: &Tier) -> Result<(), ProviderError>;
    /// The identifier the tier pins, conformed to [`Kind::rules`].
    fn pinned(&self, tier: &Tier, deleting: bool) -> Result<Option<String>, ProviderError>;
    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError>;
    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError>;
    async fn reconcile(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Provisioned, ProviderError>;
    async fn plan(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Vec<Change>, ProviderError>;
    async fn delete(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Deletion, ProviderError>;
    fn snapshots(&self) -> Option<SnapshotsOf>;
}

#[async_trait::async_trait]
impl<S: Service> Kind for S {
    fn rules(&self) -> IdentifierRules {
        S::RULES
    }

    /// Offline (`validate`): what a reconcile would ignore is a finding.
    fn validate(&self, tier: &Tier) -> Result<(), ProviderError> {
        let s = self.sections(tier)?;
        match ignored_fields(tier, &s) {
            None => Ok(()),
            Some(fields) => Err(ProviderError::invalid_strategy(format!(
                "this operator does not read {fields}: a reconcile ignores them, as the Go operator's decoding did, and reports them in the TierUnderstood condition; remove them or correct the name"
            ))),
        }
    }

    fn pinned(&self, tier: &Tier, deleting: bool) -> Result<Option<String>, ProviderError> {
        let pinned = Service::pinned(self, &self.sections(tier)?, deleting);
        Ok(pinned.map(|p| S::RULES.conform(&p)))
    }

    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError> {
        Service::tags_of(self, c, id).await
    }

    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError> {
        Service::cloud_state(self, c, id).await
    }

    async fn reconcile(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Provisioned, ProviderError> {
        // Checked before any call, an STS one included.
        let s = self.sections(tier)?;
        let a = p.in_account(tier).await?;
        let at = &p.at(&a);
        let (req, live, plan) = observed_and_decided(self, at, req, &s).await?;
        let mut provisioned = self.act(at, (&req, tier), &s, (live, plan)).await?;
        provisioned.conditions.extend(at.c.refused.condition());
        provisioned.conditions.extend(ignored_condition(tier, &s));
        Ok(provisioned)
    }

    async fn plan(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Vec<Change>, ProviderError> {
        let s = self.sections(tier)?;
        let a = p.in_account(tier).await?;
        let at = &p.at(&a);
        let (req, live, plan) = observed_and_decided(self, at, req, &s).await?;
        self.shown(at, &req, (&live, &plan)).await
    }

    async fn delete(
        &self,
        p: &AwsProvider,
        req: &ResourceRequest,
        tier: &Tier,
    ) -> Result<Deletion, ProviderError> {
        let s = self.sections(tier)?;
        let a = p.in_account(tier).await?;
        let at = &p.at(&a);
        let pinned = Service::pinned(self, &s, true);
        let req = &identity::resolved(self, at.c, req, pinned, true).await?;
        self.remove(at, req, &s).await
    }

    fn snapshots(&self) -> Option<SnapshotsOf> {
        Service::snapshots(self)
    }
}

/// The keys and fields of a tier no service reads, listed; `None` when
/// every one is read.
fn ignored_fields<C, D>(tier: &Tier, s: &Sections<C, D>) -> Option<String> {
    let all: Vec<&str> = (tier.ignored.iter().chain(&s.ignored))
        .map(String::as_str)
        .collect();
    (!all.is_empty()).then(|| all.join(", "))
}

/// A tier with keys or fields this operator does not read (`Tags`,
/// `Engine`, a misspelt one): the CR proceeds without them, as under the
/// Go operator, and says which, so a typo does not go unseen.
pub fn ignored_condition<C, D>(tier: &Tier, s: &Sections<C, D>) -> Option<Condition> {
    ignored_fields(tier, s).map(|fields| Condition {
        type_: ConditionType::TierUnderstood,
        status: false,
        reason: "IgnoredFields".into(),
        message: format!(
            "the tier sets what this operator does not read, so it is ignored (as the Go operator ignored it): {fields}; remove it from the tier, or correct the name"
        ),
    })
}
