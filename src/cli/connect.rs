//! Connecting to the cluster: who it is (cluster ID, region, tags), the
//! operator's namespace, the AWS identity, and the providers' settings.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context as _, bail};
use cro_provider_api::Fence;
use tracing::{info, warn};

use super::{args::ClusterArgs, go_compatible, sts};
use crate::{providers, providers::aws_identity, providers::cluster_id, reconcile::Settings};
use cro_runtime::{fenced_client, shard::Shard};

pub(super) const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A connection to the cluster, the settings its CRs are provisioned
/// with, and the providers.
pub(super) struct Connected {
    pub client: kube::Client,
    pub settings: Settings,
    pub providers: providers::Settings,
}

/// How the CRs are worked on: from `run`'s flags, or [`Work::read_only`]
/// for `plan` and `status`, which reconcile nothing.
pub(super) struct Work {
    /// The namespaces watched (trimmed, each once); empty for all.
    pub watch_namespaces: Vec<String>,
    pub concurrency: u16,
    pub shard: Shard,
    pub allow_cross_namespace_secrets: bool,
    pub recheck_interval: Duration,
    pub cloud_metrics_interval: Duration,
}

impl Work {
    pub fn read_only() -> Work {
        Work {
            watch_namespaces: Vec::new(),
            concurrency: 1,
            shard: Shard::default(),
            allow_cross_namespace_secrets: false,
            recheck_interval: Duration::from_secs(3600),
            cloud_metrics_interval: Duration::from_secs(300),
        }
    }
}

/// The Kubernetes configuration `--kubeconfig` and `--context` choose;
/// without them, KUBECONFIG's current context or the in-cluster config.
pub(super) async fn kube_config(args: &ClusterArgs) -> anyhow::Result<kube::Config> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    if args.kubeconfig.is_none() && args.context.is_none() {
        return (kube::Config::infer().await)
            .context("connecting to Kubernetes (KUBECONFIG or in-cluster config; --kubeconfig and --context choose another)");
    }
    let file = match &args.kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .with_context(|| format!("reading the kubeconfig {} (--kubeconfig)", path.display()))?,
        None => Kubeconfig::read()
            .context("reading the kubeconfig (KUBECONFIG or ~/.kube/config) for --context")?,
    };
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let context = args.context.as_deref().unwrap_or("its current context");
    kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .with_context(|| format!("using the kubeconfig's context {context} (--context)"))
}

/// Connects; with `serve_while_waiting`, a Secret `sts-credentials` that
/// cannot be used is waited for (see [`sts::wait_for_sts`]) rather than an
/// error. `watched` are the namespaces the CRs are read from.
pub(super) async fn connect(
    args: &ClusterArgs,
    watched: &[String],
    work: Work,
    serve_while_waiting: Option<std::net::SocketAddr>,
    fence: &Fence,
) -> anyhow::Result<Connected> {
    let operator_namespace = operator_namespace(args.operator_namespace.clone())?;
    let client = client(args, fence).await?;
    let (infrastructure, cluster_id) = cluster(&client, args).await?;
    info!(
        operator_namespace = %operator_namespace,
        cluster_id = %cluster_id.0,
        cluster_id_source = ?cluster_id.1,
        "connected to the cluster"
    );
    let settings = Settings {
        operator_namespace,
        watch_namespaces: work.watch_namespaces,
        concurrency: work.concurrency,
        cluster_id: cluster_id.0,
        tag_key_prefix: args.tag_key_prefix.clone(),
        extra_tags: extra_tags(&args.extra_tags, infrastructure.is_some()),
        infrastructure_tags: infrastructure
            .as_ref()
            .map(cluster_id::infrastructure_tags)
            .unwrap_or_default(),
        allow_cross_namespace_secrets: work.allow_cross_namespace_secrets,
        recheck_interval: work.recheck_interval,
        cloud_metrics_interval: work.cloud_metrics_interval,
        shard: work.shard,
        namespace_config: args.namespace_config,
    };
    info!(
        namespace_config = settings.namespace_config,
        "namespace-level cloud-resource-config {}",
        if settings.namespace_config {
            "read"
        } else {
            "not read"
        }
    );
    let ns = settings.operator_namespace.as_str();
    let identity = identity(&client, args, ns, watched, serve_while_waiting).await?;
    let nodes = node_instances(&client).await;
    let mut providers = provider_settings(args, infrastructure.as_ref(), identity.sts, nodes)?;
    providers.aws.vpc.pod_and_service_blocks = cluster_id::pod_and_service_blocks(&client).await;
    providers.operator_namespace = Some(settings.operator_namespace.clone());
    providers.aws.keys = identity.keys;
    providers.aws.fence = fence.clone();
    providers.go_compatible =
        go_compatible::decide(&client, args.go_compatible_resources, ns, watched).await;
    Ok(Connected {
        client,
        settings,
        providers,
    })
}

