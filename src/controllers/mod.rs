//! One controller per kind, all on the shared reconcile skeleton. Each
//! watches its kind, the objects it owns (so a hand edit is seen at once),
//! and the configuration ConfigMaps (an edit re-reconciles exactly the CRs
//! whose configuration it holds).

pub mod resource;
pub mod snapshot;

use std::{fmt::Debug, sync::Arc, time::Duration};

use futures::{
    FutureExt, StreamExt,
    future::{BoxFuture, Shared},
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
};
use kube::{
    Api, Resource, ResourceExt,
    core::DeserializeGuard,
    runtime::{Controller, controller, reflector::ObjectRef, watcher},
};
use tracing::{debug, warn};

use crate::{
    api::{BlobStorage, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet},
    config::{TYPES_CONFIG_MAP, provider_of_strategies_map},
    reconcile::{Context, Managed, error_policy, output_secret, reconcile},
};
use resource::ResourceCr;

/// Resolves when the operator should stop: controllers then take no new
/// work and return once their running reconciles have finished.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// A `Shutdown` from any future.
pub fn shutdown_on(trigger: impl std::future::Future<Output = ()> + Send + 'static) -> Shutdown {
    trigger.boxed().shared()
}

/// Runs every controller, for each watched namespace (or once for all
/// namespaces), until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: Shutdown) {
    let scopes: Vec<Option<String>> = if ctx.settings.watch_namespaces.is_empty() {
        vec![None]
    } else {
        ctx.settings
            .watch_namespaces
            .iter()
            .cloned()
            .map(Some)
            .collect()
    };
    futures::future::join_all(
        scopes
            .into_iter()
            .map(|ns| run_scope(ctx.clone(), Scope(ns), shutdown.clone())),
    )
    .await;
}

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

async fn run_scope(ctx: Arc<Context>, scope: Scope, shutdown: Shutdown) {
    let postgres_snapshots = Controller::new(
        scope.api::<DeserializeGuard<PostgresSnapshot>>(&ctx),
        watcher::Config::default(),
    );
    let redis_snapshots = Controller::new(
        scope.api::<DeserializeGuard<RedisSnapshot>>(&ctx),
        watcher::Config::default(),
    );
    tokio::join!(
        resource_controller::<Postgres>(ctx.clone(), &scope, true, shutdown.clone()),
        resource_controller::<Redis>(ctx.clone(), &scope, true, shutdown.clone()),
        resource_controller::<BlobStorage>(ctx.clone(), &scope, false, shutdown.clone()),
        resource_controller::<SMTPCredentialSet>(ctx.clone(), &scope, false, shutdown.clone()),
        drive(postgres_snapshots, ctx.clone(), shutdown.clone()),
        drive(redis_snapshots, ctx.clone(), shutdown.clone()),
    );
}

/// Only objects this operator created are watched.
fn owned() -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{}={}",
        output_secret::MANAGED_BY_LABEL,
        output_secret::MANAGED_BY
    ))
}

async fn resource_controller<K: ResourceCr>(
    ctx: Arc<Context>,
    scope: &Scope,
    workloads: bool,
    shutdown: Shutdown,
) {
    let client = ctx.client.clone();
    let controller = Controller::new(
        scope.api::<DeserializeGuard<K>>(&ctx),
        watcher::Config::default(),
    );
    let by_types = controller.store();
    let by_operator_cm = controller.store();
    let operator_ns = ctx.settings.operator_namespace.clone();
    let mut controller = controller.owns(scope.api::<Secret>(&ctx), owned());
    if workloads {
        controller = controller
            .owns(scope.api::<Deployment>(&ctx), owned())
            .owns(scope.api::<Service>(&ctx), owned())
            .owns(scope.api::<PersistentVolumeClaim>(&ctx), owned())
            .owns(scope.api::<ConfigMap>(&ctx), owned());
    }
    let controller = controller
        .watches(
            scope.api::<ConfigMap>(&ctx),
            watcher::Config::default().fields(&format!("metadata.name={TYPES_CONFIG_MAP}")),
            move |cm| crs_in_namespace(&by_types, &cm),
        )
        .watches(
            Api::<ConfigMap>::namespaced(client.clone(), &operator_ns),
            watcher::Config::default(),
            move |cm| crs_configured_by(&by_operator_cm, &cm),
        );
    drive(controller, ctx, shutdown).await;
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

async fn drive<K>(
    controller: Controller<DeserializeGuard<K>>,
    ctx: Arc<Context>,
    shutdown: Shutdown,
) where
    K: Managed + Resource<DynamicType = ()> + Debug,
{
    let config = controller::Config::default().concurrency(ctx.settings.concurrency);
    let store = controller.store();
    let graceful = shutdown.clone().then(move |()| async move {
        let _ = tokio::time::timeout(STORE_READY_LIMIT, store.wait_until_ready()).await;
    });
    let running = controller
        .with_config(config)
        .graceful_shutdown_on(graceful)
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
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
