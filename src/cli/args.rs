//! The command line: every subcommand's flags and their environment
//! variables. Durations are given in whole seconds, as the Go operator's
//! flags were, and parsed into [`Duration`]s here, once.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli::flag_error::FlagError;

#[derive(Parser)]
#[command(name = "cloud-resource-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// Print a shell completion script, e.g. `cloud-resource-operator
    /// completions bash > /etc/bash_completion.d/cloud-resource-operator`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
pub struct StatusArgs {
    /// KIND/NAME, e.g. postgres/orders-db (kind, plural or singular).
    pub target: String,
    /// The CR's namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    pub output: PlanFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args)]
pub struct PlanArgs {
    /// ConfigMaps (YAML, one or many per file) standing in for the
    /// cluster's of the same name: the plan of an edit before applying it.
    /// One without a namespace stands for the operator namespace's.
    #[arg(long = "config")]
    pub config: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    pub output: PlanFormat,
    /// Plan only the CRs in these namespaces, comma-separated (default:
    /// all namespaces).
    #[arg(long, short = 'n', value_delimiter = ',')]
    pub namespaces: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
}

#[derive(Args)]
pub struct ValidateArgs {
    /// YAML/JSON files or directories (searched recursively); files may
    /// hold several documents.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The operator's namespace: its cloud-resource-config is the fallback
    /// for CRs of other namespaces.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    pub operator_namespace: Option<String>,
}

/// What `run` and `plan` both need: where the configuration is, who the
/// cluster is, and how the providers reach their clouds.
#[derive(Args)]
pub struct ClusterArgs {
    /// Kubeconfig file to read instead of KUBECONFIG's (or
    /// ~/.kube/config); without either, the pod's in-cluster config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use instead of its current one.
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace holding the strategies ConfigMaps and the fallback
    /// cloud-resource-config. Defaults to the pod's own namespace.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    pub operator_namespace: Option<String>,
    /// Cluster ID prefixing cloud identifiers; discovered when unset
    /// (OpenShift infrastructure name, else the kube-system namespace UID).
    #[arg(long, env = "CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// Prefix of the tag keys put on cloud resources.
    #[arg(long, env = "TAG_KEY_PREFIX", default_value = "integreatly.org/")]
    pub tag_key_prefix: String,
    /// Extra tags for every cloud resource, as key=value (repeatable, or
    /// comma-separated in the environment variable).
    #[arg(long = "extra-tag", env = "EXTRA_TAGS", value_delimiter = ',', value_parser = parse_tag)]
    pub extra_tags: Vec<(String, String)>,
    /// Cluster DNS domain for in-cluster service hosts; when unset, hosts
    /// are `<name>.<namespace>.svc`.
    #[arg(long, env = "CLUSTER_DOMAIN")]
    pub cluster_domain: Option<String>,
    /// How new ElastiCache Redis, S3 BlobStorage and in-cluster Postgres
    /// and Redis are made. `true`: as the Go operator made them (a Redis
    /// without in-transit encryption and AUTH where its tier does not say,
    /// a bucket's key from the Cloud Credential Operator where it runs,
    /// in-cluster databases in its layout and images), so rolling back to
    /// the Go operator keeps them working. `false`: this operator's way. `auto`:
    /// `true` while the Go operator's Lease is in the operator's namespace
    /// (or the one watched namespace), as after a switch.
    #[arg(long, env = "GO_COMPATIBLE_RESOURCES", value_enum, default_value_t = GoCompatible::Auto)]
    pub go_compatible_resources: GoCompatible,
    /// Image of in-cluster Postgres where a tier names none; pin it by
    /// digest (`repository@sha256:...`) or name your mirror. The variable
    /// follows OLM's RELATED_IMAGE_ convention, which mirroring rewrites.
    #[arg(long, env = "RELATED_IMAGE_POSTGRES", default_value = cro_provider_in_cluster::DEFAULT_POSTGRES_IMAGE, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub postgres_image: String,
    /// Image of in-cluster Redis where a tier names none (as
    /// --postgres-image).
    #[arg(long, env = "RELATED_IMAGE_REDIS", default_value = cro_provider_in_cluster::DEFAULT_REDIS_IMAGE, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub redis_image: String,
    /// Image of an in-cluster BlobStorage's S3-compatible store
    /// (SeaweedFS) where a tier names none (as --postgres-image).
    #[arg(long, env = "RELATED_IMAGE_OBJECT_STORE", default_value = cro_provider_in_cluster::DEFAULT_OBJECT_STORE_IMAGE, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub object_store_image: String,
    /// Image of an in-cluster SMTPCredentialSet's own mail server
    /// (Mailpit) where a tier names none (as --postgres-image).
    #[arg(long, env = "RELATED_IMAGE_MAIL_SERVER", default_value = cro_provider_in_cluster::DEFAULT_MAIL_SERVER_IMAGE, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub mail_server_image: String,
    /// Default AWS region when a tier names none (the AWS SDK's standard
    /// chain also reads AWS_REGION and profiles).
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
    /// AWS calls per second the operator makes at most, per account,
    /// region and service (half of RDS's documented 12/s by default, so
    /// other tools of the account keep the rest). Calls over it wait.
    #[arg(long, env = "AWS_API_RATE", default_value_t = cro_provider_aws::Budget::default().rate)]
    pub aws_api_rate: f64,
    /// Read the watched namespaces' configuration as the Go operator did:
    /// a CR's own namespace's `cloud-resource-config` before the operator
    /// namespace's, and, with one watched namespace, its strategies
    /// ConfigMaps where the operator namespace has none or only the
    /// shipped defaults. Off by default: set it only where no tenant can
    /// write those namespaces' ConfigMaps (the Go layout, see
    /// docs/migration.md). Tiers read from there may not set roleArn or
    /// externalId.
    #[arg(long, env = "NAMESPACE_CONFIG", default_value_t = false, action = clap::ArgAction::Set)]
    pub namespace_config: bool,
    /// AWS calls that may go at once after a quiet period, per account,
    /// region and service.
    #[arg(long, env = "AWS_API_BURST", default_value_t = cro_provider_aws::Budget::default().burst)]
    pub aws_api_burst: u32,
    /// The VPC the cluster's pods run in, where AWS databases are placed
    /// when a tier names no subnet group; found from the subnets' cluster
    /// tag or the nodes' providerID when unset.
    #[arg(long, env = "AWS_VPC_ID")]
    pub aws_vpc_id: Option<String>,
    /// IAM path of the users the operator makes (BlobStorage, SMTP), so
    /// its own IAM policy can be limited to them; users made before keep
    /// theirs.
    #[arg(long, env = "IAM_USER_PATH", default_value = cro_provider_aws::DEFAULT_IAM_PATH)]
    pub iam_user_path: String,
    /// Managed policy ARN set as the permissions boundary of every IAM
    /// user the operator makes: whatever their policies say, they can
    /// never do more.
    #[arg(long, env = "IAM_PERMISSIONS_BOUNDARY")]
    pub iam_permissions_boundary: Option<String>,
    /// In STS mode (Secret `sts-credentials` with key `role_arn` in the
    /// operator's namespace, as the Go operator's), the token the role is
    /// assumed with: the pod's projected ServiceAccount token.
    #[arg(
        long,
        env = "STS_TOKEN_FILE",
        default_value = "/var/run/secrets/openshift/serviceaccount/token"
    )]
    pub sts_token_file: PathBuf,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Watch only these namespaces, comma-separated (default: all
    /// namespaces). The Go operator's WATCH_NAMESPACE works unchanged.
    #[arg(
        long = "watch-namespaces",
        visible_alias = "watch-namespace",
        env = "WATCH_NAMESPACE",
        value_delimiter = ','
    )]
    pub watch_namespaces: Vec<String>,
    /// Reconciles run at once per kind (and per watched namespace).
    /// Watching every namespace, the namespaces with reconciles running
    /// share three quarters of them evenly.
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Split the namespaces between this many groups of replicas, by a
    /// stable hash of the namespace name; each group elects its leader on
    /// its own Lease (`<lease-name>-shard-<index>-of-<count>`).
    #[arg(long, env = "SHARD_COUNT", default_value_t = 1)]
    pub shard_count: u32,
    /// Which group this replica is in, from 0 to --shard-count - 1.
    #[arg(long, env = "SHARD_INDEX", default_value_t = 0)]
    pub shard_index: u32,
    /// Elect a leader on a Lease so that only one replica reconciles; turn
    /// off only when a single replica runs.
    #[arg(long, env = "LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the leader-election Lease (default: the operator namespace).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_LEASE_NAME",
        default_value = "cloud-resource-operator"
    )]
    pub leader_election_lease_name: String,
    /// Seconds a leader's Lease stays valid without renewal: how long a
    /// replica waits before taking over from a leader that died.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15", value_parser = seconds)]
    pub leader_election_lease_duration: Duration,
    /// Seconds the leader keeps trying to renew before it stops reconciling.
    #[arg(long, env = "LEADER_ELECTION_RENEW_DEADLINE", default_value = "10", value_parser = seconds)]
    pub leader_election_renew_deadline: Duration,
    /// Seconds between election attempts and renewals.
    #[arg(long, env = "LEADER_ELECTION_RETRY_PERIOD", default_value = "2", value_parser = seconds)]
    pub leader_election_retry_period: Duration,
    /// Allow spec.secretRef.namespace to name another namespace. Off by
    /// default: anyone who can create a CR could overwrite Secrets there.
    #[arg(long, env = "ALLOW_CROSS_NAMESPACE_SECRETS")]
    pub allow_cross_namespace_secrets: bool,
    /// Seconds between looks at a complete cloud resource for changes made
    /// outside the operator (console, CLI): each costs a few read calls.
    /// Default: the Go operator's ENV_FORCE_RECONCILE_TIMEOUT (nanoseconds)
    /// when set, else 3600.
    #[arg(long, env = "RECHECK_INTERVAL", value_parser = positive_seconds)]
    pub recheck_interval: Option<Duration>,
    /// Seconds between connection checks of a complete Postgres or Redis,
    /// or an in-cluster BlobStorage or SMTPCredentialSet with a server of
    /// its own (the `Connectable` condition): a login from the operator's
    /// pod with the Secret's credentials, no cloud API call.
    #[arg(long, env = "CONNECTION_CHECK_INTERVAL", default_value = "300", value_parser = positive_seconds)]
    pub connection_check_interval: Duration,
    /// Seconds between readings of every AWS database's CloudWatch metrics
    /// (`cro_postgres_free_storage_average` and the other averages over
    /// that period): one GetMetricData call per 500 metrics per account
    /// and region. The Go operator's period, 5 minutes, by default.
    #[arg(long, env = "CLOUD_METRICS_INTERVAL", default_value = "300", value_parser = positive_seconds)]
    pub cloud_metrics_interval: Duration,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    pub metrics_address: std::net::SocketAddr,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--go-compatible-resources`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GoCompatible {
    Auto,
    True,
    False,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn parse_tag(s: &str) -> Result<(String, String), FlagError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(FlagError::Tag(s.to_string())),
    }
}

/// Whole seconds, as every duration flag is given.
fn seconds(s: &str) -> Result<Duration, FlagError> {
    s.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| FlagError::Seconds(s.to_string()))
}

/// Whole seconds, at least one: an interval of zero would spin.
fn positive_seconds(s: &str) -> Result<Duration, FlagError> {
    match seconds(s)? {
        d if d.is_zero() => Err(FlagError::Seconds(s.to_string())),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<RunArgs, clap::error::ErrorKind> {
        let argv = ["cloud-resource-operator", "run"].iter().chain(args);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Ok(*run),
            Ok(_) => unreachable!("`run` parses as Command::Run"),
            Err(e) => Err(e.kind()),
        }
    }

    #[test]
    fn duration_flags_are_whole_seconds() {
        let defaults = run(&[]).expect("the defaults parse");
        assert_eq!(
            defaults.leader_election_lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!(defaults.connection_check_interval, Duration::from_secs(300));
        assert_eq!(defaults.recheck_interval, None);
        let given = run(&["--recheck-interval", "90"]).expect("seconds parse");
        assert_eq!(given.recheck_interval, Some(Duration::from_secs(90)));
        assert!(run(&["--recheck-interval", "0"]).is_err());
        assert!(run(&["--recheck-interval", "1m"]).is_err());
    }

    #[test]
    fn an_empty_in_cluster_image_is_refused() {
        let defaults = run(&[]).expect("the defaults parse");
        assert_eq!(
            (
                defaults.cluster.postgres_image,
                defaults.cluster.redis_image,
                defaults.cluster.object_store_image,
                defaults.cluster.mail_server_image,
            ),
            (
                cro_provider_in_cluster::DEFAULT_POSTGRES_IMAGE.to_string(),
                cro_provider_in_cluster::DEFAULT_REDIS_IMAGE.to_string(),
                cro_provider_in_cluster::DEFAULT_OBJECT_STORE_IMAGE.to_string(),
                cro_provider_in_cluster::DEFAULT_MAIL_SERVER_IMAGE.to_string(),
            )
        );
        assert!(run(&["--postgres-image", ""]).is_err());
        assert!(run(&["--redis-image", ""]).is_err());
        assert!(run(&["--object-store-image", ""]).is_err());
        assert!(run(&["--mail-server-image", ""]).is_err());
    }

    /// Completion scripts know every subcommand and the flags that pick
    /// a cluster.
    #[test]
    fn completions_offer_the_subcommands_and_the_cluster_flags() {
        for shell in [clap_complete::Shell::Bash, clap_complete::Shell::Zsh] {
            let mut script = Vec::new();
            crate::cli::offline::completions(shell, &mut script);
            let script = String::from_utf8_lossy(&script);
            for want in ["status", "plan", "validate", "--kubeconfig", "--context"] {
                assert!(script.contains(want), "{shell:?} completions lack {want}");
            }
        }
    }

    /// The chart's values.yaml says which variable each `operator` value
    /// sets and, where it says what an empty value means, that is the
    /// flag's default (a comment said `cluster.local` where the code
    /// leaves the domain out).
    #[test]
    fn the_charts_operator_values_name_real_variables_and_their_defaults() {
        use clap::CommandFactory;
        let values = include_str!("../../deploy/helm/values.yaml");
        let section = values
            .split("\noperator:\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .expect("values.yaml has an operator section");
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("a run subcommand");
        let by_env = |env: &str| {
            run.get_arguments()
                .find(|a| a.get_env().is_some_and(|e| e == env))
        };
        let mut checked = 0;
        for comment in section
            .lines()
            .filter_map(|l| l.split_once("# ").map(|(_, c)| c))
        {
            let names = comment.split(|c: char| !(c.is_ascii_uppercase() || c == '_'));
            // `RELATED_IMAGE_POSTGRES / _REDIS`: a suffix is no name.
            let names = names.filter(|n| n.contains('_') && !n.starts_with('_'));
            for env in names.map(|n| n.trim_end_matches('_')) {
                let arg = by_env(env).unwrap_or_else(|| {
                    panic!("values.yaml names {env}, which `run` does not read")
                });
                let Some(empty) = comment.split_once(" when empty").map(|(before, _)| before)
                else {
                    continue;
                };
                let said = empty.rsplit(['(', ' ']).next().unwrap_or_default();
                // "the operator's default": no value claimed.
                if said == "default" {
                    continue;
                }
                match arg.get_default_values().first() {
                    Some(default) => assert_eq!(
                        said,
                        default.to_string_lossy(),
                        "values.yaml on {env}'s empty value"
                    ),
                    // A default the code works out: the flag's help says it.
                    None => {
                        let help =
                            (arg.get_long_help().or(arg.get_help())).map(ToString::to_string);
                        let help = help.unwrap_or_default();
                        assert!(
                            help.contains(said),
                            "values.yaml says {env} is {said} when empty; the flag's help does not: {help}"
                        );
                    }
                }
                checked += 1;
            }
        }
        assert!(
            checked >= 1,
            "no default checked: the comments' form changed"
        );
    }

    /// docs/operations.md's table is where users look for a flag: each
    /// flag of `run` and its environment variable is there.
    #[test]
    fn every_flag_of_run_is_in_the_operations_guide() {
        use clap::CommandFactory;
        let doc = include_str!("../../docs/operations.md");
        let table = doc
            .split("## Flags and environment variables")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/operations.md has a Flags and environment variables section");
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("a run subcommand");
        for arg in run.get_arguments() {
            if let Some(long) = arg.get_long().filter(|l| *l != "help") {
                assert!(table.contains(&format!("`--{long}")), "--{long}");
            }
            if let Some(env) = arg.get_env() {
                let env = env.to_string_lossy();
                assert!(table.contains(&format!("`{env}`")), "{env}");
            }
        }
    }
}
