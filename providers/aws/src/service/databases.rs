//! RDS and ElastiCache as a [`Service`]: the shared steps of
//! [`crate::database`] around each service's own calls and its
//! [`Database::act`]; once a database is gone, the cluster's database
//! network goes with its last one.

use std::marker::PhantomData;

use cro_provider_api::{
    Change, Deletion, IdentifierRules, ProviderError, Provisioned, ResourceRequest,
};

use super::{Sections, Service, Tags};
use crate::{
    At,
    clients::Clients,
    database::{self, CreateSection, Database, DeleteSection, Live, Plan},
    network,
    snapshots::SnapshotsOf,
    strategy::{Tier, parse_section},
};

/// RDS (`D`: its SDK client) or ElastiCache as a [`Service`].
pub struct DatabaseService<D>(PhantomData<D>);

impl<D> DatabaseService<D> {
    pub const NEW: Self = DatabaseService(PhantomData);
}

#[async_trait::async_trait]
impl<D: Database + 'static> Service for DatabaseService<D> {
    type Create = D::Create;
    type Delete = D::Delete;
    type Live = Option<D::Live>;
    type Plan = Plan<D::Field>;
    const RULES: IdentifierRules = D::SERVICE.rules;

    fn sections(&self, tier: &Tier) -> Result<Sections<D::Create, D::Delete>, ProviderError> {
        let (create, mut ignored) = parse_section(&tier.create)?;
        let (delete, more) = parse_section(&tier.delete)?;
        ignored.extend(more);
        Ok(Sections {
            create,
            delete,
            ignored,
        })
    }

    /// The deleteStrategy's when deleting, else the createStrategy's (the
    /// Go operator's order, buildRDSDeleteConfig). A platform that pinned
    /// one in a tier keeps finding its resource under it.
    fn pinned(&self, s: &Sections<D::Create, D::Delete>, deleting: bool) -> Option<String> {
        let create = s.create.identifier();
        let delete = s.delete.identifier().filter(|_| deleting);
        delete.or(create).map(str::to_string)
    }

    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError> {
        Ok(D::client(c)
            .describe(c, id)
            .await?
            .map(|l| l.tags().clone()))
    }

    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError> {
        database::state::<D>(c, id).await
    }

    async fn observe(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        _: &Sections<D::Create, D::Delete>,
    ) -> Result<Option<D::Live>, ProviderError> {
        database::observe::<D>((at.c, D::listing(at.account)), req).await
    }

    fn decide(
        &self,
        req: &ResourceRequest,
        s: &Sections<D::Create, D::Delete>,
        live: &Option<D::Live>,
    ) -> Plan<D::Field> {
        database::decide::<D>(live.as_ref(), &D::desired(req, &s.create), req)
    }

    async fn shown(
        &self,
        _: &At<'_>,
        req: &ResourceRequest,
        (live, plan): (&Option<D::Live>, &Plan<D::Field>),
    ) -> Result<Vec<Change>, ProviderError> {
        Ok(database::shown::<D>(plan, live.as_ref(), req))
    }

    async fn act(
        &self,
        at: &At<'_>,
        req: (&ResourceRequest, &Tier),
        s: &Sections<D::Create, D::Delete>,
        observed: (Option<D::Live>, Plan<D::Field>),
    ) -> Result<Provisioned, ProviderError> {
        D::act(at, req, &s.create, observed).await
    }

    /// Once the resource is gone, its CloudWatch reads stop and the
    /// network the operator made for it goes when nothing else uses it.
    async fn remove(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        s: &Sections<D::Create, D::Delete>,
    ) -> Result<Deletion, ProviderError> {
        let deleted = database::delete::<D>(at.store, at.c, req, &s.delete).await?;
        if deleted == Deletion::Done {
            at.c.watched.forget(&req.identifier);
            network::released(at.c, req, at.vpc).await?;
        }
        Ok(deleted)
    }

    fn snapshots(&self) -> Option<SnapshotsOf> {
        Some(SnapshotsOf {
            calls: |c| D::client(c),
            what: D::SERVICE.what,
            rules: D::SERVICE.snapshot_rules,
        })
    }
}
