//! What the operator and its providers share: provider-neutral requests,
//! outcomes and the provider traits. Providers never see CRD types or
//! ConfigMaps; the operator never sees provider-specific strategy formats.

pub mod backoff;
mod change;
pub mod credentials;
pub mod fence;
pub mod fenced_socket;
pub mod https;
mod identifier;
pub mod memory;
pub mod object_store;
pub mod proxy;

pub use change::{Adoption, Change, ChangePolicy, Timing, plan_hash};
pub use credentials::CredentialsStore;
pub use fence::Fence;
pub use memory::Memory;
pub use object_store::{AccessKey, ObjectStore, StoreAccess};

pub use identifier::{
    DEFAULT_IDENTIFIER_LENGTH, IdentifierRules, cloud_identifier, separate_identifier, shorten,
    snapshot_identifier, timestamped_identifier,
};

use std::collections::BTreeMap;

/// The label on everything this operator (or a provider) creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "cloud-resource-operator";
/// Marks an object created for the CR with this uid.
pub const OWNER_UID_LABEL: &str = "cro.integreatly.org/owner-uid";

/// The kinds of backing service a provider can be asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    Postgres,
    Redis,
    BlobStorage,
    Smtp,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 4] = [
        ResourceKind::Postgres,
        ResourceKind::Redis,
        ResourceKind::BlobStorage,
        ResourceKind::Smtp,
    ];

    /// The kind whose configuration key is `key`.
    pub fn from_config_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.config_key() == key)
    }

    /// The custom resource kind that asks for this kind of service.
    pub fn cr_kind(self) -> &'static str {
        match self {
            ResourceKind::Postgres => "Postgres",
            ResourceKind::Redis => "Redis",
            ResourceKind::BlobStorage => "BlobStorage",
            ResourceKind::Smtp => "SMTPCredentialSet",
        }
    }

    /// The key used for this kind in the configuration ConfigMaps
    /// (`cloud-resource-config` and `cloud-resources-<provider>-strategies`).
    pub fn config_key(self) -> &'static str {
        match self {
            ResourceKind::Postgres => "postgres",
            ResourceKind::Redis => "redis",
            ResourceKind::BlobStorage => "blobstorage",
            ResourceKind::Smtp => "smtpcredentials",
        }
    }
}

/// The Kubernetes object a request is for, so providers can set owner
/// references on what they create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The `ownerReferences` entry that makes this object the controller of
    /// another: deleted with it, and its changes wake the owner. Without
    /// `blockOwnerDeletion`: setting it needs `update` on the owner kind's
    /// `finalizers` subresource where OwnerReferencesPermissionEnforcement
    /// admits writes (OpenShift enables it), and the operator's own
    /// finalizer already orders a CR's deletion after its cleanup.
    pub fn controller_reference(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
        })
    }
}

/// On an object the operator made for a CR deleted under
/// `integreatly.org/deletion-policy: retain`: `<namespace>/<Kind>/<name>`
/// of that CR, in place of its owner reference and owner-uid label, so
/// deleting the CR deleted nothing and a CR of the same kind, namespace and
/// name takes the object (and the cloud resource it holds the keys to)
/// over again.
pub const RELEASED_FROM_ANNOTATION: &str = "cro.integreatly.org/released-from";

impl Owner {
    /// The [`RELEASED_FROM_ANNOTATION`] value of this owner in `namespace`.
    pub fn released_from(&self, namespace: &str) -> String {
        format!("{namespace}/{}/{}", self.kind, self.name)
    }

    /// Whether `annotations` say the object was released by an earlier CR
    /// of this owner's kind and name in `namespace` (the CR's namespace).
    pub fn takes_back(
        &self,
        namespace: &str,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> bool {
        annotations
            .and_then(|a| a.get(RELEASED_FROM_ANNOTATION))
            .is_some_and(|from| *from == self.released_from(namespace))
    }
}

/// An Opaque Secret to apply, with `metadata` and string `data` (encoded as
/// the API server stores it, so a live Secret compares equal).
pub fn opaque_secret<'a>(
    metadata: serde_json::Value,
    data: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> serde_json::Value {
    let data: BTreeMap<&str, String> = data
        .into_iter()
        .map(|(k, v)| (k, data_encoding::BASE64.encode(v.as_bytes())))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": data,
    })
}

