use std::{
    collections::BTreeMap,
    io::IsTerminal,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use cloud_resource_operator::{
    api, aws_identity,
    cache::{self, Owned},
    cluster_id,
    config::ConfigReader,
    connectivity::Checker,
    controllers, fenced_client,
    flag_error::FlagError,
    leader,
    metrics::{self, Metrics},
    plan, providers,
    reconcile::{Context, Settings},
    shard::Shard,
    status, validate,
};
use cro_provider_api::Fence;
use tracing::{error, info, warn};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

#[derive(Parser)]
#[command(name = "cloud-resource-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Print every CustomResourceDefinition as multi-document YAML, or
    /// write one file per CRD into a directory.
    Crd {
        /// Write `<group>_<plural>.yaml` files here instead of printing.
        #[arg(long, env = "CRD_OUTPUT_DIR")]
        output_dir: Option<PathBuf>,
        /// Also write the API reference page (Markdown) made from the CRDs
        /// to this file.
        #[arg(long)]
        reference: Option<PathBuf>,
    },
    /// Check ConfigMaps and CRs in YAML files or directories offline, with
    /// the operator's own validation; exits 1 when anything is wrong.
    Validate(ValidateArgs),
    /// Print what the operator would change, one line per field of every
    /// CR it would touch, with read-only calls to Kubernetes and the
    /// clouds. Exits 0 when nothing would change, 2 when something would,
    /// 1 on error.
    Plan(Box<PlanArgs>),
    /// Explain one CR: phase, conditions, provider, cloud identifier and
    /// the cloud's own state, the Secret's keys (never its values), owned
    /// objects, pending changes, recent Events and what to change.
    /// Read-only. Installed as `kubectl-cro`, it is `kubectl cro status`.
    Status(Box<StatusArgs>),
}

