//! One controller per kind, all on the shared reconcile skeleton. Each
//! watches its kind, and is triggered by the objects it owns (so a hand
//! edit is seen at once) and the configuration ConfigMaps (an edit
//! re-reconciles exactly the CRs whose configuration it holds), through
//! watches shared by all controllers (`cache`).

pub mod kinds;
pub mod release;
pub mod resource;
pub mod retained_snapshots;
pub mod rotation;
pub mod schedule;
pub mod snapshot;

use std::{fmt::Debug, sync::Arc, time::Duration};

use futures::{
    FutureExt, StreamExt,
    future::{BoxFuture, Shared},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Resource, ResourceExt,
    core::DeserializeGuard,
    runtime::{
        Controller, PredicateConfig, WatchStreamExt, controller,
        reflector::{self, ObjectRef},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tracing::{debug, warn};

use crate::{
    api::{BlobStorage, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet},
    config::{TYPES_CONFIG_MAP, provider_of_strategies_map},
    reconcile::{Context, Managed, Reconciler, error_policy, inputs, reconcile},
};
use cro_runtime::{cache, watch::watch};
use kinds::ResourceCr;
use resource::Resources;
use snapshot::Snapshots;

/// Resolves when the operator should stop: controllers then take no new
/// work and return once their running reconciles have finished.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// A `Shutdown` from any future.
pub fn shutdown_on(trigger: impl std::future::Future<Output = ()> + Send + 'static) -> Shutdown {
    trigger.boxed().shared()
}

/// Runs every controller, for each watched namespace (or once for all
/// namespaces), and the watches they share, until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: Shutdown) {
    // Controllers subscribe to the shared watches before these start.
    let controllers = futures::future::join_all(
        cache::scopes(&ctx.settings.watch_namespaces)
            .into_iter()
            .map(|ns| run_scope(ctx.clone(), Scope(ns), shutdown.clone())),
    );
    let watches = async { tokio::join!(ctx.config.run(), ctx.owned.run()) };
    // Reconciles start once the watches they read from have listed, so a
    // restart reads nothing one object at a time.
    let reconciling = async {
        tokio::join!(
            ctx.config.ready(WATCHES_READY_LIMIT),
            ctx.owned.ready(WATCHES_READY_LIMIT)
        );
        controllers.await
    };
    tokio::select! {
        _ = reconciling => {}
        _ = watches => {}
        _ = cloud_metrics(ctx.clone()) => {}
    }
}

/// Reads the cloud's monitoring data of every database (the CloudWatch
/// gauges) each interval, while this process leads.
async fn cloud_metrics(ctx: Arc<Context>) {
    let interval = ctx.settings.cloud_metrics_interval;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut samples = Vec::new();
        for provider in ctx.providers.values() {
            samples.extend(provider.cloud_metrics(interval).await);
        }
        ctx.metrics.cloud(&samples);
    }
}

/// How long reconciles wait for the shared watches' first lists.
const WATCHES_READY_LIMIT: Duration = Duration::from_secs(30);

/// The namespace a set of controllers watches; `None` is all namespaces.
#[derive(Clone)]
struct Scope(Option<String>);

impl Scope {
    fn api<K>(&self, ctx: &Context) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match &self.0 {
            Some(ns) => Api::namespaced(ctx.client.clone(), ns),
            None => Api::all(ctx.client.clone()),
        }
    }
}

/// A controller whose store holds the CRs without what reconciles never
/// read (see [`cache::strip_unread`]). Only a change of a CR's inputs
/// (see [`inputs`]) starts a reconcile: the watch's echoes of the
/// operator's own writes (its finalizer, its status) would find nothing to
/// do, while CRs still waiting for their first reconcile queue behind
/// them. Every CR passes once after a start; a relist (after 410 Gone, or
/// an API server that was away) passes the CRs that changed meanwhile.
fn controller_of<K>(scope: &Scope, ctx: &Arc<Context>) -> Controller<DeserializeGuard<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    // A reconcile that found the cache behind the operator's own write
    // runs again once the watch shows it (see `reconcile::stale`): the
    // predicate below lets no such echo through as a change.
    let (caught_up, wakes) = futures::channel::mpsc::unbounded();
    let watching = ctx.clone();
    let crs = watch(
        scope.api::<DeserializeGuard<K>>(ctx),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(cache::strip_unread)
    .reflect(writer)
    .applied_objects()
    .inspect(move |cr| {
        if let Ok(cr) = cr
            && watching.seen(cr)
        {
            // Closed only when the controller is gone.
            let _ = caught_up.unbounded_send(ObjectRef::from_obj(cr));
        }
    })
    .predicate_filter(inputs::inputs, PredicateConfig::default());
    let controller = Controller::for_stream(crs, reader).reconcile_on(wakes);
    match ctx.share_wakes() {
        Some(wakes) => controller.reconcile_on(share_wakes::<K>(wakes)),
        None => controller,
    }
}