/// A new password: 32 random letters and digits (no character a
/// connection string, shell or YAML would need to escape).
pub fn random_password() -> String {
    use rand::{RngExt, distr::Alphanumeric};
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

/// Spec knobs a provider may honour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub apply_immediately: bool,
    pub maintenance_window: bool,
    /// How the tier's changes reach the resource (`changePolicy`).
    pub change_policy: ChangePolicy,
    /// The plan hash a person approved (`integreatly.org/approve-plan`).
    pub approved_plan: Option<String>,
    /// The adoption hash a person approved (`integreatly.org/adopt`).
    pub approved_adoption: Option<String>,
    /// Node type / size override (Redis).
    pub size: Option<String>,
    /// Set when this reconcile is a recheck (or the first after a restart)
    /// of a complete CR: how old an observation of its resource may be. A
    /// provider may then judge it from a batched observation shared with
    /// other resources instead of reading it on its own. `None`: read it
    /// now (it is changing, or someone changed the CR).
    pub observed_within: Option<std::time::Duration>,
    /// How often the operator looks at a complete CR again. What changes
    /// slowly (a database's daily automated snapshots) is observed, in
    /// one batch for every resource, no more often than that.
    pub recheck_interval: std::time::Duration,
    /// Set on the operator's first look at a complete CR since it started
    /// (with `observed_within`): checks that no batched observation covers
    /// (an IAM user's access keys, listed one user at a time) may wait for
    /// the next recheck, which the operator spreads over the recheck
    /// interval, so a restart over N resources is not N calls at once.
    pub defer_unbatched: bool,
    /// Rotate the credentials, once per distinct value: a token the
    /// provider keeps with them, and reports in `Provisioned::rotated` once
    /// the new credentials are in place.
    pub rotate_credentials: Option<String>,
    /// How long a replaced access key keeps working after a rotation.
    pub rotation_grace: std::time::Duration,
    /// The CR is `complete` with no server version: an in-cluster
    /// BlobStorage or SMTPCredentialSet whose Secret is a placeholder a
    /// person may have filled in, which a tier's server must not replace.
    pub complete_as_placeholder: bool,
}

/// One request to create or converge a backing service.
#[derive(Clone, Debug)]
pub struct ResourceRequest {
    pub kind: ResourceKind,
    pub namespace: String,
    pub name: String,
    pub owner: Owner,
    /// Cloud identifier (`<clusterID>-<namespace>-<name>`, shortened).
    pub identifier: String,
    /// The identifier recorded on the CR (annotation `resourceIdentifier`)
    /// once the resource was created: if it is set and the resource is gone,
    /// the provider reports that rather than silently creating a new one.
    pub recorded_identifier: Option<String>,
    /// Create the resource from this cloud snapshot (`restoreFromSnapshot`,
    /// resolved by the operator); only when it does not exist yet.
    pub restore_from_snapshot: Option<String>,
    /// When deleting: the identifier of the final snapshot, unique to this
    /// deletion (a resource of the same name created and deleted again
    /// gets another one).
    pub final_snapshot_identifier: Option<String>,
    /// The tier's name (e.g. `production`, where providers default to
    /// multi-AZ) and its strategy JSON, exactly as configured; parsed by
    /// the provider.
    pub tier: String,
    pub strategy: serde_json::Value,
    /// The same tier's `_network` strategy of the provider's strategies
    /// ConfigMap (the Go operator's: the CIDR of the network databases get),
    /// when it has one.
    pub network: Option<serde_json::Value>,
    /// Tags/labels for everything created.
    pub tags: BTreeMap<String, String>,
    /// The tag (one of `tags`) that marks a cloud resource this cluster
    /// made: a resource found without it (and not recorded on the CR) was
    /// made by someone else and is only adopted when a person approves.
    pub owner_tag: (String, String),
    /// The tag binding a resource to the CR's namespace
    /// (`<prefix>resource-namespace`): written on what the operator makes,
    /// never added to what was made before (so a takeover changes
    /// nothing). A resource of this cluster carrying it with another
    /// namespace is another CR's, whatever its identifier.
    pub namespace_tag: (String, String),
    /// The keys of the tags in `tags` that say whose a resource is.
    pub tag_keys: TagKeys,
    pub options: Options,
}