#[derive(Args)]
struct StatusArgs {
    /// KIND/NAME, e.g. postgres/orders-db (kind, plural or singular).
    target: String,
    /// The CR's namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    output: PlanFormat,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args)]
struct PlanArgs {
    /// ConfigMaps (YAML, one or many per file) standing in for the
    /// cluster's of the same name: the plan of an edit before applying it.
    /// One without a namespace stands for the operator namespace's.
    #[arg(long = "config")]
    config: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    output: PlanFormat,
    /// Plan only the CRs in these namespaces, comma-separated (default:
    /// all namespaces).
    #[arg(long, short = 'n', value_delimiter = ',')]
    namespaces: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum PlanFormat {
    Text,
    Json,
}

#[derive(Args)]
struct ValidateArgs {
    /// YAML/JSON files or directories (searched recursively); files may
    /// hold several documents.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The operator's namespace: its cloud-resource-config is the fallback
    /// for CRs of other namespaces.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    operator_namespace: Option<String>,
}

/// What `run` and `plan` both need: where the configuration is, who the
/// cluster is, and how the providers reach their clouds.
#[derive(Args)]
struct ClusterArgs {
    /// Namespace holding the strategies ConfigMaps and the fallback
    /// cloud-resource-config. Defaults to the pod's own namespace.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Cluster ID prefixing cloud identifiers; discovered when unset
    /// (OpenShift infrastructure name, else the kube-system namespace UID).
    #[arg(long, env = "CLUSTER_ID")]
    cluster_id: Option<String>,
    /// Prefix of the tag keys put on cloud resources.
    #[arg(long, env = "TAG_KEY_PREFIX", default_value = "integreatly.org/")]
    tag_key_prefix: String,
    /// Extra tags for every cloud resource, as key=value (repeatable, or
    /// comma-separated in the environment variable).
    #[arg(long = "extra-tag", env = "EXTRA_TAGS", value_delimiter = ',', value_parser = parse_tag)]
    extra_tags: Vec<(String, String)>,
    /// Cluster DNS domain for in-cluster service hosts; when unset, hosts
    /// are `<name>.<namespace>.svc`.
    #[arg(long, env = "CLUSTER_DOMAIN")]
    cluster_domain: Option<String>,
    /// Default AWS region when a tier names none (the AWS SDK's standard
    /// chain also reads AWS_REGION and profiles).
    #[arg(long, env = "AWS_REGION")]
    aws_region: Option<String>,
    /// AWS calls per second the operator makes at most, per account,
    /// region and service (half of RDS's documented 12/s by default, so
    /// other tools of the account keep the rest). Calls over it wait.
    #[arg(long, env = "AWS_API_RATE", default_value_t = cro_provider_aws::Budget::default().rate)]
    aws_api_rate: f64,
    /// Read a CR's own namespace's `cloud-resource-config` before the
    /// operator namespace's (as the Go operator did). Default: on when
    /// exactly one namespace is watched (the Go operator's namespace-scoped
    /// install, where that namespace is the platform's), off when several
    /// or all are: there a tenant's ConfigMap could map its CRs to any
    /// provider.
    #[arg(long, env = "NAMESPACE_CONFIG", action = clap::ArgAction::Set)]
    namespace_config: Option<bool>,
    /// AWS calls that may go at once after a quiet period, per account,
    /// region and service.
    #[arg(long, env = "AWS_API_BURST", default_value_t = cro_provider_aws::Budget::default().burst)]
    aws_api_burst: u32,
    /// The VPC the cluster's pods run in, where AWS databases are placed
    /// when a tier names no subnet group; found from the subnets' cluster
    /// tag or the nodes' providerID when unset.
    #[arg(long, env = "AWS_VPC_ID")]
    aws_vpc_id: Option<String>,
    /// IAM path of the users the operator makes (BlobStorage, SMTP), so
    /// its own IAM policy can be limited to them; users made before keep
    /// theirs.
    #[arg(long, env = "IAM_USER_PATH", default_value = cro_provider_aws::DEFAULT_IAM_PATH)]
    iam_user_path: String,
    /// Managed policy ARN set as the permissions boundary of every IAM
    /// user the operator makes: whatever their policies say, they can
    /// never do more.
    #[arg(long, env = "IAM_PERMISSIONS_BOUNDARY")]
    iam_permissions_boundary: Option<String>,
    /// In STS mode (Secret `sts-credentials` with key `role_arn` in the
    /// operator's namespace, as the Go operator's), the token the role is
    /// assumed with: the pod's projected ServiceAccount token.
    #[arg(
        long,
        env = "STS_TOKEN_FILE",
        default_value = "/var/run/secrets/openshift/serviceaccount/token"
    )]
    sts_token_file: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Watch only these namespaces, comma-separated (default: all
    /// namespaces). The Go operator's WATCH_NAMESPACE works unchanged.
    #[arg(
        long = "watch-namespaces",
        visible_alias = "watch-namespace",
        env = "WATCH_NAMESPACE",
        value_delimiter = ','
    )]
    watch_namespaces: Vec<String>,
    /// Reconciles run at once per kind (and per watched namespace).
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// Split the namespaces between this many groups of replicas, by a
    /// stable hash of the namespace name; each group elects its leader on
    /// its own Lease (`<lease-name>-shard-<index>-of-<count>`).
    #[arg(long, env = "SHARD_COUNT", default_value_t = 1)]
    shard_count: u32,
    /// Which group this replica is in, from 0 to --shard-count - 1.
    #[arg(long, env = "SHARD_INDEX", default_value_t = 0)]
    shard_index: u32,
    /// Elect a leader on a Lease so that only one replica reconciles; turn
    /// off only when a single replica runs.
    #[arg(long, env = "LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Namespace of the leader-election Lease (default: the operator namespace).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_LEASE_NAME",
        default_value = "cloud-resource-operator"
    )]
    leader_election_lease_name: String,
    /// Seconds a leader's Lease stays valid without renewal: how long a
    /// replica waits before taking over from a leader that died.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value_t = 15)]
    leader_election_lease_duration: u64,
    /// Seconds the leader keeps trying to renew before it stops reconciling.
    #[arg(long, env = "LEADER_ELECTION_RENEW_DEADLINE", default_value_t = 10)]
    leader_election_renew_deadline: u64,
    /// Seconds between election attempts and renewals.
    #[arg(long, env = "LEADER_ELECTION_RETRY_PERIOD", default_value_t = 2)]
    leader_election_retry_period: u64,
    /// Allow spec.secretRef.namespace to name another namespace. Off by
    /// default: anyone who can create a CR could overwrite Secrets there.
    #[arg(long, env = "ALLOW_CROSS_NAMESPACE_SECRETS")]
    allow_cross_namespace_secrets: bool,
    /// Seconds between looks at a complete cloud resource for changes made
    /// outside the operator (console, CLI): each costs a few read calls.
    /// Default: the Go operator's ENV_FORCE_RECONCILE_TIMEOUT (nanoseconds)
    /// when set, else 3600.
    #[arg(long, env = "RECHECK_INTERVAL", value_parser = clap::value_parser!(u64).range(1..))]
    recheck_interval: Option<u64>,
    /// Seconds between connection checks of a complete Postgres or Redis
    /// (the `Connectable` condition): a login from the operator's pod with
    /// the Secret's credentials, no cloud API call.
    #[arg(long, env = "CONNECTION_CHECK_INTERVAL", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    connection_check_interval: u64,
    /// Seconds between readings of every AWS database's CloudWatch metrics
    /// (`cro_postgres_free_storage_average` and the other averages over
    /// that period): one GetMetricData call per 500 metrics per account
    /// and region. The Go operator's period, 5 minutes, by default.
    #[arg(long, env = "CLOUD_METRICS_INTERVAL", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    cloud_metrics_interval: u64,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    metrics_address: std::net::SocketAddr,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn parse_tag(s: &str) -> Result<(String, String), FlagError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(FlagError::Tag(s.to_string())),
    }
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd {
            output_dir,
            reference,
        } => print_crds(output_dir, reference),
        Command::Validate(args) => validate(args),
        Command::Run(args) => runtime()?.block_on(run(*args)),
        Command::Plan(args) => {
            let code = runtime()?.block_on(plan(*args))?;
            std::process::exit(code)
        }
        Command::Status(args) => runtime()?.block_on(status(*args)),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

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