/// The CRs of kind `K` a slot given back wakes (see `cro_runtime::share`).
fn share_wakes<K: Resource<DynamicType = ()> + 'static>(
    wakes: broadcast::Receiver<crate::reconcile::Woken>,
) -> impl futures::Stream<Item = ObjectRef<DeserializeGuard<K>>> + Send + 'static {
    futures::stream::unfold(wakes, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(woken) => return Some((woken, rx)),
                // A missed wake is made up by the CR's own retry.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter_map(|w| {
        let ours = w.kind == K::kind(&());
        futures::future::ready(ours.then(|| ObjectRef::new(&w.name).within(&w.namespace)))
    })
}

fn run_scope(ctx: Arc<Context>, scope: Scope, shutdown: Shutdown) -> impl Future<Output = ()> {
    let postgres_snapshots = controller_of::<PostgresSnapshot>(&scope, &ctx);
    let redis_snapshots = controller_of::<RedisSnapshot>(&scope, &ctx);
    let postgres = resource_controller::<Postgres>(&ctx, &scope);
    let redis = resource_controller::<Redis>(&ctx, &scope);
    let blobs = resource_controller::<BlobStorage>(&ctx, &scope);
    let smtp = resource_controller::<SMTPCredentialSet>(&ctx, &scope);
    async move {
        tokio::join!(
            drive(postgres, Resources, ctx.clone(), shutdown.clone()),
            drive(redis, Resources, ctx.clone(), shutdown.clone()),
            drive(blobs, Resources, ctx.clone(), shutdown.clone()),
            drive(smtp, Resources, ctx.clone(), shutdown.clone()),
            drive(postgres_snapshots, Snapshots, ctx.clone(), shutdown.clone()),
            drive(redis_snapshots, Snapshots, ctx.clone(), shutdown.clone()),
        );
    }
}

/// Adds `subscription` to `controller` with `add`; a watch that already
/// runs cannot be subscribed to (a bug), which is logged.
fn subscribed<K, S>(
    controller: Controller<K>,
    subscription: Option<S>,
    what: &str,
    add: impl FnOnce(Controller<K>, S) -> Controller<K>,
) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    match subscription {
        Some(s) => add(controller, s),
        None => {
            warn!(
                watch = what,
                "the shared watch runs already; changes to these objects do not trigger reconciles until a restart"
            );
            controller
        }
    }
}

/// A controller of `K`, triggered by the objects it owns (so a hand edit
/// is seen at once; every kind may run an in-cluster server), by the
/// configuration ConfigMaps and by its connection verdicts.
fn resource_controller<K: ResourceCr>(
    ctx: &Arc<Context>,
    scope: &Scope,
) -> Controller<DeserializeGuard<K>> {
    let controller = controller_of::<K>(scope, ctx);
    let by_types = controller.store();
    let by_operator_cm = controller.store();
    let ns = scope.0.as_deref();
    let owned = &ctx.owned;
    let mut c = controller;
    c = owning(c, &owned.secrets, ns, "Secrets");
    c = owning(c, &owned.deployments, ns, "Deployments");
    c = owning(c, &owned.services, ns, "Services");
    c = owning(c, &owned.claims, ns, "PVCs");
    c = owning(c, &owned.config_maps, ns, "ConfigMaps");
    c = owning(c, &owned.network_policies, ns, "NetworkPolicies");
    if ctx.config.reads_namespace_config() {
        c = subscribed(
            c,
            ctx.config.subscribe_types(ns),
            "cloud-resource-config",
            |c, s| c.watches_shared_stream(s, move |cm| crs_in_namespace(&by_types, &cm)),
        );
    }
    c = c.reconcile_on(connection_verdicts::<K>(ctx, scope));
    let by_go_cm = by_operator_cm.clone();
    c = subscribed(
        c,
        ctx.config.subscribe_operator(),
        "operator ConfigMaps",
        |c, s| c.watches_shared_stream(s, move |cm| crs_configured_by(&by_operator_cm, &cm)),
    );
    if !ctx.config.reads_go_namespace() {
        return c;
    }
    subscribed(
        c,
        ctx.config.subscribe_go_namespace(),
        "the Go operator's strategies ConfigMaps",
        |c, s| c.watches_shared_stream(s, move |cm| crs_configured_by(&by_go_cm, &cm)),
    )
}