/// The keys of the tags that say whose a cloud resource is, under the
/// operator's tag key prefix: read by key, never by a suffix that another
/// tag (the Infrastructure's, `--extra-tags`) could end with too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagKeys {
    /// `<prefix>clusterID`: made by this cluster.
    pub owner: String,
    /// `<prefix>resource-namespace`: for a CR of this namespace.
    pub namespace: String,
    /// `<prefix>resource-name`: for the CR of this name.
    pub name: String,
}

impl TagKeys {
    pub fn new(prefix: &str) -> Self {
        TagKeys {
            owner: format!("{prefix}clusterID"),
            namespace: format!("{prefix}resource-namespace"),
            name: format!("{prefix}resource-name"),
        }
    }

    /// Owner, namespace and name, in that order.
    pub fn all(&self) -> [&str; 3] {
        [&self.owner, &self.namespace, &self.name]
    }
}

impl ResourceRequest {
    /// The tags a resource is made with: `tags` and the namespace binding.
    pub fn creation_tags(&self) -> BTreeMap<String, String> {
        let mut tags = self.tags.clone();
        let (key, value) = &self.namespace_tag;
        if !key.is_empty() {
            tags.insert(key.clone(), value.clone());
        }
        tags
    }

    /// A request for checking a tier's `strategy` offline (no cluster, no
    /// cloud): what providers build from it is validated, never applied.
    pub fn offline(kind: ResourceKind, strategy: serde_json::Value) -> Self {
        let name = "offline-check".to_string();
        ResourceRequest {
            kind,
            namespace: name.clone(),
            name: name.clone(),
            owner: Owner {
                api_version: "integreatly.org/v1alpha1".into(),
                kind: kind.cr_kind().into(),
                name: name.clone(),
                uid: String::new(),
            },
            identifier: name,
            recorded_identifier: None,
            restore_from_snapshot: None,
            final_snapshot_identifier: None,
            tier: String::new(),
            strategy,
            network: None,
            tags: BTreeMap::new(),
            owner_tag: Default::default(),
            namespace_tag: Default::default(),
            tag_keys: TagKeys::default(),
            options: Options::default(),
        }
    }
}

/// One request to snapshot a backing service.
#[derive(Clone, Debug)]
pub struct SnapshotRequest {
    /// Kind of the resource snapshotted (Postgres or Redis).
    pub kind: ResourceKind,
    pub namespace: String,
    pub name: String,
    pub owner: Owner,
    /// Name of the resource's CR (`spec.resourceName`).
    pub resource_name: String,
    /// Identifier of the resource to snapshot: what its CR records, never
    /// a computed one (a tenant can remove the annotation; the computed
    /// identifier may be another namespace's resource). `None` only when
    /// deleting, which needs just the snapshot's own identifier.
    pub resource_identifier: Option<String>,
    /// The identifier the operator computes for the resource's CR (its
    /// namespace and name): a recorded one must be the CR's own.
    pub resource_default_identifier: String,
    /// The identifier the resource's CR gets when its default one is
    /// another CR's resource (`separate_identifier`): recorded on it then.
    pub resource_separate_identifier: String,
    /// Identifier of the snapshot itself (`status.snapshotID`: the Go
    /// operator's `<clusterID>-<namespace>-<name>-<time>`, shortened, and
    /// for snapshots this operator names, a hash of the CR's UID after it).
    pub identifier: String,
    /// The parent resource's tier strategy (where its region is).
    pub strategy: serde_json::Value,
    pub tags: BTreeMap<String, String>,
    /// The keys of the tags in `tags` that say whose a snapshot is.
    pub tag_keys: TagKeys,
}