const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A connection to the cluster, the settings its CRs are provisioned
/// with, and the providers.
struct Connected {
    client: kube::Client,
    settings: Settings,
    providers: providers::Settings,
}

/// Connects; with `serve_while_waiting`, a Secret `sts-credentials` that
/// cannot be used is waited for (see [`wait_for_sts`]) rather than an
/// error.
async fn connect(
    args: &ClusterArgs,
    watched: &[String],
    serve_while_waiting: Option<std::net::SocketAddr>,
    fence: &Fence,
) -> anyhow::Result<Connected> {
    let operator_namespace = operator_namespace(args.operator_namespace.clone())?;
    let mut config = kube::Config::infer()
        .await
        .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?;
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
    let client = kube::client::ClientBuilder::try_from(config)
        .context(
            "building the Kubernetes client from KUBECONFIG or the in-cluster config (its TLS settings or proxy)",
        )?
        .with_layer(&fenced_client::FenceLayer(fence.clone()))
        .build();
    if let Some(id) = args.cluster_id.as_deref().filter(|id| !id.is_empty()) {
        cluster_id::check_configured(id)?;
    }
    let configured_id = args.cluster_id.as_deref().is_some_and(|id| !id.is_empty());
    let infrastructure = match cluster_id::infrastructure(&client).await {
        Err(e @ cluster_id::InfrastructureError::Forbidden) if configured_id => {
            // The ID is given; the region and tags it also holds are not.
            warn!(error = %e, "reading the OpenShift Infrastructure object; going on with the configured cluster ID, without its region and resource tags");
            None
        }
        read => read
            .context("reading the OpenShift Infrastructure object (cluster ID, region and tags)")?,
    };
    let (cluster_id, cluster_id_source) =
        cluster_id::discover(&client, args.cluster_id.as_deref(), infrastructure.as_ref())
            .await
            .context(
                "discovering the cluster ID; set --cluster-id (CLUSTER_ID) to skip discovery",
            )?;
    info!(
        operator_namespace = %operator_namespace,
        cluster_id = %cluster_id,
        cluster_id_source = ?cluster_id_source,
        "connected to the cluster"
    );
    let settings = Settings {
        operator_namespace,
        watch_namespaces: Vec::new(),
        concurrency: 1,
        cluster_id,
        tag_key_prefix: args.tag_key_prefix.clone(),
        extra_tags: extra_tags(&args.extra_tags, infrastructure.is_some()),
        infrastructure_tags: infrastructure
            .as_ref()
            .map(cluster_id::infrastructure_tags)
            .unwrap_or_default(),
        allow_cross_namespace_secrets: false,
        recheck_interval: Duration::from_secs(3600),
        cloud_metrics_interval: Duration::from_secs(300),
        shard: Default::default(),
        namespace_config: namespace_config(args.namespace_config, watched),
    };
    info!(
        namespace_config = settings.namespace_config,
        set = args.namespace_config.is_some(),
        "namespace-level cloud-resource-config {}",
        if settings.namespace_config {
            "read"
        } else {
            "not read"
        }
    );
    let sts = match serve_while_waiting {
        None => sts_mode(&client, &settings.operator_namespace, &args.sts_token_file).await?,
        Some(address) => {
            wait_for_sts(
                &client,
                &settings.operator_namespace,
                &args.sts_token_file,
                address,
            )
            .await?
        }
    };
    let identity =
        aws_identity::choose(&client, &settings.operator_namespace, watched, sts).await?;
    info!(source = %identity.source, "AWS identity");
    if identity.sts.is_some() {
        info!("STS mode: BlobStorage gets no IAM user");
    }
    let nodes = node_instances(&client).await;
    let mut providers = provider_settings(args, infrastructure.as_ref(), identity.sts, nodes)?;
    providers.aws.vpc.pod_and_service_blocks = cluster_id::pod_and_service_blocks(&client).await;
    providers.operator_namespace = Some(settings.operator_namespace.clone());
    providers.aws.keys = identity.keys;
    providers.aws.fence = fence.clone();
    Ok(Connected {
        client,
        settings,
        providers,
    })
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

/// The Go operator's STS mode (NewCredentialManager,
/// pkg/providers/aws/credentials.go): on when Secret `sts-credentials` of
/// the operator's namespace exists, its role in key `role_arn`.
async fn sts_mode(
    client: &kube::Client,
    namespace: &str,
    token_file: &Path,
) -> anyhow::Result<Option<cro_provider_aws::Sts>> {
    const SECRET: &str = "sts-credentials";
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let Some(secret) = secrets
        .get_opt(SECRET)
        .await
        .with_context(|| format!("reading Secret {namespace}/{SECRET} (STS mode)"))?
    else {
        return Ok(None);
    };
    let role_arn = (secret.data.as_ref())
        .and_then(|d| d.get("role_arn"))
        .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
        .filter(|r| !r.is_empty());
    let Some(role_arn) = role_arn else {
        bail!(
            "Secret {namespace}/{SECRET} turns STS mode on but has no role_arn: set its key role_arn to the role the operator runs as, or delete the Secret"
        );
    };
    Ok(Some(cro_provider_aws::Sts {
        role_arn,
        token_file: token_file.to_path_buf(),
    }))
}

/// How often an unusable Secret `sts-credentials` is read again.
const STS_RETRY: Duration = Duration::from_secs(15);

/// STS mode once Secret `sts-credentials` can be used: until then, the
/// reason is logged and served on `address` as the Go operator's
/// `cro_sts_credentials_secret` gauge, with `/readyz` not ready, and the
/// Secret read again every few seconds. A Secret someone fixes (its
/// `role_arn`, the operator's permission to read it) is taken up without a
/// restart.
async fn wait_for_sts(
    client: &kube::Client,
    namespace: &str,
    token_file: &Path,
    address: std::net::SocketAddr,
) -> anyhow::Result<Option<cro_provider_aws::Sts>> {
    let mut serving: Option<tokio::task::JoinHandle<std::io::Result<()>>> = None;
    let shown = Arc::new(std::sync::Mutex::new(String::new()));
    loop {
        match sts_mode(client, namespace, token_file).await {
            Ok(sts) => {
                if let Some(server) = serving {
                    server.abort();
                    let _ = server.await;
                }
                return Ok(sts);
            }
            Err(e) => {
                let reason = format!("{e:#}");
                error!(error = %reason, "STS mode: Secret sts-credentials cannot be used; reading it again in {}s", STS_RETRY.as_secs());
                *shown.lock().unwrap_or_else(|e| e.into_inner()) =
                    metrics::sts_credentials_secret(namespace, &reason);
                if serving.is_none() {
                    let listener = tokio::net::TcpListener::bind(address)
                        .await
                        .with_context(|| format!("listening on --metrics-address {address}"))?;
                    info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz (not ready: waiting for Secret sts-credentials)");
                    let shown = shown.clone();
                    let render =
                        Arc::new(move || shown.lock().unwrap_or_else(|e| e.into_inner()).clone());
                    serving = Some(tokio::spawn(metrics::serve_text(listener, render, false)));
                }
                tokio::select! {
                    () = tokio::time::sleep(STS_RETRY) => {}
                    () = terminated() => bail!("stopped while waiting for Secret {namespace}/sts-credentials"),
                }
            }
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
        operator_namespace: None,
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
        },
    })
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    // With leader election, nothing is written until the Lease is held,
    // and only while it surely is (see cro_provider_api::fence).
    let fence = match args.leader_election {
        true => Fence::leased(),
        false => Fence::open(),
    };
    let Connected {
        client,
        mut settings,
        providers,
    } = connect(
        &args.cluster,
        &args.watch_namespaces,
        Some(args.metrics_address),
        &fence,
    )
    .await?;
    let mut namespaces = std::collections::BTreeSet::new();
    settings.watch_namespaces = args
        .watch_namespaces
        .iter()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty() && namespaces.insert(ns.clone()))
        .collect();
    settings.shard = Shard::new(args.shard_index, args.shard_count)?;
    settings.concurrency = args.concurrency;
    settings.allow_cross_namespace_secrets = args.allow_cross_namespace_secrets;
    settings.recheck_interval = recheck_interval(args.recheck_interval);
    settings.cloud_metrics_interval = Duration::from_secs(args.cloud_metrics_interval);
    info!("starting cloud-resource-operator");
    let owned = Arc::new(Owned::new(
        &client,
        &cache::scopes(&settings.watch_namespaces),
    ));
    let providers = providers::build(&client, providers, Some(owned.clone()));
    let connectivity = Arc::new(Checker::new(
        Duration::from_secs(args.connection_check_interval),
        CONNECTION_CHECK_TIMEOUT,
    ));
    tokio::spawn(connectivity.clone().run());
    let metrics = Arc::new(Metrics::new(|registry| {
        for provider in &providers {
            provider.register_metrics(registry);
        }
        connectivity.register_metrics(registry);
    }));
    let elector = elector(&args, &client, &settings.operator_namespace, fence)?;
    let ctx = Arc::new(Context::new(
        client,
        settings,
        owned,
        providers,
        metrics.clone(),
        connectivity,
    ));
    serve(ctx, elector, metrics, args.metrics_address).await
}

