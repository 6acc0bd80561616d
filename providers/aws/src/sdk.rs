//! Building AWS SDK clients: the standard credential chain (env, web
//! identity/IRSA, profile), the region, an endpoint override
//! (`AWS_ENDPOINT_URL`, read by the SDK) so tests run against a local
//! emulator, and per-tier roles assumed through STS.

use aws_config::{BehaviorVersion, Region, SdkConfig, sts::AssumeRoleProvider};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use cro_provider_api::ProviderError;

/// Where and how to reach AWS.
#[derive(Clone, Debug, Default)]
pub struct AwsSettings {
    /// Region for tiers that name none; when `None`, the standard chain
    /// (`AWS_REGION`, profile) decides.
    pub region: Option<String>,
    /// Calls per second and burst per account, region and service.
    pub budget: crate::Budget,
    /// OpenShift's STS mode, as the Go operator detects it: its calls run
    /// as this role, and BlobStorage gets no IAM user.
    pub sts: Option<Sts>,
    /// What says which VPC the cluster runs in.
    pub vpc: VpcHint,
    /// Where the IAM users the operator makes go, and their boundary.
    pub iam_users: IamUsers,
    /// Access keys read from outside the standard chain (the Cloud
    /// Credential Operator's Secret); they win over it and over STS.
    pub keys: Option<ReadKeys>,
    /// Asked right before each request is sent (see
    /// [`cro_provider_api::fence`]).
    pub fence: cro_provider_api::Fence,
    /// New resources as the Go operator made them, so it can take them
    /// back: a Redis without in-transit encryption (so no AUTH token)
    /// where the tier does not say (`defaultInTransitEncryption`,
    /// pkg/providers/aws/provider_redis.go), a bucket's key from the Cloud
    /// Credential Operator where it runs (`ReconcileBucketOwnerCredentials`,
    /// provider_blobstorage.go).
    pub go_compatible: bool,
}

/// An access key pair read from a Kubernetes Secret or elsewhere.
pub struct AccessKeys {
    pub id: String,
    pub secret: String,
}

type KeysFuture = std::pin::Pin<Box<dyn Future<Output = Result<AccessKeys, ProviderError>> + Send>>;

/// Access keys the provider reads through a function it is given (the
/// operator reads the Secret; the provider knows no Kubernetes). Read when
/// the SDK first needs them, and again every [`KEYS_REREAD`], so a key
/// the Cloud Credential Operator rotates is taken up without a restart.
#[derive(Clone)]
pub struct ReadKeys {
    /// Where they come from, for logs and errors: `Secret ns/name`.
    pub source: String,
    pub read: std::sync::Arc<dyn Fn() -> KeysFuture + Send + Sync>,
}

impl std::fmt::Debug for ReadKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadKeys({})", self.source)
    }
}

/// How long keys read through [`ReadKeys`] are used before being read again.
pub const KEYS_REREAD: std::time::Duration = std::time::Duration::from_secs(60);

impl aws_credential_types::provider::ProvideCredentials for ReadKeys {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(async move {
            use aws_credential_types::provider::error::CredentialsError;
            let keys = (self.read)().await.map_err(|e| {
                CredentialsError::provider_error(format!(
                    "reading AWS keys from {}: {e}",
                    self.source
                ))
            })?;
            let expiry = std::time::SystemTime::now() + KEYS_REREAD;
            Ok(aws_credential_types::Credentials::new(
                keys.id,
                keys.secret,
                None,
                Some(expiry),
                "cloud-credential-operator-secret",
            ))
        })
    }
}

/// The IAM path new users are made under (so the operator's own policy
/// can be limited to `arn:aws:iam::<account>:user<path>*`) and the managed
/// policy that bounds what they may ever be granted. Both are set when a
/// user is made; users made before keep theirs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IamUsers {
    pub path: String,
    pub permissions_boundary: Option<String>,
}

impl Default for IamUsers {
    fn default() -> Self {
        IamUsers {
            path: DEFAULT_IAM_PATH.into(),
            permissions_boundary: None,
        }
    }
}

/// An IAM flag IAM would refuse, named.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum IamFlagError {
    #[error(
        "--iam-user-path (IAM_USER_PATH) {0:?} is not an IAM path: it must be \"/\" or start and end with \"/\" with printable ASCII between, at most 512 characters (e.g. {DEFAULT_IAM_PATH})"
    )]
    Path(String),
    #[error(
        "--iam-permissions-boundary (IAM_PERMISSIONS_BOUNDARY) {0:?} is not a managed policy ARN (arn:aws:iam::<account>:policy/<name>)"
    )]
    Boundary(String),
}

/// The default `--iam-user-path`.
pub const DEFAULT_IAM_PATH: &str = "/cloud-resource-operator/";

impl IamUsers {
    /// Refuses a path or boundary IAM would refuse, naming the flag: a
    /// path is `/` or `/` + printable ASCII + `/`, at most 512 characters
    /// (CreateUser, IAM API reference); a boundary is a managed policy ARN.
    pub fn new(path: &str, permissions_boundary: Option<&str>) -> Result<Self, IamFlagError> {
        let printable = |c: char| ('\u{21}'..='\u{7e}').contains(&c);
        let path_ok = path == "/"
            || (path.len() <= 512
                && path.len() > 2
                && path.starts_with('/')
                && path.ends_with('/')
                && path.chars().all(printable));
        if !path_ok {
            return Err(IamFlagError::Path(path.into()));
        }
        let boundary = permissions_boundary.filter(|b| !b.is_empty());
        if let Some(b) = boundary
            && !(b.starts_with("arn:") && b.contains(":iam::") && b.contains(":policy/"))
        {
            return Err(IamFlagError::Boundary(b.into()));
        }
        Ok(IamUsers {
            path: path.into(),
            permissions_boundary: boundary.map(str::to_string),
        })
    }
}