/// Connection details a provider hands back; written verbatim as the data
/// of the output Secret. Values are secrets: never log them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnectionDetails(pub BTreeMap<String, String>);

impl ConnectionDetails {
    /// The details of these keys and values.
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        ConnectionDetails(
            (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl std::fmt::Debug for ConnectionDetails {
    // Only the keys: the values are credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The result of one provider call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// Usable; `T` is what the operator publishes.
    Ready(T),
    /// Still converging; the reason is shown in `status.message`.
    InProgress(String),
    /// Cannot proceed without a change from a person; the reason says what.
    Failed(String),
}

/// The condition types the operator and its providers report in a CR's
/// `status.conditions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    Ready,
    UpToDate,
    Adopted,
    Connectable,
    SnapshotsScheduled,
    CredentialsRotated,
    AwsPermissions,
    SendingIdentityVerified,
    TierUnderstood,
}

impl ConditionType {
    pub const ALL: [ConditionType; 9] = [
        ConditionType::Ready,
        ConditionType::UpToDate,
        ConditionType::Adopted,
        ConditionType::Connectable,
        ConditionType::SnapshotsScheduled,
        ConditionType::CredentialsRotated,
        ConditionType::AwsPermissions,
        ConditionType::SendingIdentityVerified,
        ConditionType::TierUnderstood,
    ];

    /// The CamelCase name written in `status.conditions[].type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::UpToDate => "UpToDate",
            ConditionType::Adopted => "Adopted",
            ConditionType::Connectable => "Connectable",
            ConditionType::SnapshotsScheduled => "SnapshotsScheduled",
            ConditionType::CredentialsRotated => "CredentialsRotated",
            ConditionType::AwsPermissions => "AWSPermissions",
            ConditionType::SendingIdentityVerified => "SendingIdentityVerified",
            ConditionType::TierUnderstood => "TierUnderstood",
        }
    }

    /// The type a written condition names, when it is one of these.
    pub fn parse(name: &str) -> Option<ConditionType> {
        ConditionType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl std::fmt::Display for ConditionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition a provider reports besides `Ready` (e.g. whether an SES
/// sending identity is verified), shown in the CR's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: ConditionType,
    pub status: bool,
    /// CamelCase reason.
    pub reason: String,
    pub message: String,
}

/// What a provider reports about a resource it reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioned {
    pub outcome: Outcome<ConnectionDetails>,
    /// Concrete provider, e.g. `aws-rds`, `openshift-postgres-template`.
    pub provider: String,
    /// Engine version, when known.
    pub version: Option<String>,
    /// The cloud identifier, once the resource exists (recorded on the CR).
    pub identifier: Option<String>,
    /// When to look again although nothing changed (cloud resources send
    /// no events); `None` leaves it to watch events.
    pub recheck_after: Option<std::time::Duration>,
    /// Conditions besides `Ready`.
    pub conditions: Vec<Condition>,
    /// Differences from the tier that are not applied yet.
    pub pending: Vec<Change>,
    /// The live resource exists but was not made by this cluster, and no
    /// person approved adopting it: nothing was changed.
    pub adoption: Option<Adoption>,
    /// A pass with `maintenanceWindow` set reached the usable resource and
    /// requested what the window allowed (perhaps nothing): the CR's
    /// `spec.maintenanceWindow` goes back to false, as the Go operator sets
    /// it after every such pass, so the next tier change waits for the next
    /// window.
    pub maintenance_window_used: bool,
    /// The rotation token (`Options::rotate_credentials`) the credentials
    /// in `outcome` answer.
    pub rotated: Option<String>,
    /// What the cloud says of the resource, when it was looked at.
    pub health: Option<Health>,
}

/// The cloud's own view of a database, for the Go operator's info and
/// availability gauges (`cro_postgres_info`, `cro_postgres_available`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// The service's status word (`available`, `backing-up`, …); empty
    /// when the resource does not exist.
    pub status: String,
    /// Whether that status serves clients, as the Go operator judges it.
    pub available: bool,
    /// Storage allocated to it (RDS), in bytes.
    pub allocated_storage_bytes: Option<i64>,
    /// Memory of its instance class (RDS), in bytes.
    pub max_memory_bytes: Option<i64>,
    /// Maintenance the cloud has pending for it, when that was read.
    pub maintenance: Option<Vec<Maintenance>>,
    /// Its snapshots the provider tags for it, when it looked at them: per
    /// snapshot, 1 while the cloud could not find it to tag (one not
    /// available yet), else 0. The Go operator's
    /// `cro_redis_snapshot_not_found_<name>` series, labelled as it labels
    /// them (`TagElasticacheNode`, pkg/providers/aws/provider_redis.go)
    /// but `clusterID`.
    pub snapshots_not_found: Option<Vec<Series>>,
}

