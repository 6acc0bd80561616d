//! `run`: connect, elect a leader, reconcile and serve `/metrics` until
//! SIGTERM.

use std::{io::IsTerminal, sync::Arc, time::Duration};

use anyhow::{Context as _, bail};
use cro_provider_api::Fence;
use tracing::{error, info, warn};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use super::{
    args::{LogFormat, RunArgs},
    connect::{Connected, Work, connect},
};
use crate::{
    connectivity::Checker,
    controllers, leader,
    metrics::{self, Metrics},
    providers,
    providers::owned::Owned,
    reconcile::{Context, Objects, Settings},
};
use cro_runtime::{cache, shard::Shard};

/// kube's client logs the whole response body at `warn` when one does not
/// deserialize; a body can hold Secrets, so that module logs errors only
/// unless RUST_LOG names it explicitly.
const QUIET_KUBE_BODIES: &str = "kube_client::client=error";

/// How long one connection check may take, name lookup to login: a
/// server that answers at all answers well within it.
const CONNECTION_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

fn init_logging(format: LogFormat) {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let explicit = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("kube_client"));
    if !explicit && let Ok(directive) = QUIET_KUBE_BODIES.parse() {
        filter = filter.add_directive(directive);
    }
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_ansi(std::io::stderr().is_terminal()))
            .init(),
        LogFormat::Json => registry.with(fmt::layer().json()).init(),
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    // With leader election, nothing is written until the Lease is held,
    // and only while it surely is (see cro_provider_api::fence).
    let fence = match args.leader_election {
        true => Fence::leased(),
        false => Fence::open(),
    };
    let work = args.work()?;
    let watched = work.watch_namespaces.clone();
    let Connected {
        client,
        settings,
        providers,
    } = connect(
        &args.cluster,
        &watched,
        work,
        Some(args.metrics_address),
        &fence,
    )
    .await?;
    info!("starting cloud-resource-operator");
    let owned = Arc::new(Owned::new(
        &client,
        &cache::scopes(&settings.watch_namespaces),
    ));
    let providers = providers::build(&client, providers, Some(owned.clone()));
    let stores = cro_provider_aws::CompatibleStores::new(fence.clone());
    // One table of what is known of each CR, its connection check too.
    let objects = Arc::new(Objects::default());
    let connectivity = Arc::new(
        Checker::new(
            args.connection_check_interval,
            CONNECTION_CHECK_TIMEOUT,
            objects.clone(),
        )
        .with_object_store(Arc::new(stores)),
    );
    tokio::spawn(connectivity.clone().run());
    let metrics = Arc::new(Metrics::new(|registry| {
        registry.register_collector(Box::new(metrics::ProviderMetrics(providers.clone())));
        connectivity.register_metrics(registry);
    }));
    let held = leader::HeldBack::default();
    let elector = elector(&args, &client, &settings, fence, &metrics, &held)?;
    let ctx = Arc::new(
        Context::new(
            client,
            settings,
            owned,
            providers,
            metrics.clone(),
            (connectivity, objects),
        )
        .with_held_back(held),
    );
    serve(ctx, elector, metrics, args.metrics_address).await
}

impl RunArgs {
    /// How the CRs are worked on, from the flags.
    fn work(&self) -> anyhow::Result<Work> {
        let mut seen = std::collections::BTreeSet::new();
        Ok(Work {
            watch_namespaces: (self.watch_namespaces.iter())
                .map(|ns| ns.trim().to_string())
                .filter(|ns| !ns.is_empty() && seen.insert(ns.clone()))
                .collect(),
            concurrency: self.concurrency,
            shard: Shard::new(self.shard_index, self.shard_count)?,
            allow_cross_namespace_secrets: self.allow_cross_namespace_secrets,
            recheck_interval: recheck_interval(self.recheck_interval),
            cloud_metrics_interval: self.cloud_metrics_interval,
        })
    }
}

/// The recheck interval: the flag, else the Go operator's
/// `ENV_FORCE_RECONCILE_TIMEOUT` (`GetForcedReconcileTimeOrDefault`,
/// pkg/resources/config.go: an integer of nanoseconds; anything else is
/// ignored, as there), at least a second, else an hour.
fn recheck_interval(flag: Option<Duration>) -> Duration {
    const DEFAULT: Duration = Duration::from_secs(3600);
    if let Some(interval) = flag {
        return interval;
    }
    let Ok(go) = std::env::var("ENV_FORCE_RECONCILE_TIMEOUT") else {
        return DEFAULT;
    };
    match go_reconcile_timeout(&go) {
        Some(interval) => {
            info!(
                ?interval,
                "recheck interval from ENV_FORCE_RECONCILE_TIMEOUT (the Go operator's)"
            );
            interval
        }
        None => {
            warn!(
                "ENV_FORCE_RECONCILE_TIMEOUT is not an integer of nanoseconds; rechecking hourly"
            );
            DEFAULT
        }
    }
}