/// The recheck interval: the flag, else the Go operator's
/// `ENV_FORCE_RECONCILE_TIMEOUT` (`GetForcedReconcileTimeOrDefault`,
/// pkg/resources/config.go: an integer of nanoseconds; anything else is
/// ignored, as there), at least a second, else an hour.
fn recheck_interval(flag: Option<u64>) -> Duration {
    const DEFAULT: Duration = Duration::from_secs(3600);
    if let Some(seconds) = flag {
        return Duration::from_secs(seconds);
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

/// What `plan` and `status` read the cluster and the clouds through, as
/// the operator would: its ConfigMaps (with `overrides` standing in) and
/// its providers. Logs go to stderr, quietly: stdout is the answer.
struct Reader {
    client: kube::Client,
    settings: Settings,
    config: ConfigReader,
    providers: BTreeMap<&'static str, Arc<dyn cro_provider_api::Provider>>,
}

impl Reader {
    async fn connect(
        cluster: &ClusterArgs,
        namespaces: &[String],
        config_files: &[PathBuf],
    ) -> anyhow::Result<Reader> {
        let Connected {
            client,
            settings,
            providers,
        } = connect(cluster, namespaces, None, &Fence::open()).await?;
        let providers = providers::build(&client, providers, None);
        let overrides = plan::config_overrides(config_files, &settings.operator_namespace)?;
        let scopes = cache::scopes(namespaces);
        let config =
            ConfigReader::new(client.clone(), settings.operator_namespace.clone(), &scopes)
                .with_namespace_config(settings.namespace_config)
                .with_overrides(overrides);
        let watches = config.clone();
        tokio::spawn(async move { watches.run().await });
        let providers = providers.into_iter().map(|p| (p.name(), p)).collect();
        Ok(Reader {
            client,
            settings,
            config,
            providers,
        })
    }

    fn scope<'a>(&'a self, namespaces: &'a [String]) -> plan::Scope<'a> {
        plan::Scope {
            client: &self.client,
            config: &self.config,
            settings: &self.settings,
            providers: &self.providers,
            namespaces,
        }
    }
}

fn quiet_logs() {
    tracing_subscriber::registry()
        .with(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")))
        .with(fmt::layer().with_writer(std::io::stderr))
        .init();
}

/// Prints the plan; the exit status says whether anything would change.
async fn plan(args: PlanArgs) -> anyhow::Result<i32> {
    quiet_logs();
    let reader = Reader::connect(&args.cluster, &args.namespaces, &args.config).await?;
    let planned = plan::plan(&reader.scope(&args.namespaces))
        .await
        .context("listing the resources to plan")?;
    match args.output {
        PlanFormat::Text => print!("{}", planned.text()),
        PlanFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&planned).context("serialising the plan")?
        ),
    }
    eprint!("{}", planned.summary());
    Ok(planned.exit_code())
}

/// Explains one CR. The cloud is read only when the operator's namespace
/// is known (its ConfigMaps say how to reach it).
async fn status(args: StatusArgs) -> anyhow::Result<()> {
    quiet_logs();
    let (resource, name) = status::target(&args.target)?;
    let namespace = match args.namespace.clone() {
        Some(ns) => ns,
        None => {
            kube::Config::infer()
                .await
                .context("reading the kubeconfig (KUBECONFIG or in-cluster config)")?
                .default_namespace
        }
    };
    let namespaces = [namespace.clone()];
    let known = args.cluster.operator_namespace.is_some()
        || std::path::Path::new(SERVICE_ACCOUNT_NAMESPACE).exists();
    let reader = match known {
        true => Some(Reader::connect(&args.cluster, &namespaces, &[]).await?),
        false => None,
    };
    let client = match &reader {
        Some(r) => r.client.clone(),
        None => kube::Client::try_default()
            .await
            .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?,
    };
    let scope = reader.as_ref().map(|r| r.scope(&namespaces));
    let cloud = scope.as_ref().ok_or(
        "give --operator-namespace (OPERATOR_NAMESPACE), the namespace the operator runs in, to read the cloud through its configuration",
    );
    let report = status::gather(&client, (&resource, &namespace, &name), cloud).await?;
    match args.output {
        PlanFormat::Text => print!("{}", status::text(&report)),
        PlanFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the status")?
        ),
    }
    Ok(())
}