/// One series of a gauge whose labels the provider names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: i64,
}

/// Maintenance the cloud applies to a database on its own schedule: an
/// RDS pending maintenance action, an ElastiCache service update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Maintenance {
    /// The action's or update's name (`system-update`,
    /// `elasticache-20240116-001`).
    pub name: String,
    pub description: String,
    /// When it is due (Unix seconds), if the cloud says.
    pub due: Option<i64>,
    /// The Go operator's labels of its maintenance gauge but `clusterID`
    /// (`setPostgresServiceMaintenanceMetric`,
    /// `setRedisServiceMaintenanceMetric`), and its value.
    pub labels: Vec<(String, String)>,
    pub value: i64,
}

impl Provisioned {
    /// A report of `provider` with nothing but `outcome` known yet.
    pub fn new(provider: &str, outcome: Outcome<ConnectionDetails>) -> Self {
        Provisioned {
            outcome,
            provider: provider.into(),
            version: None,
            identifier: None,
            recheck_after: None,
            conditions: Vec::new(),
            pending: Vec::new(),
            adoption: None,
            maintenance_window_used: false,
            rotated: None,
            health: None,
        }
    }
}

/// What a provider reports about a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshotted {
    /// Ready carries the snapshot's cloud identifier.
    pub outcome: Outcome<String>,
}

/// Progress of a deletion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    Done,
    InProgress(String),
    /// Nothing was deleted: deleting would lose data the tier does not
    /// allow to be lost (a non-empty bucket without `forceBucketDeletion`).
    /// The CR's objects are released as under the retain deletion policy;
    /// the reason says what was kept and why.
    Keep(String),
}

/// What a failed provider call needs before it can succeed; the reconcile
/// skeleton decides retries from this, never from message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The API asked for fewer calls: retried with backoff, never fails a CR.
    Throttled,
    /// Network, 5xx, conflicts, a resource mid-change: retrying may help.
    Transient,
    /// AWS answered that a create's resource exists, and a look does not
    /// find it yet (its reads are eventually consistent): looked at again
    /// within seconds, without this object's failure backoff growing.
    NotVisibleYet,
    /// Needs a person (invalid parameter or combination, access denied,
    /// quota, unsupported in the region): the message says what to change.
    /// Tried again when the CR or its configuration changes, or after a
    /// long delay.
    Permanent,
    /// The tier's strategy does not parse; the message names the field.
    InvalidStrategy,
    /// The resource's namespace is being deleted and refuses new objects:
    /// nothing to do but wait for the CR's own deletion.
    NamespaceTerminating,
    /// The Kubernetes API server did not answer or could not serve
    /// (connection refused or reset, 5xx): not this resource's fault, every
    /// resource waits for it alike, so it is retried soon after it is back.
    ApiServerUnavailable,
}