/// What the operator knows of the cluster's VPC before asking EC2: the VPC
/// given outright (`--aws-vpc-id`), and some nodes' EC2 instances.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VpcHint {
    pub vpc_id: Option<String>,
    pub node_instances: Vec<String>,
    /// The cluster's pod and service networks (OpenShift's Network
    /// "cluster"), which a new standalone VPC's default block avoids, as
    /// the Go operator's getNonOverlappingDefaultCIDR does.
    pub pod_and_service_blocks: Vec<String>,
}

/// The EC2 instance of a node's `spec.providerID` on AWS
/// (`aws:///<zone>/<instance>`, or `aws:///<instance>`).
pub fn instance_of_provider_id(provider_id: &str) -> Option<String> {
    let rest = provider_id.strip_prefix("aws://")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then(|| id.to_string())
}

/// The Go operator's STS mode (credentials_sts_manager.go): the role in
/// Secret `sts-credentials` (key `role_arn`) of the operator's namespace,
/// assumed with the pod's projected ServiceAccount token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sts {
    pub role_arn: String,
    pub token_file: std::path::PathBuf,
}

/// The session name the Go operator assumes its STS role with.
const STS_SESSION: &str = "Red-Hat-cloud-resources-operator";

/// How long a call may wait for a connection
/// ([`crate::fenced_https::CONNECT_TIMEOUT`]), and for AWS's answer once
/// sent. An answer lost on a live connection would otherwise hold its
/// reconcile forever; after this the SDK retries, and a retry that meets
/// what the lost call did is answered by looking (see `errors::created`).
/// The call budget's own wait comes before the request is sent, so it
/// does not count.
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The SDK configuration from the standard chain, in `region` when set;
/// with `keys` when given; in STS mode, with the credentials of its role.
pub async fn sdk_config(
    region: Option<&str>,
    sts: Option<&Sts>,
    keys: Option<&ReadKeys>,
) -> SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(crate::fenced_https::CONNECT_TIMEOUT)
        .read_timeout(ANSWER_TIMEOUT)
        .build();
    // A call waiting in the budget (see `budget`) has begun its attempt but
    // not yet sent its body: upload stall protection (5 s of no body sent)
    // would fail it as a `DispatchFailure` "minimum throughput" timeout
    // whenever the budget makes it wait longer, as it does under a backlog.
    // Request bodies here are small forms; the answer timeout bounds them.
    let stalls = aws_config::stalled_stream_protection::StalledStreamProtectionConfig::enabled()
        .upload_enabled(false)
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        .stalled_stream_protection(stalls);
    let region = region.map(|r| Region::new(r.to_string()));
    if let Some(region) = &region {
        loader = loader.region(region.clone());
    }
    if let Some(keys) = keys {
        loader = loader.credentials_provider(keys.clone());
    } else if let Some(sts) = sts {
        use aws_config::{
            provider_config::ProviderConfig,
            web_identity_token::{StaticConfiguration, WebIdentityTokenCredentialsProvider},
        };
        // STS needs a region to be reached; with none configured, the
        // standard chain's (AWS_REGION, profile), as the SDK clients use.
        let provider_config = match region {
            Some(region) => ProviderConfig::default().with_region(Some(region)),
            None => ProviderConfig::with_default_region().await,
        }
        .with_http_client(crate::fenced_https::credentials_client());
        let provider = WebIdentityTokenCredentialsProvider::builder()
            .configure(&provider_config)
            .static_configuration(StaticConfiguration {
                web_identity_token_file: sts.token_file.clone(),
                role_arn: sts.role_arn.clone(),
                session_name: STS_SESSION.into(),
            })
            .build();
        loader = loader.credentials_provider(provider);
    }
    loader.load().await
}

/// `base` with the credentials of `role_arn`, assumed with `base`'s own
/// credentials. The role is assumed once here, so a role that cannot be
/// assumed fails the CR at once, naming the role; the SDK's identity cache
/// then refreshes the credentials before they expire.
pub async fn assume_role(
    base: &SdkConfig,
    role_arn: &str,
    external_id: Option<&str>,
) -> Result<SdkConfig, ProviderError> {
    let mut builder = AssumeRoleProvider::builder(role_arn)
        .session_name("cloud-resource-operator")
        .configure(
            &base
                .to_builder()
                .http_client(crate::fenced_https::credentials_client())
                .build(),
        );
    if let Some(id) = external_id {
        builder = builder.external_id(id);
    }
    let provider = builder.build().await;
    if let Err(e) = provider.provide_credentials().await {
        return Err(crate::errors::assume_role_error(role_arn, e));
    }
    Ok(base
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(provider))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iam_paths_and_boundaries_iam_refuses_are_refused_at_start() {
        let boundary = "arn:aws:iam::123456789012:policy/cro-boundary";
        for path in ["/", DEFAULT_IAM_PATH, "/a/b/"] {
            assert!(IamUsers::new(path, Some(boundary)).is_ok(), "{path}");
        }
        let long = format!("/{}/", "a".repeat(511));
        for path in ["", "//", "cro/", "/cro", "/with space/", long.as_str()] {
            let e = (IamUsers::new(path, None).err()).map_or(String::new(), |e| e.to_string());
            assert!(e.contains("--iam-user-path"), "{path:?}: {e}");
        }
        let e = (IamUsers::new("/", Some("cro-boundary")).err())
            .map_or(String::new(), |e| e.to_string());
        assert!(e.contains("--iam-permissions-boundary"), "{e}");
        // An empty value (an unset variable in a manifest) is no boundary.
        assert_eq!(
            IamUsers::new("/", Some("")).map(|u| u.permissions_boundary),
            Ok(None)
        );
    }
}