/// `ENV_FORCE_RECONCILE_TIMEOUT` as the Go operator reads it (nanoseconds),
/// at least a second.
fn go_reconcile_timeout(value: &str) -> Option<Duration> {
    let nanos = value.trim().parse::<u64>().ok()?;
    Some(Duration::from_nanos(nanos).max(Duration::from_secs(1)))
}

/// The leader elector the flags ask for, if any.
fn elector(
    args: &RunArgs,
    client: &kube::Client,
    settings: &Settings,
    fence: Fence,
    metrics: &Metrics,
    held: &leader::HeldBack,
) -> anyhow::Result<Option<leader::Elector>> {
    if !args.leader_election {
        return Ok(None);
    }
    let operator_namespace = settings.operator_namespace.as_str();
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| operator_namespace.to_string());
    // Where a Go operator this one replaces runs: the same namespace, or
    // the one namespace it watched. Only the platform writes these, so a
    // Go trace here stops this process leading; one elsewhere holds back
    // its own namespace (leader::held).
    let mut go_lease_namespaces = vec![namespace.clone(), operator_namespace.to_string()];
    if let [one] = settings.watch_namespaces.as_slice() {
        go_lease_namespaces.push(one.clone());
    }
    let config = leader::Config {
        lease: cro_runtime::lease::Config {
            namespace,
            name: settings.shard.lease_name(&args.leader_election_lease_name),
            identity: leader::identity(),
            lease_duration: args.leader_election_lease_duration,
            renew_deadline: args.leader_election_renew_deadline,
            retry_period: args.leader_election_retry_period,
        },
        go_lease_namespaces,
        watch_namespaces: settings.watch_namespaces.clone(),
    };
    config.lease.check()?;
    Ok(Some(leader::Elector::new(
        client.clone(),
        config,
        fence,
        metrics.go_operator_gauge(),
        held.clone(),
    )))
}

/// Reconciles (as the leader, when electing) and serves `/metrics` until
/// SIGTERM.
async fn serve(
    ctx: Arc<Context>,
    elector: Option<leader::Elector>,
    metrics: Arc<Metrics>,
    address: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on --metrics-address {address}"))?;
    info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
    let shutdown = controllers::shutdown_on(super::signal::terminated());
    tokio::select! {
        worked = work(ctx, elector, shutdown) => worked?,
        served = metrics::serve(listener, metrics) => served.context("serving metrics")?,
    }
    info!("stopped");
    Ok(())
}

/// Reconciles until `shutdown`, as the leader when `elector` is set. On
/// SIGTERM running reconciles finish and the Lease is released, so the
/// next leader starts at once; a lost Lease stops every reconcile at once
/// and fails the process (its pod restarts as a candidate).
async fn work(
    ctx: Arc<Context>,
    elector: Option<leader::Elector>,
    shutdown: controllers::Shutdown,
) -> anyhow::Result<()> {
    let Some(elector) = elector else {
        ctx.metrics.set_leader(true);
        controllers::run(ctx, shutdown).await;
        return Ok(());
    };
    info!(identity = %elector.identity(), "waiting to become the leader");
    tokio::select! {
        () = elector.acquire() => {}
        () = shutdown.clone() => return Ok(()),
    }
    info!(identity = %elector.identity(), "became the leader; reconciling");
    ctx.metrics.set_leader(true);
    tokio::select! {
        () = controllers::run(ctx.clone(), shutdown) => {}
        lost = elector.hold() => {
            ctx.metrics.set_leader(false);
            error!(reason = %lost, "lost leadership; stopped reconciling");
            bail!("lost leadership ({lost}); stopped reconciling");
        }
    }
    ctx.metrics.set_leader(false);
    match elector.release().await {
        Ok(()) => info!("released the Lease"),
        Err(e) => {
            warn!(error = %e, "releasing the Lease failed; another replica takes over when it expires")
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_operators_reconcile_timeout_is_nanoseconds() {
        let minute = Some(Duration::from_secs(60));
        assert_eq!(go_reconcile_timeout("60000000000"), minute);
        assert_eq!(go_reconcile_timeout(" 60000000000\n"), minute);
        assert_eq!(go_reconcile_timeout("5"), Some(Duration::from_secs(1)));
        assert_eq!(go_reconcile_timeout("60s"), None);
        assert_eq!(
            recheck_interval(Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
    }
}