/// A provider call that failed for a reason other than the resource's state
/// (network, API errors, a malformed strategy).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    kind: ErrorKind,
    message: String,
    /// The cloud API's own error code (e.g. `InvalidSubnetID.NotFound`),
    /// for callers that decide by it rather than by the message.
    code: Option<String>,
    /// When the provider knows the retry will not help before then.
    retry_in: Option<std::time::Duration>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            message: message.into(),
            code: None,
            retry_in: None,
            source: None,
        }
    }

    pub fn invalid_strategy(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidStrategy, message)
    }

    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transient, message)
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permanent, message)
    }

    /// Keeps the error that caused this one (shown by `{:#}`-style error
    /// reporters and tracing, never parsed).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Keeps the cloud API's error code.
    pub fn with_code(mut self, code: Option<&str>) -> Self {
        self.code = code.map(str::to_string);
        self
    }

    /// Retried after `wait` rather than after the object's failure backoff.
    pub fn retry_in(mut self, wait: std::time::Duration) -> Self {
        self.retry_in = Some(wait);
        self
    }

    /// When to retry, if the provider said (see [`Self::retry_in`]).
    pub fn retry_wait(&self) -> Option<std::time::Duration> {
        self.retry_in
    }

    /// The cloud API's error code, when the error came from one.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` in front of its message.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// Short stable label for metrics and Events.
    pub fn label(&self) -> &'static str {
        match self.kind {
            ErrorKind::Throttled => "throttled",
            ErrorKind::Transient => "provider_api",
            ErrorKind::NotVisibleYet => "not_visible_yet",
            ErrorKind::Permanent => "provider_permanent",
            ErrorKind::InvalidStrategy => "invalid_strategy",
            ErrorKind::NamespaceTerminating => "namespace_terminating",
            ErrorKind::ApiServerUnavailable => "kube_unavailable",
        }
    }

    /// Whether retrying without a change can help.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Throttled
                | ErrorKind::Transient
                | ErrorKind::NotVisibleYet
                | ErrorKind::ApiServerUnavailable
        )
    }
}

/// A gauge the Go operator fills from the cloud's monitoring, per
/// database (controllers/cloudmetrics/cloudmetrics_controller.go,
/// `postgresGaugeMetrics` and `redisGaugeMetrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloudGauge {
    pub name: &'static str,
    pub kind: ResourceKind,
    pub help: &'static str,
}

/// Every gauge of cloud monitoring data, with the Go operator's names and
/// help.
pub const CLOUD_GAUGES: [CloudGauge; 7] = [
    CloudGauge {
        name: "cro_postgres_free_storage_average",
        kind: ResourceKind::Postgres,
        help: "The amount of available storage space. Units: Bytes",
    },
    CloudGauge {
        name: "cro_postgres_cpu_utilization_average",
        kind: ResourceKind::Postgres,
        help: "The percentage of CPU utilization. Units: Percent",
    },
    CloudGauge {
        name: "cro_postgres_freeable_memory_average",
        kind: ResourceKind::Postgres,
        help: "The amount of available random access memory. Units: Bytes",
    },
    CloudGauge {
        name: "cro_redis_memory_usage_percentage_average",
        kind: ResourceKind::Redis,
        help: "The percentage of redis used memory. Units: Percent",
    },
    CloudGauge {
        name: "cro_redis_freeable_memory_average",
        kind: ResourceKind::Redis,
        help: "The amount of available random access memory. Units: Bytes",
    },
    CloudGauge {
        name: "cro_redis_cpu_utilization_average",
        kind: ResourceKind::Redis,
        help: "The percentage of CPU utilization. Units: Percent",
    },
    CloudGauge {
        name: "cro_redis_engine_cpu_utilization_average",
        kind: ResourceKind::Redis,
        help: "The percentage of CPU utilization. Units: Percent",
    },
];