/// The CRs of kind `K` in `scope` whose connection verdict changed.
fn connection_verdicts<K: ResourceCr>(
    ctx: &Context,
    scope: &Scope,
) -> impl futures::Stream<Item = ObjectRef<DeserializeGuard<K>>> + Send + 'static {
    let namespace = scope.0.clone();
    futures::stream::unfold(ctx.connectivity.subscribe(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(changed) => return Some((changed, rx)),
                // Missed wakes are picked up by the next recheck.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter_map(move |c| {
        let ours = c.kind == K::KIND && namespace.as_ref().is_none_or(|ns| *ns == c.namespace);
        futures::future::ready(ours.then(|| ObjectRef::new(&c.name).within(&c.namespace)))
    })
}

/// `controller`, reconciling a CR when an object of kind `O` it owns
/// changes (the shared watch of `scoped`, in `scope`).
fn owning<K: ResourceCr, O>(
    controller: Controller<DeserializeGuard<K>>,
    scoped: &cache::Scoped<O>,
    scope: Option<&str>,
    what: &str,
) -> Controller<DeserializeGuard<K>>
where
    O: cache::Cached + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    subscribed(controller, subscription(scoped, scope), what, |c, s| {
        c.owns_shared_stream(s)
    })
}

fn subscription<K>(scoped: &cache::Scoped<K>, scope: Option<&str>) -> Option<cache::Subscription<K>>
where
    K: cache::Cached + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    scoped.scope(scope)?.subscribe()
}

type Store<K> = kube::runtime::reflector::Store<DeserializeGuard<K>>;

/// A `cloud-resource-config` in a watched namespace concerns the CRs of
/// that namespace.
fn crs_in_namespace<K: ResourceCr>(
    store: &Store<K>,
    cm: &ConfigMap,
) -> Vec<ObjectRef<DeserializeGuard<K>>> {
    let ns = cm.namespace();
    store
        .state()
        .into_iter()
        .filter(|cr| cr.namespace() == ns)
        .map(|cr| ObjectRef::from_obj(cr.as_ref()))
        .collect()
}

/// In the operator namespace, `cloud-resource-config` is everyone's
/// fallback; `cloud-resources-<provider>-strategies` concerns the CRs on
/// that provider (and those whose provider is not settled yet).
fn crs_configured_by<K: ResourceCr>(
    store: &Store<K>,
    cm: &ConfigMap,
) -> Vec<ObjectRef<DeserializeGuard<K>>> {
    let name = cm.name_any();
    let provider = provider_of_strategies_map(&name);
    if provider.is_none() && name != TYPES_CONFIG_MAP {
        return Vec::new();
    }
    store
        .state()
        .into_iter()
        .filter(|cr| match (provider, &cr.0) {
            (Some(p), Ok(cr)) => cr
                .status()
                .and_then(|s| s.strategy.as_deref())
                .is_none_or(|s| s == p),
            _ => true,
        })
        .map(|cr| ObjectRef::from_obj(cr.as_ref()))
        .collect()
}

/// How long running reconciles may take to finish after shutdown before
/// they are dropped (below the Deployment's 60 s grace period).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// How long shutdown waits for a controller's first list. kube's
/// controller holds its runner until the store is ready, so a graceful
/// shutdown requested before that would otherwise never finish.
const STORE_READY_LIMIT: Duration = Duration::from_secs(10);

/// Runs `controller`, handing each CR it brings to the skeleton with
/// `work`, until `shutdown`.
async fn drive<K>(
    controller: Controller<DeserializeGuard<K>>,
    work: impl Reconciler<K>,
    ctx: Arc<Context>,
    shutdown: Shutdown,
) where
    K: Managed + Resource<DynamicType = ()> + Debug,
{
    let work = Arc::new(work);
    let config = controller::Config::default().concurrency(ctx.settings.concurrency);
    let store = controller.store();
    let graceful = shutdown.clone().then(move |()| async move {
        let _ = tokio::time::timeout(STORE_READY_LIMIT, store.wait_until_ready()).await;
    });
    let running = controller
        .with_config(config)
        .graceful_shutdown_on(graceful)
        .run(
            move |cr, ctx| reconcile(cr, ctx, work.clone()),
            error_policy::<K>,
            ctx,
        )
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
                // A wake-up of a CR gone by its turn (an owned object's
                // deletion, after the finalizer's removal): no error.
                Err(controller::Error::ObjectNotFound(obj)) => {
                    debug!(object = %obj, "gone before its reconcile");
                }
                Err(e) => warn!(error = %e, "reconcile error"),
            }
        });
    let limit = DRAIN_LIMIT + STORE_READY_LIMIT;
    let deadline = shutdown.then(move |()| tokio::time::sleep(limit));
    tokio::select! {
        () = running => {}
        () = deadline => warn!(
            kind = %K::kind(&()),
            "reconciles still running {limit:?} after shutdown; stopping them (each resumes from the cluster state on the next start)"
        ),
    }
}