/// The Kubernetes client: reads and Lease requests over kube's own stack,
/// writes over sockets that ask the fence (see [`fenced_client`]).
async fn client(args: &ClusterArgs, fence: &Fence) -> anyhow::Result<kube::Client> {
    let mut config = kube_config(args).await?;
    // The operator's name in the API server's audit log, and the field
    // manager of its writes that name none (finalizers, Events), which
    // would otherwise show as "unknown" in managedFields.
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!(
            "cloud-resource-operator/",
            env!("CARGO_PKG_VERSION")
        )),
    ));
    const BUILDING: &str = "building the Kubernetes client from KUBECONFIG or the in-cluster config (its TLS settings or proxy)";
    let builder = kube::client::ClientBuilder::try_from(config.clone()).context(BUILDING)?;
    let fenced = fenced_client::FenceLayer::new(&config, fence.clone()).context(BUILDING)?;
    Ok(builder.with_layer(&fenced).build())
}

/// The OpenShift Infrastructure object, if any, and the cluster ID with
/// where it came from.
async fn cluster(
    client: &kube::Client,
    args: &ClusterArgs,
) -> anyhow::Result<(Option<serde_json::Value>, (String, cluster_id::Source))> {
    if let Some(id) = args.cluster_id.as_deref().filter(|id| !id.is_empty()) {
        cluster_id::check_configured(id)?;
    }
    let configured_id = args.cluster_id.as_deref().is_some_and(|id| !id.is_empty());
    let infrastructure = match cluster_id::infrastructure(client).await {
        Err(e @ cluster_id::InfrastructureError::Forbidden) if configured_id => {
            // The ID is given; the region and tags it also holds are not.
            warn!(error = %e, "reading the OpenShift Infrastructure object; going on with the configured cluster ID, without its region and resource tags");
            None
        }
        read => read
            .context("reading the OpenShift Infrastructure object (cluster ID, region and tags)")?,
    };
    let id = cluster_id::discover(client, args.cluster_id.as_deref(), infrastructure.as_ref())
        .await
        .context("discovering the cluster ID; set --cluster-id (CLUSTER_ID) to skip discovery")?;
    Ok((infrastructure, id))
}

/// The operator's own AWS identity (see [`aws_identity`]), STS mode
/// waited for with `serve_while_waiting`.
async fn identity(
    client: &kube::Client,
    args: &ClusterArgs,
    operator_namespace: &str,
    watched: &[String],
    serve_while_waiting: Option<std::net::SocketAddr>,
) -> anyhow::Result<aws_identity::Chosen> {
    let token = &args.sts_token_file;
    let sts = match serve_while_waiting {
        None => sts::sts_mode(client, operator_namespace, token).await?,
        Some(address) => sts::wait_for_sts(client, operator_namespace, token, address).await?,
    };
    let identity = aws_identity::choose(client, operator_namespace, watched, sts).await?;
    info!(source = %identity.source, "AWS identity");
    if watched.is_empty() && identity.source == aws_identity::Source::StandardChain {
        let elsewhere = aws_identity::go_secrets_elsewhere(client, operator_namespace).await?;
        if !elsewhere.is_empty() {
            warn!(
                namespaces = %elsewhere.join(", "),
                "a cluster-wide Go installation's AWS credentials are in these namespaces, not in the operator's: they are not used (a tenant could plant one); give the operator a Secret cloud-resources-aws-credentials in its own namespace, or keys of its own, and restart it (docs/migration.md, cluster-wide installations)"
            );
        }
    }
    if identity.sts.is_some() {
        info!("STS mode: BlobStorage gets no IAM user");
    }
    Ok(identity)
}