/// One value read from the cloud's monitoring.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudSample {
    /// The gauge ([`CLOUD_GAUGES`]) it sets.
    pub gauge: &'static str,
    /// The resource's cloud identifier.
    pub identifier: String,
    /// What the value was measured on: the resource itself, or one of its
    /// nodes (an ElastiCache group's cache clusters).
    pub instance: String,
    pub value: f64,
}

/// A metric family a provider keeps, as plain data the operator renders
/// on `/metrics` (so that this crate names no metrics library).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricFamily {
    /// The name without a counter's `_total`, e.g. `cro_aws_api_calls`.
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricKind,
    /// Each series: its labels and its value.
    pub series: Vec<(Vec<(&'static str, String)>, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// A provider of backing services (`aws`, `openshift`).
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The name used in `cloud-resource-config` (e.g. `openshift`).
    fn name(&self) -> &'static str;

    /// The provider's own metrics (e.g. cloud API calls) as they stand,
    /// which the operator serves on `/metrics`.
    fn metrics(&self) -> Vec<MetricFamily> {
        Vec::new()
    }

    /// Creates or converges the resource. Idempotent.
    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError>;

    /// Deletes everything the resource owns. Idempotent, and tolerant of
    /// parts that are already gone.
    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError>;

    /// Creates (or observes) a snapshot.
    async fn snapshot(&self, req: &SnapshotRequest) -> Result<Snapshotted, ProviderError>;

    /// Whether `snapshot` can succeed at all (scheduled snapshots are only
    /// taken where it can).
    fn takes_snapshots(&self) -> bool {
        true
    }

    /// Whether it honours `Options::rotate_credentials` (a rotation asked
    /// of a provider that does not is reported, never silently dropped).
    fn rotates_credentials(&self) -> bool {
        true
    }

    /// Deletes a snapshot.
    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError>;

    /// What `reconcile` would change, with read-only calls only (the
    /// `plan` command): every difference between the live resource and
    /// the tier, a missing resource as one "created" change.
    async fn plan(&self, req: &ResourceRequest) -> Result<Vec<Change>, ProviderError>;

    /// The cloud's own view of the resource, from read-only calls (the
    /// `status` command), e.g. `RDS instance cro-… is available`; `None`
    /// from a provider whose resources are the cluster objects the CR owns.
    async fn cloud_state(&self, _req: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(None)
    }

    /// The cloud's monitoring data of every database it provisioned,
    /// averaged over the last `period` (the [`CLOUD_GAUGES`]). Errors are
    /// the provider's to log; what could be read is returned.
    async fn cloud_metrics(&self, _period: std::time::Duration) -> Vec<CloudSample> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opaque_secret_carries_its_data_as_the_api_server_stores_it() {
        let owner = Owner {
            api_version: "v1".into(),
            kind: "Postgres".into(),
            name: "db".into(),
            uid: "u1".into(),
        };
        let meta =
            serde_json::json!({"name": "s", "ownerReferences": [owner.controller_reference()]});
        let secret = opaque_secret(meta, [("password", "p@ss"), ("empty", "")]);
        assert_eq!(
            secret["data"],
            serde_json::json!({"password": "cEBzcw==", "empty": ""})
        );
        assert_eq!(secret["type"], "Opaque");
        let reference = &secret["metadata"]["ownerReferences"][0];
        assert_eq!(
            (reference["uid"].as_str(), reference["controller"].as_bool()),
            (Some("u1"), Some(true))
        );
        assert!(reference.get("blockOwnerDeletion").is_none(), "{reference}");
    }

    #[test]
    fn connection_details_debug_shows_keys_only() {
        let details = ConnectionDetails(BTreeMap::from([
            ("password".to_string(), "s3cr3t-value".to_string()),
            ("username".to_string(), "app".to_string()),
        ]));
        let shown = format!("{details:?}");
        assert!(shown.contains("password") && shown.contains("username"));
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }
}
