//! One controller per kind, all on the shared reconcile skeleton. Each
//! watches its kind, the objects it owns (so a hand edit is seen at once),
//! and the configuration ConfigMaps (an edit re-reconciles exactly the CRs
//! whose configuration it holds).

pub mod resource;
pub mod snapshot;

use std::{fmt::Debug, sync::Arc};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{Controller, reflector::ObjectRef, watcher},
};
use tracing::{debug, warn};

use crate::{
    api::{BlobStorage, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet},
    config::{TYPES_CONFIG_MAP, provider_of_strategies_map},
    reconcile::{Context, Managed, error_policy, output_secret, reconcile},
};
use resource::ResourceCr;

/// Runs every controller until shutdown (SIGTERM/SIGINT).
pub async fn run(ctx: Arc<Context>) {
    tokio::join!(
        resource_controller::<Postgres>(ctx.clone(), true),
        resource_controller::<Redis>(ctx.clone(), true),
        resource_controller::<BlobStorage>(ctx.clone(), false),
        resource_controller::<SMTPCredentialSet>(ctx.clone(), false),
        drive(
            Controller::new(scoped::<PostgresSnapshot>(&ctx), watcher::Config::default()),
            ctx.clone()
        ),
        drive(
            Controller::new(scoped::<RedisSnapshot>(&ctx), watcher::Config::default()),
            ctx.clone()
        ),
    );
}

/// An Api over the watched namespace, or all namespaces.
fn scoped<K>(ctx: &Context) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match &ctx.settings.watch_namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

/// Only objects this operator created are watched.
fn owned() -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{}={}",
        output_secret::MANAGED_BY_LABEL,
        output_secret::MANAGED_BY
    ))
}

async fn resource_controller<K: ResourceCr>(ctx: Arc<Context>, workloads: bool) {
    let client = ctx.client.clone();
    let controller = Controller::new(scoped::<K>(&ctx), watcher::Config::default());
    let by_types = controller.store();
    let by_operator_cm = controller.store();
    let operator_ns = ctx.settings.operator_namespace.clone();
    let mut controller = controller.owns(scoped::<Secret>(&ctx), owned());
    if workloads {
        controller = controller
            .owns(scoped::<Deployment>(&ctx), owned())
            .owns(scoped::<Service>(&ctx), owned())
            .owns(scoped::<PersistentVolumeClaim>(&ctx), owned())
            .owns(scoped::<ConfigMap>(&ctx), owned());
    }
    let controller = controller
        // cloud-resource-config in a watched namespace concerns the CRs of
        // that namespace.
        .watches(
            scoped::<ConfigMap>(&ctx),
            watcher::Config::default().fields(&format!("metadata.name={TYPES_CONFIG_MAP}")),
            move |cm| {
                let ns = cm.namespace();
                by_types
                    .state()
                    .into_iter()
                    .filter(|cr| cr.namespace() == ns)
                    .map(|cr| ObjectRef::from_obj(cr.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        // In the operator namespace: cloud-resource-config is everyone's
        // fallback; cloud-resources-<provider>-strategies concerns the CRs
        // on that provider (and those whose provider is not settled yet).
        .watches(
            Api::<ConfigMap>::namespaced(client.clone(), &operator_ns),
            watcher::Config::default(),
            move |cm| {
                let name = cm.name_any();
                let provider = provider_of_strategies_map(&name).map(str::to_string);
                if provider.is_none() && name != TYPES_CONFIG_MAP {
                    return Vec::new();
                }
                by_operator_cm
                    .state()
                    .into_iter()
                    .filter(|cr| match &provider {
                        None => true,
                        Some(p) => cr
                            .status()
                            .and_then(|s| s.strategy.as_deref())
                            .is_none_or(|s| s == p),
                    })
                    .map(|cr| ObjectRef::from_obj(cr.as_ref()))
                    .collect::<Vec<_>>()
            },
        );
    drive(controller, ctx).await;
}

async fn drive<K>(controller: Controller<K>, ctx: Arc<Context>)
where
    K: Managed + Resource<DynamicType = ()> + Debug,
{
    controller
        .shutdown_on_signal()
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
                Err(e) => warn!(error = %e, "reconcile error"),
            }
        })
        .await;
}