/// The configured extra tags; on OpenShift also the Go operator's
/// `red-hat-managed=true` (`GetDefaultResourceTags`, pkg/resources/tags.go),
/// unless configured otherwise.
fn extra_tags(configured: &[(String, String)], openshift: bool) -> BTreeMap<String, String> {
    let mut tags: BTreeMap<_, _> = configured.iter().cloned().collect();
    if openshift {
        tags.entry("red-hat-managed".into())
            .or_insert_with(|| "true".into());
    }
    tags
}

/// The EC2 instances of a few nodes, from their `spec.providerID`
/// (`aws:///<zone>/<instance>`): on any Kubernetes on AWS they say which
/// VPC the cluster runs in. None where nodes are not on AWS, or may not be
/// listed (the operator then needs the subnets' cluster tag or
/// --aws-vpc-id to place databases).
async fn node_instances(client: &kube::Client) -> Vec<String> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    match nodes
        .list(&kube::api::ListParams::default().limit(20))
        .await
    {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
            .filter_map(cro_provider_aws::instance_of_provider_id)
            .collect(),
        Err(e) => {
            warn!(error = %e, "listing nodes (to find the cluster's VPC from their providerID); AWS databases are placed by the subnets' cluster tag or --aws-vpc-id");
            Vec::new()
        }
    }
}

/// The providers' settings: flags first, then what the OpenShift
/// Infrastructure object says.
fn provider_settings(
    args: &ClusterArgs,
    infrastructure: Option<&serde_json::Value>,
    sts: Option<cro_provider_aws::Sts>,
    node_instances: Vec<String>,
) -> anyhow::Result<providers::Settings> {
    let budget = cro_provider_aws::Budget {
        rate: args.aws_api_rate,
        burst: args.aws_api_burst,
    };
    budget.check()?;
    let iam_users = cro_provider_aws::IamUsers::new(
        &args.iam_user_path,
        args.iam_permissions_boundary.as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    let aws_region = args
        .aws_region
        .clone()
        .or_else(|| infrastructure.and_then(cluster_id::infrastructure_region));
    Ok(providers::Settings {
        cluster_domain: args.cluster_domain.clone(),
        images: cro_provider_in_cluster::Images {
            postgres: args.postgres_image.clone(),
            redis: args.redis_image.clone(),
            object_store: args.object_store_image.clone(),
            mail_server: args.mail_server_image.clone(),
        },
        operator_namespace: None,
        // Decided once connected (see `go_compatible`).
        go_compatible: false,
        aws: cro_provider_aws::AwsSettings {
            region: aws_region,
            budget,
            sts,
            vpc: cro_provider_aws::VpcHint {
                vpc_id: args.aws_vpc_id.clone().filter(|v| !v.is_empty()),
                node_instances,
                pod_and_service_blocks: Vec::new(),
            },
            iam_users,
            keys: None,
            fence: Fence::open(),
            // Set from `Settings::go_compatible`.
            go_compatible: false,
        },
    })
}

/// The namespace of the strategies ConfigMaps: the flag, else the pod's.
fn operator_namespace(configured: Option<String>) -> anyhow::Result<String> {
    match configured {
        Some(ns) => Ok(ns),
        None => match std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE) {
            Ok(ns) => Ok(ns.trim().to_string()),
            Err(_) => bail!(
                "--operator-namespace (OPERATOR_NAMESPACE) is required when not running in a pod"
            ),
        },
    }
}