/// `--namespace-config` as given, else on only when exactly one
/// namespace is watched.
fn namespace_config(flag: Option<bool>, watched: &[String]) -> bool {
    let mut namespaces: Vec<&str> = watched.iter().map(|n| n.trim()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    flag.unwrap_or(namespaces.len() == 1)
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

/// The leader elector the flags ask for, if any.
fn elector(
    args: &RunArgs,
    client: &kube::Client,
    operator_namespace: &str,
    fence: Fence,
) -> anyhow::Result<Option<leader::Elector>> {
    if !args.leader_election {
        return Ok(None);
    }
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| operator_namespace.to_string());
    // Where a Go operator this one replaces runs: the same namespace, or
    // the one namespace it watched.
    let mut go_lease_namespaces = vec![namespace.clone(), operator_namespace.to_string()];
    if let [one] = args.watch_namespaces.as_slice() {
        go_lease_namespaces.push(one.trim().to_string());
    }
    let config = leader::Config {
        namespace,
        go_lease_namespaces,
        name: Shard::new(args.shard_index, args.shard_count)
            .map_err(anyhow::Error::msg)?
            .lease_name(&args.leader_election_lease_name),
        identity: leader::identity(),
        lease_duration: Duration::from_secs(args.leader_election_lease_duration),
        renew_deadline: Duration::from_secs(args.leader_election_renew_deadline),
        retry_period: Duration::from_secs(args.leader_election_retry_period),
    };
    config.check()?;
    Ok(Some(leader::Elector::new(client.clone(), config, fence)))
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
    let shutdown = controllers::shutdown_on(terminated());
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

/// Resolves on SIGTERM (Kubernetes stopping the pod) or SIGINT.
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    info!("shutting down: finishing running reconciles");
}

fn validate(args: ValidateArgs) -> anyhow::Result<()> {
    let (docs, mut findings) = validate::load(&args.paths);
    let options = validate::Options {
        operator_namespace: args.operator_namespace,
    };
    findings.extend(validate::validate(&docs, &options));
    for finding in &findings {
        println!("{finding}");
    }
    eprintln!("{}", validate::summary(&docs, &findings));
    if !findings.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

fn print_crds(output_dir: Option<PathBuf>, reference: Option<PathBuf>) -> anyhow::Result<()> {
    if let Some(path) = reference {
        std::fs::write(&path, api::reference::markdown(&api::crds()))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    for crd in api::crds() {
        let yaml = api::crd_yaml(&crd)
            .with_context(|| format!("serialising CRD {}", crd.spec.names.kind))?;
        match &output_dir {
            Some(dir) => {
                let path = dir.join(api::crd_file_name(&crd));
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => print!("---\n{yaml}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_config_is_on_by_default_only_for_one_watched_namespace() {
        let ns = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(namespace_config(None, &ns(&["app"])));
        assert!(namespace_config(None, &ns(&["app", " app"])));
        assert!(!namespace_config(None, &ns(&[])));
        assert!(!namespace_config(None, &ns(&["a", "b"])));
        assert!(namespace_config(Some(true), &ns(&[])));
        assert!(!namespace_config(Some(false), &ns(&["app"])));
    }

    #[test]
    fn the_go_operators_reconcile_timeout_is_nanoseconds() {
        let minute = Some(Duration::from_secs(60));
        assert_eq!(go_reconcile_timeout("60000000000"), minute);
        assert_eq!(go_reconcile_timeout(" 60000000000\n"), minute);
        assert_eq!(go_reconcile_timeout("5"), Some(Duration::from_secs(1)));
        assert_eq!(go_reconcile_timeout("60s"), None);
        assert_eq!(recheck_interval(Some(30)), Duration::from_secs(30));
    }
}
