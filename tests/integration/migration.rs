//! Switching from the Go cloud-resource-operator: a namespace is laid out
//! exactly as the Go operator (github.com/integr8ly/cloud-resource-operator
//! v1.1.4, and v0.13.3 for SMTPCredentialSet) leaves it — every object below
//! cites the Go file and function that writes it — then this operator
//! starts. Asserted: no CR failed, no AWS create/modify/delete, no second
//! snapshot, output Secrets unchanged, pods still selected by their
//! Service, and deleting a snapshot CR deletes the Go operator's snapshot.

use std::collections::BTreeMap;

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet,
};
use cro_provider_api::{cloud_identifier, timestamped_identifier};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    core::DynamicObject,
};
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, TestEnv, aws_requests, ensure_crds, wait_deleted, wait_for,
    with_namespace,
};

const CLUSTER: &str = "testcluster";
const GO_FINALIZER: &str = "cloud-resources-operator.integreatly.org/finalizers";
/// v0.13.3's finalizer (renamed in v0.31).
const GO_LEGACY_FINALIZER: &str = "finalizers.cloud-resources-operator.integreatly.org";

/// `cloud-resources-aws-strategies` as the Go operator's helper writes it:
/// `ReconcileStrategyMap` (pkg/client/aws/strategies_aws.go) marshals whole
/// aws-sdk-go v1 input structs for the tier it sets windows on — every
/// field, mostly null — and keeps `BuildDefaultConfigMap`'s other keys
/// (pkg/providers/aws/config.go), `_network` included. smtpcredentials is
/// v0.13.3's `buildDefaultConfigMap`.
fn go_strategies() -> BTreeMap<String, String> {
    let null_fields = |names: &[&str], windows: &[(&str, &str)]| -> Value {
        let mut m: serde_json::Map<String, Value> =
            names.iter().map(|n| (n.to_string(), Value::Null)).collect();
        for (k, v) in windows {
            m.insert(k.to_string(), json!(v));
        }
        Value::Object(m)
    };
    // aws-sdk-go v1.53.2 rds.CreateDBInstanceInput, every exported field.
    let rds_fields = [
        "AllocatedStorage",
        "AutoMinorVersionUpgrade",
        "AvailabilityZone",
        "BackupRetentionPeriod",
        "BackupTarget",
        "CACertificateIdentifier",
        "CharacterSetName",
        "CopyTagsToSnapshot",
        "CustomIamInstanceProfile",
        "DBClusterIdentifier",
        "DBInstanceClass",
        "DBInstanceIdentifier",
        "DBName",
        "DBParameterGroupName",
        "DBSecurityGroups",
        "DBSubnetGroupName",
        "DBSystemId",
        "DedicatedLogVolume",
        "DeletionProtection",
        "Domain",
        "DomainAuthSecretArn",
        "DomainDnsIps",
        "DomainFqdn",
        "DomainIAMRoleName",
        "DomainOu",
        "EnableCloudwatchLogsExports",
        "EnableCustomerOwnedIp",
        "EnableIAMDatabaseAuthentication",
        "EnablePerformanceInsights",
        "Engine",
        "EngineVersion",
        "Iops",
        "KmsKeyId",
        "LicenseModel",
        "ManageMasterUserPassword",
        "MasterUserPassword",
        "MasterUserSecretKmsKeyId",
        "MasterUsername",
        "MaxAllocatedStorage",
        "MonitoringInterval",
        "MonitoringRoleArn",
        "MultiAZ",
        "MultiTenant",
        "NcharCharacterSetName",
        "NetworkType",
        "OptionGroupName",
        "PerformanceInsightsKMSKeyId",
        "PerformanceInsightsRetentionPeriod",
        "Port",
        "ProcessorFeatures",
        "PromotionTier",
        "PubliclyAccessible",
        "StorageEncrypted",
        "StorageThroughput",
        "StorageType",
        "Tags",
        "TdeCredentialArn",
        "TdeCredentialPassword",
        "Timezone",
        "VpcSecurityGroupIds",
    ];
    // aws-sdk-go v1.53.2 elasticache.CreateReplicationGroupInput.
    let redis_fields = [
        "AtRestEncryptionEnabled",
        "AuthToken",
        "AutoMinorVersionUpgrade",
        "AutomaticFailoverEnabled",
        "CacheNodeType",
        "CacheParameterGroupName",
        "CacheSecurityGroupNames",
        "CacheSubnetGroupName",
        "ClusterMode",
        "DataTieringEnabled",
        "Engine",
        "EngineVersion",
        "GlobalReplicationGroupId",
        "IpDiscovery",
        "KmsKeyId",
        "LogDeliveryConfigurations",
        "MultiAZEnabled",
        "NetworkType",
        "NodeGroupConfiguration",
        "NotificationTopicArn",
        "NumCacheClusters",
        "NumNodeGroups",
        "Port",
        "PreferredCacheClusterAZs",
        "PrimaryClusterId",
        "ReplicasPerNodeGroup",
        "ReplicationGroupDescription",
        "ReplicationGroupId",
        "SecurityGroupIds",
        "ServerlessCacheSnapshotName",
        "SnapshotArns",
        "SnapshotName",
        "SnapshotRetentionLimit",
        "Tags",
        "TransitEncryptionEnabled",
        "TransitEncryptionMode",
        "UserGroupIds",
    ];
    let tier = |create: Value| json!({"region": "", "createStrategy": create, "deleteStrategy": {}, "serviceUpdates": null});
    let postgres = json!({
        "development": tier(json!({})),
        "production": tier(null_fields(&rds_fields, &[("PreferredBackupWindow", "02:00-03:00"), ("PreferredMaintenanceWindow", "mon:04:00-mon:05:00")])),
    });
    let redis = json!({
        "development": tier(json!({})),
        "production": tier(null_fields(&redis_fields, &[("PreferredMaintenanceWindow", "mon:04:00-mon:05:00"), ("SnapshotWindow", "02:00-03:00")])),
    });
    // BuildDefaultConfigMap's strings, verbatim (note the missing spaces).
    let default_tiers = r#"{"development": { "region": "", "_network": "", "createStrategy": {}, "deleteStrategy": {} }, "production": { "region": "", "_network": "","createStrategy": {}, "deleteStrategy": {} }}"#;
    let v0_13 = r#"{"development": { "region": "", "createStrategy": {}, "deleteStrategy": {} }, "production": { "region": "", "createStrategy": {}, "deleteStrategy": {} }}"#;
    BTreeMap::from([
        ("postgres".to_string(), postgres.to_string()),
        ("redis".to_string(), redis.to_string()),
        ("blobstorage".to_string(), default_tiers.to_string()),
        ("_network".to_string(), default_tiers.to_string()),
        ("smtpcredentials".to_string(), v0_13.to_string()),
    ])
}

/// The tags `GetDefaultResourceTags` (pkg/resources/tags.go) puts on RDS
/// instances, S3 buckets and snapshots.
fn go_tags(resource_name: &str) -> Vec<(String, String)> {
    vec![
        ("integreatly.org/clusterID".into(), CLUSTER.into()),
        ("integreatly.org/resource-type".into(), "aws".into()),
        ("integreatly.org/resource-name".into(), resource_name.into()),
        ("red-hat-managed".into(), "true".into()),
    ]
}

fn secret_data(pairs: &[(&str, &str)]) -> BTreeMap<String, k8s_openapi::ByteString> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                k8s_openapi::ByteString(v.as_bytes().to_vec()),
            )
        })
        .collect()
}

fn read_secret(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

/// An RDS instance as `buildRDSCreateStrategy` (provider_postgres.go)
/// creates one for a tier that sets only the windows: its defaults, its
/// forced engine version 13.13, and `tags`.
async fn go_rds_instance(
    rds: &aws_sdk_rds::Client,
    id: &str,
    class: &str,
    password: &str,
    tags: Vec<(String, String)>,
) {
    let tags = tags
        .into_iter()
        .map(|(k, v)| aws_sdk_rds::types::Tag::builder().key(k).value(v).build());
    rds.create_db_instance()
        .db_instance_identifier(id)
        .engine("postgres")
        .engine_version("13.13")
        .db_instance_class(class)
        .allocated_storage(20)
        .max_allocated_storage(100)
        .master_username("postgres")
        .master_user_password(password)
        .db_name("postgres")
        .port(5432)
        .multi_az(true)
        .auto_minor_version_upgrade(false)
        .backup_retention_period(31)
        .deletion_protection(true)
        .storage_encrypted(true)
        .publicly_accessible(false)
        .copy_tags_to_snapshot(true)
        .preferred_backup_window("02:00-03:00")
        .preferred_maintenance_window("mon:04:00-mon:05:00")
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating {id}: {e:?}"));
}

/// The Go operator's strategies ConfigMap (`go_strategies`) in `ns`.
async fn create_go_strategies(client: &Client, ns: &str) {
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "cloud-resources-aws-strategies"}, "data": go_strategies()}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The replication group `id` once the emulator's creating phase is over,
/// as the Go operator waited for it.
async fn available_group(
    ec: &aws_sdk_elasticache::Client,
    id: &str,
) -> aws_sdk_elasticache::types::ReplicationGroup {
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        let out = ec
            .describe_replication_groups()
            .replication_group_id(id)
            .send()
            .await;
        let out = out.unwrap_or_else(|e| panic!("{e:?}"));
        let group = out.replication_groups().first().cloned();
        let group = group.unwrap_or_else(|| panic!("no group {id}"));
        if group.status() == Some("available") {
            return group;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "group {id} never available"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// A CR as the Go controllers leave it: our CRD types, the Go finalizer,
/// the `resourceIdentifier` annotation its providers write on create.
async fn go_cr<K>(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    spec: Value,
    finalizer: &str,
    identifier: Option<&str>,
) -> K
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let mut obj = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind,
        "metadata": {"name": name, "finalizers": [finalizer]}, "spec": spec});
    if let Some(id) = identifier {
        obj["metadata"]["annotations"] = json!({"resourceIdentifier": id});
    }
    crate::support::create_json(client, ns, obj).await
}

/// `status` as the Go controllers write it (`UpdatePhase`, status
/// subresource), with no conditions and no observedGeneration.
async fn go_status<K>(client: &Client, ns: &str, name: &str, status: Value)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::namespaced(client.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

/// A Postgres `db` the Go operator created under a tier that sets only the
/// windows: its instance (`buildRDSCreateStrategy`, go_rds_instance), its
/// credentials Secret (`buildDefaultRDSSecret`) and the CR with its
/// finalizer and annotation (provider_postgres.go). Its identifier.
async fn go_postgres(
    client: &Client,
    rds: &aws_sdk_rds::Client,
    ns: &str,
    spec: Value,
    password: &str,
) -> (Postgres, String) {
    let id = cloud_identifier(CLUSTER, ns, "db");
    go_rds_instance(rds, &id, "db.t3.small", password, go_tags("db")).await;
    create_secret(
        client,
        ns,
        plain_secret(
            "db-aws-rds-credentials",
            &[("user", "postgres"), ("password", password)],
        ),
    )
    .await;
    let pg = go_cr(client, ns, "Postgres", "db", spec, GO_FINALIZER, Some(&id)).await;
    (pg, id)
}

/// Once its instance is available, as the Go operator finishes it: the
/// output Secret `db-sec` (ReconcileResultSecret) and a complete status.
async fn go_postgres_complete(
    client: &Client,
    rds: &aws_sdk_rds::Client,
    ns: &str,
    pg: &Postgres,
    id: &str,
    password: &str,
) {
    let db = loop {
        let out = rds
            .describe_db_instances()
            .db_instance_identifier(id)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let db = out
            .db_instances()
            .first()
            .cloned()
            .unwrap_or_else(|| panic!("no instance"));
        if db.db_instance_status() == Some("available") {
            break db;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let host = db
        .endpoint()
        .and_then(|e| e.address())
        .unwrap_or_default()
        .to_string();
    go_output_secret(
        client,
        ns,
        pg,
        "db-sec",
        &[
            ("username", "postgres"),
            ("password", password),
            ("host", &host),
            ("port", "5432"),
            ("database", "postgres"),
        ],
    )
    .await;
    go_status::<Postgres>(client, ns, "db", json!({"strategy": "aws", "provider": "aws-rds", "version": "13.13", "secretRef": {"name": "db-sec"},
        "phase": "complete", "message": format!("rds instance {id} is as expected, aws rds status is available")})).await;
}

/// An output Secret as `ReconcileResultSecret` (pkg/resources/provider.go)
/// writes it: a controller ownerReference to the CR, no labels.
async fn go_output_secret<K: Resource<DynamicType = ()>>(
    client: &Client,
    ns: &str,
    owner: &K,
    name: &str,
    data: &[(&str, &str)],
) {
    let owner_ref = owner
        .controller_owner_ref(&())
        .unwrap_or_else(|| panic!("owner without uid"));
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(secret_data(data)),
        ..Default::default()
    };
    create_secret(client, ns, secret).await;
}

async fn create_secret(client: &Client, ns: &str, secret: Secret) {
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {}: {e}", secret.name_any()));
}

/// The Secret the Cloud Credential Operator filled for the Go operator's
/// CredentialsRequest `request` (`reconcileCredentialRequest`,
/// pkg/providers/aws/credentials.go) with `key` of CCO's user `user`,
/// granted `statements` (CCO's `syncAccessKeySecret`, see cco.rs): labelled
/// and annotated by CCO, no owner.
fn go_minted(ns: &str, request: &str, key: (&str, &str), user: &str, statements: Value) -> Secret {
    let policy = crate::cco::user_policy(&statements, user);
    crate::cco::minted_secret(ns, request, key, &policy.to_string())
}

/// CCO's CRD is cluster-wide: the test that removes it for a while holds
/// this for writing, a test that needs it for reading, so neither runs
/// beside the other's assumption.
static CCO_CRD: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Removes CCO's CRD (cluster-wide; see [`CCO_CRD`]) and waits until it
/// is gone.
async fn remove_cco_crd(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let name = "credentialsrequests.cloudcredential.openshift.io";
    match crds.delete(name, &DeleteParams::default()).await {
        Ok(_) => wait_deleted(&crds, name, DEFAULT_TIMEOUT).await,
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("deleting CRD {name}: {e}"),
    }
}

/// What the Go operator asks CCO to grant a bucket's key
/// (`buildPutBucketObjectEntries`, pkg/providers/aws/credentials.go).
pub(crate) fn go_bucket_entries(bucket: &str) -> Value {
    json!([
        {"effect": "Allow", "action": ["s3:*"], "resource": format!("arn:aws:s3:::{bucket}")},
        {"effect": "Allow", "action": ["s3:*"], "resource": format!("arn:aws:s3:::{bucket}/*")},
    ])
}

fn plain_secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(secret_data(data)),
        ..Default::default()
    }
}

/// Waits until this operator has written the CR's status (the Go
/// operator never sets observedGeneration).
async fn taken_over<K>(client: &Client, ns: &str, name: &str) -> K
where
    K: crate::support::Phased
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    let obj = wait_for(
        &api,
        name,
        "status written by this operator",
        DEFAULT_TIMEOUT,
        |o: Option<&K>| {
            o.and_then(|o| serde_json::to_value(o).ok())
                .is_some_and(|v| v["status"]["observedGeneration"].is_i64())
        },
    )
    .await;
    assert_eq!(
        obj.phase(),
        Some(Phase::Complete),
        "{name}: {}",
        obj.message()
    );
    obj
}

/// AWS calls that create, change or delete, with parameters mentioning
/// `text`, made after `since` requests.
fn writes_mentioning(since: usize, text: &str) -> Vec<String> {
    aws_requests()
        .into_iter()
        .skip(since)
        .filter(|r| r["params"].to_string().contains(text))
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .filter(|a| {
            ["Create", "Modify", "Delete", "Put", "Restore"]
                .iter()
                .any(|p| a.starts_with(p))
        })
        .collect()
}

#[tokio::test]
async fn aws_resources_the_go_operator_made_are_taken_over_untouched() {
    with_namespace("migrate-aws", |client, ns| async move {
        ensure_crds(&client).await;
        let env = TestEnv::load();
        let config = env.aws_config().await;
        let rds = aws_sdk_rds::Client::new(&config);
        let ec = aws_sdk_elasticache::Client::new(&config);
        let s3 = env.s3().await;
        let iam = aws_sdk_iam::Client::new(&config);
        create_go_strategies(&client, &ns).await;
        let spec = |secret: &str| json!({"type": "aws", "tier": "production", "secretRef": {"name": secret}});

        // --- Postgres: buildRDSCreateStrategy + buildDefaultRDSSecret
        // (pkg/providers/aws/provider_postgres.go).
        let password = "3f2c9d1e8a7b4c6d9e0f1a2b3c4d5e6f";
        let (pg, db_id) = go_postgres(&client, &rds, &ns, spec("db-sec"), password).await;

        // --- Redis: buildElasticacheCreateStrategy (provider_redis.go); the
        // Go operator tags the nodes, not the group.
        let cache_id = cloud_identifier(CLUSTER, &ns, "cache");
        go_redis_group(&ec, &cache_id).await;
        let cache: Redis = go_cr(&client, &ns, "Redis", "cache", spec("cache-sec"), GO_FINALIZER, Some(&cache_id)).await;

        // --- BlobStorage: CreateBucket, PutPublicAccessBlock,
        // PutBucketEncryption, PutBucketTagging (provider_blobstorage.go);
        // its user's key is minted by the Cloud Credential Operator for the
        // CredentialsRequest cro-aws-s3-<bucket>-creds (reconcileCredentialRequest).
        let bucket = cloud_identifier(CLUSTER, &ns, "blob");
        go_bucket(&s3, &bucket, &env.aws_region).await;
        // reconcileS3BucketSettings: the four blocks true, AES256 by default.
        let block = aws_sdk_s3::types::PublicAccessBlockConfiguration::builder()
            .block_public_acls(true).block_public_policy(true).ignore_public_acls(true).restrict_public_buckets(true).build();
        s3.put_public_access_block().bucket(&bucket).public_access_block_configuration(block).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let by_default = aws_sdk_s3::types::ServerSideEncryptionByDefault::builder()
            .sse_algorithm(aws_sdk_s3::types::ServerSideEncryption::Aes256).build().unwrap_or_else(|e| panic!("{e}"));
        let rule = aws_sdk_s3::types::ServerSideEncryptionRule::builder().apply_server_side_encryption_by_default(by_default).build();
        let encryption = aws_sdk_s3::types::ServerSideEncryptionConfiguration::builder().rules(rule).build().unwrap_or_else(|e| panic!("{e}"));
        s3.put_bucket_encryption().bucket(&bucket).server_side_encryption_configuration(encryption).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let minted_user = format!("cco-{ns}-blob");
        iam.create_user().user_name(&minted_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let key = iam.create_access_key().user_name(&minted_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let key = key.access_key().cloned().unwrap_or_else(|| panic!("no key"));
        create_secret(&client, &ns, go_minted(&ns, &format!("cro-aws-s3-{bucket}-creds"),
            (key.access_key_id(), key.secret_access_key()), &minted_user, go_bucket_entries(&bucket))).await;
        let blob: BlobStorage = go_cr(&client, &ns, "BlobStorage", "blob", spec("blob-sec"), GO_FINALIZER, Some(&bucket)).await;

        // --- SMTPCredentialSet (v0.13.3, provider_smtpcredentialset.go): a
        // CCO CredentialsRequest named after the identifier, the v0.13.3
        // finalizer, no resourceIdentifier annotation.
        let mail_id = cloud_identifier(CLUSTER, &ns, "mail");
        let mail_user = format!("cco-{ns}-mail");
        iam.create_user().user_name(&mail_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let mail_key = iam.create_access_key().user_name(&mail_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let mail_key = mail_key.access_key().cloned().unwrap_or_else(|| panic!("no key"));
        // sendRawMailEntries (v0.13.3, pkg/providers/aws/credentials.go).
        let send_raw_mail = json!([{"effect": "Allow", "action": ["ses:SendRawEmail"], "resource": "*"}]);
        create_secret(&client, &ns, go_minted(&ns, &mail_id,
            (mail_key.access_key_id(), mail_key.secret_access_key()), &mail_user, send_raw_mail)).await;
        let mail: SMTPCredentialSet = go_cr(&client, &ns, "SMTPCredentialSet", "mail", spec("mail-sec"), GO_LEGACY_FINALIZER, None).await;

        // Wait for the emulator's creating phases, as the Go operator
        // would; then the output Secrets (ReconcileResultSecret) and
        // complete statuses.
        go_postgres_complete(&client, &rds, &ns, &pg, &db_id, password).await;
        go_redis_complete(&client, &ec, &ns, &cache, &cache_id).await;
        go_output_secret(&client, &ns, &blob, "blob-sec", &[("bucketName", &bucket), ("bucketRegion", &env.aws_region),
            ("credentialKeyID", key.access_key_id()), ("credentialSecretKey", key.secret_access_key())]).await;
        go_status::<BlobStorage>(&client, &ns, "blob", json!({"strategy": "aws", "provider": "aws-s3", "secretRef": {"name": "blob-sec"},
            "phase": "complete", "message": "successfully created and tagged"})).await;
        let smtp_host = format!("email-smtp.{}.amazonaws.com", env.aws_region);
        go_output_secret(&client, &ns, &mail, "mail-sec", &[("username", mail_key.access_key_id()), ("password", "An60U4ZD3sd4fg+FvXUjayOipTt8LO4rUUmhpdX6ctDy"),
            ("host", &smtp_host), ("port", "587"), ("tls", "true")]).await;
        go_status::<SMTPCredentialSet>(&client, &ns, "mail", json!({"strategy": "aws", "provider": "aws-ses", "secretRef": {"name": "mail-sec"},
            "phase": "complete", "message": "creation successful"})).await;

        // Snapshots: the identifier from BuildTimestampedInfraNameFromObjectCreation
        // (pkg/resources/config.go) in status.snapshotID (createPostgresSnapshot,
        // createRedisSnapshot); the Go RedisSnapshot never sets status.strategy.
        let pg_snap_id = go_postgres_snapshot(&client, &rds, &ns, &db_id, None).await;
        // The Go operator's later passes: TagRDSPostgres
        // (pkg/providers/aws/provider_postgres.go) adds the instance's tags
        // to every snapshot of the instance, so resource-name is now "db".
        let snaps = rds.describe_db_snapshots().db_snapshot_identifier(&pg_snap_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let snap_arn = snaps.db_snapshots().first().and_then(|s| s.db_snapshot_arn()).unwrap_or_default().to_string();
        rds.add_tags_to_resource().resource_name(&snap_arn)
            .set_tags(Some(go_tags("db").into_iter().map(|(k, v)| aws_sdk_rds::types::Tag::builder().key(k).value(v).build()).collect()))
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        go_status::<PostgresSnapshot>(&client, &ns, "db-snap", json!({"snapshotID": pg_snap_id, "phase": "complete", "message": "snapshot created", "strategy": "aws"})).await;
        let redis_snap_id = go_redis_snapshot(&client, &ec, &ns, &cache_id, None).await;
        go_status::<RedisSnapshot>(&client, &ns, "cache-snap", json!({"snapshotID": redis_snap_id, "phase": "complete", "message": "snapshot created"})).await;

        // Switch operators.
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let before: BTreeMap<String, BTreeMap<String, String>> = futures::future::join_all(
            ["db-sec", "cache-sec", "blob-sec", "mail-sec", "db-aws-rds-credentials"].map(|n| {
                let secrets = secrets.clone();
                async move { (n.to_string(), read_secret(&secrets.get(n).await.unwrap_or_else(|e| panic!("{e}")))) }
            }),
        )
        .await
        .into_iter()
        .collect();
        let since = aws_requests().len();
        let op = Operator::start(&ns).await;
        let pg: Postgres = taken_over(&client, &ns, "db").await;
        let _: Redis = taken_over(&client, &ns, "cache").await;
        let _: BlobStorage = taken_over(&client, &ns, "blob").await;
        let _: SMTPCredentialSet = taken_over(&client, &ns, "mail").await;
        let _: PostgresSnapshot = taken_over(&client, &ns, "db-snap").await;
        let _: RedisSnapshot = taken_over(&client, &ns, "cache-snap").await;
        let up_to_date = pg.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "UpToDate")).map(|c| (c.status.clone(), c.message.clone()));
        assert_eq!(up_to_date.as_ref().map(|(s, _)| s.as_str()), Some("True"), "the Go operator's instance reads as drift: {up_to_date:?}");

        for id in [&db_id, &cache_id, &bucket, &mail_id, &pg_snap_id, &redis_snap_id] {
            assert_eq!(writes_mentioning(since, id), Vec::<String>::new(), "AWS writes for {id}");
        }
        // Anything created for this namespace (its tags, or an identifier,
        // which starts with the cluster ID and namespace): other tests'
        // creates run beside this one.
        let stem: String = format!("{CLUSTER}{ns}").chars().filter(char::is_ascii_alphanumeric).collect();
        let creates: Vec<String> = aws_requests().into_iter().skip(since)
            .filter(|r| r["params"].to_string().contains(&ns) || r["params"].to_string().to_ascii_lowercase().contains(&stem))
            .map(|r| r["action"].as_str().unwrap_or_default().to_string())
            .filter(|a| a.starts_with("Create")).collect();
        assert!(creates.is_empty(), "the operator created in AWS: {creates:?}");
        for (name, data) in &before {
            let now = read_secret(&secrets.get(name).await.unwrap_or_else(|e| panic!("{e}")));
            if name == "mail-sec" {
                // Re-derived from the same key with AWS's current (SigV4)
                // algorithm; v0.13.3 used the retired version 2 one.
                let mut expected = data.clone();
                expected.insert("password".into(), cro_provider_aws::smtp_password::smtp_password(mail_key.secret_access_key(), &env.aws_region));
                assert_eq!(&now, &expected, "{name}");
            } else {
                assert_eq!(&now, data, "{name} changed");
            }
        }
        let manual = rds.describe_db_snapshots().db_instance_identifier(&db_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let ids: Vec<_> = manual.db_snapshots().iter().filter(|s| s.snapshot_type() == Some("manual")).filter_map(|s| s.db_snapshot_identifier()).collect();
        assert_eq!(ids, [pg_snap_id.as_str()], "a second RDS snapshot");
        let ec_snaps = ec.describe_snapshots().replication_group_id(&cache_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(ec_snaps.snapshots().len(), 1, "a second ElastiCache snapshot");

        // Deleting the snapshot CRs deletes the Go operator's snapshots.
        let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), &ns);
        pg_snaps.delete("db-snap", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        redis_snaps.delete("cache-snap", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pg_snaps, "db-snap", DEFAULT_TIMEOUT).await;
        wait_deleted(&redis_snaps, "cache-snap", DEFAULT_TIMEOUT).await;
        assert!(rds.describe_db_snapshots().db_snapshot_identifier(&pg_snap_id).send().await.is_err(), "{pg_snap_id} left");
        let left = ec.describe_snapshots().snapshot_name(&redis_snap_id).send().await.map(|o| o.snapshots().len()).unwrap_or(0);
        assert_eq!(left, 0, "{redis_snap_id} left");

        // Deleting the BlobStorage hands its user back to CCO.
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        blobs.delete("blob", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "blob", DEFAULT_TIMEOUT).await;
        assert!(secrets.get_opt(&format!("cro-aws-s3-{bucket}-creds")).await.unwrap_or_else(|e| panic!("{e}")).is_none());
        for (kind, name) in [("Postgres", "db"), ("Redis", "cache"), ("SMTPCredentialSet", "mail")] {
            let resource = kube::discovery::ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind),
                &cloud_resource_operator::api::crds().into_iter().find(|c| c.spec.names.kind == kind).map(|c| c.spec.names.plural).unwrap_or_default());
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
            api.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&api, name, DEFAULT_TIMEOUT * 2).await;
        }
        op.stop().await;
    })
    .await;
}

/// A bucket as provider_blobstorage.go creates it (CreateBucket, then
/// PutBucketTagging with `GetDefaultResourceTags`).
async fn go_bucket(s3: &aws_sdk_s3::Client, bucket: &str, region: &str) {
    let location = aws_sdk_s3::types::BucketLocationConstraint::from(region);
    let configuration = aws_sdk_s3::types::CreateBucketConfiguration::builder()
        .location_constraint(location)
        .build();
    s3.create_bucket()
        .bucket(bucket)
        .create_bucket_configuration(configuration)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let tag = |(k, v): (String, String)| {
        aws_sdk_s3::types::Tag::builder()
            .key(k)
            .value(v)
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let tagging = aws_sdk_s3::types::Tagging::builder()
        .set_tag_set(Some(go_tags("blob").into_iter().map(tag).collect()));
    s3.put_bucket_tagging()
        .bucket(bucket)
        .tagging(tagging.build().unwrap_or_else(|e| panic!("{e}")))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
}

/// Once the group is available, as the Go operator finishes a Redis: the
/// output Secret `cache-sec` (ReconcileResultSecret) and a complete status.
async fn go_redis_complete(
    client: &Client,
    ec: &aws_sdk_elasticache::Client,
    ns: &str,
    cache: &Redis,
    cache_id: &str,
) {
    let group = available_group(ec, cache_id).await;
    let primary = group
        .node_groups()
        .first()
        .and_then(|n| n.primary_endpoint())
        .and_then(|e| e.address())
        .unwrap_or_default()
        .to_string();
    go_output_secret(
        client,
        ns,
        cache,
        "cache-sec",
        &[("uri", &primary), ("port", "6379")],
    )
    .await;
    go_status::<Redis>(client, ns, "cache", json!({"strategy": "aws", "provider": "aws-elasticache", "version": "7.1", "secretRef": {"name": "cache-sec"},
        "phase": "complete", "message": "successfully created and tagged, aws elasticache status is available"})).await;
}

/// A replication group `id` as `buildElasticacheCreateStrategy`
/// (provider_redis.go) creates one for a tier that sets only the windows;
/// the Go operator tags the nodes, not the group.
async fn go_redis_group(ec: &aws_sdk_elasticache::Client, id: &str) {
    ec.create_replication_group()
        .replication_group_id(id)
        .replication_group_description("A Redis replication group")
        .engine("redis")
        .engine_version("7.1")
        .cache_node_type("cache.t3.micro")
        .num_cache_clusters(2)
        .automatic_failover_enabled(true)
        .snapshot_retention_limit(31)
        .at_rest_encryption_enabled(true)
        .transit_encryption_enabled(false)
        .snapshot_window("02:00-03:00")
        .preferred_maintenance_window("mon:04:00-mon:05:00")
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating {id}: {e:?}"));
}

/// A snapshot CR `name` of `parent` with the Go finalizer, and the
/// identifier the Go operator gives its snapshot: its creation time
/// through BuildTimestampedInfraNameFromObjectCreation (pkg/resources/config.go).
async fn go_snapshot_cr<K>(client: &Client, ns: &str, name: &str, parent: &str) -> String
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let cr: K = crate::support::create_json(client, ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": K::kind(&()),
        "metadata": {"name": name, "finalizers": [GO_FINALIZER]}, "spec": {"resourceName": parent}})).await;
    let created = cr
        .meta()
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string());
    timestamped_identifier(CLUSTER, ns, name, &created.unwrap_or_default())
}

/// PostgresSnapshot `db-snap` of `db` and its RDS snapshot as
/// createPostgresSnapshot (provider_postgressnapshot.go) takes it: tagged
/// with `GetDefaultResourceTags` naming the snapshot's own identifier, or
/// `retagged` by the parent's name as TagRDSPostgres leaves it after later
/// passes. Its identifier.
async fn go_postgres_snapshot(
    client: &Client,
    rds: &aws_sdk_rds::Client,
    ns: &str,
    db_id: &str,
    retagged: Option<&str>,
) -> String {
    let id = go_snapshot_cr::<PostgresSnapshot>(client, ns, "db-snap", "db").await;
    let tags = go_tags(retagged.unwrap_or(&id))
        .into_iter()
        .map(|(k, v)| aws_sdk_rds::types::Tag::builder().key(k).value(v).build());
    rds.create_db_snapshot()
        .db_instance_identifier(db_id)
        .db_snapshot_identifier(&id)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    id
}

/// RedisSnapshot `cache-snap` of `cache` and its ElastiCache snapshot as
/// createRedisSnapshot (provider_redissnapshot.go) takes it, tagged as
/// [`go_postgres_snapshot`] (`retagged`: as TagElasticacheNode leaves it).
async fn go_redis_snapshot(
    client: &Client,
    ec: &aws_sdk_elasticache::Client,
    ns: &str,
    cache_id: &str,
    retagged: Option<&str>,
) -> String {
    let id = go_snapshot_cr::<RedisSnapshot>(client, ns, "cache-snap", "cache").await;
    let tags = go_tags(retagged.unwrap_or(&id)).into_iter().map(|(k, v)| {
        aws_sdk_elasticache::types::Tag::builder()
            .key(k)
            .value(v)
            .build()
    });
    ec.create_snapshot()
        .replication_group_id(cache_id)
        .snapshot_name(&id)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    id
}

/// Whether `d` selects its pods by the Go operator's `deployment: <name>`.
fn legacy_selector(d: &Deployment, name: &str) -> bool {
    let labels = d
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    labels == BTreeMap::from([("deployment".to_string(), name.to_string())])
}

/// The Deployment spec the Go operator's openshift provider writes, and
/// writes again on every pass (`CreateDeployment`: `e.Spec = d.Spec`):
/// `buildDefaultPostgresDeployment`/`buildDefaultPostgresPodContainers`
/// (provider_postgres.go) and `buildDefaultRedisDeployment`,
/// `buildDefaultRedisPodContainers`, `buildDefaultRedisPodVolumes`
/// (provider_redis.go), in a namespace not named `openshift-*`.
fn go_deployment_spec(kind: &str, name: &str) -> Value {
    let selector = json!({"deployment": name});
    let (container, volumes) = if kind == "Postgres" {
        let env = |var: &str, key: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": format!("{name}-postgres-credentials"), "key": key}}});
        (
            json!({"name": name, "image": "registry.redhat.io/rhscl/postgresql-13-rhel7", "imagePullPolicy": "IfNotPresent",
                   "ports": [{"containerPort": 5432, "protocol": "TCP"}],
                   "env": [env("POSTGRESQL_USER", "user"), env("POSTGRESQL_PASSWORD", "password"), env("POSTGRESQL_DATABASE", "database")],
                   "resources": {"limits": {"cpu": "250m", "memory": "2Gi"}, "requests": {"cpu": "50m", "memory": "512Mi"}},
                   "volumeMounts": [{"name": name, "mountPath": "/var/lib/pgsql/data"}],
                   "livenessProbe": {"tcpSocket": {"port": 5432}, "initialDelaySeconds": 30, "periodSeconds": 10},
                   "readinessProbe": {"exec": {"command": ["/bin/sh", "-i", "-c", "psql -h 127.0.0.1 -U $POSTGRESQL_USER -q -d $POSTGRESQL_DATABASE -c 'SELECT 1'"]},
                                      "initialDelaySeconds": 10, "periodSeconds": 30, "timeoutSeconds": 5}}),
            json!([{"name": name, "persistentVolumeClaim": {"claimName": name}}]),
        )
    } else {
        (
            json!({"name": "redis", "image": "registry.redhat.io/rhel9/redis-7", "imagePullPolicy": "IfNotPresent",
                   "command": ["/usr/bin/redis-server"], "args": ["/etc/redis.d/redis.conf", "--daemonize", "no"],
                   "resources": {"limits": {"cpu": "500m", "memory": "6Gi"}, "requests": {"cpu": "150m", "memory": "256Mi"}},
                   "readinessProbe": {"exec": {"command": ["container-entrypoint", "bash", "-c", "redis-cli set liveness-probe \"`date`\" | grep OK"]},
                                      "initialDelaySeconds": 10, "periodSeconds": 30, "timeoutSeconds": 1},
                   "livenessProbe": {"tcpSocket": {"port": 6379}, "initialDelaySeconds": 10, "periodSeconds": 10},
                   "volumeMounts": [{"name": name, "mountPath": "/var/lib/redis/data"}, {"name": "redis-config", "mountPath": "/etc/redis.d/"}]}),
            json!([{"name": name, "persistentVolumeClaim": {"claimName": name}},
                   {"name": "redis-config", "configMap": {"name": "redis-config", "items": [{"key": "redis.conf", "path": "redis.conf"}]}}]),
        )
    };
    json!({"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selector},
           "template": {"metadata": {"labels": selector}, "spec": {"volumes": volumes, "containers": [container]}}})
}

/// The in-cluster Postgres `pg` and Redis `kv`, made while the Go
/// operator's Lease is there: in its layout, so its next pass (`e.Spec =
/// d.Spec` over the Deployment, a password kept once set) changes nothing
/// and keeps the Secrets right; isolated by a NetworkPolicy of this
/// operator's all the same. Deleting the CRs removes all of it.
async fn go_takes_back_new_in_cluster_databases(client: &Client, ns: &str) {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let (postgres, redis) = (
        Api::<Postgres>::namespaced(client.clone(), ns),
        Api::<Redis>::namespaced(client.clone(), ns),
    );
    crate::support::wait_phase(&postgres, "pg", Phase::Complete).await;
    crate::support::wait_phase(&redis, "kv", Phase::Complete).await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let policies = Api::<NetworkPolicy>::namespaced(client.clone(), ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    for (kind, name) in [("Postgres", "pg"), ("Redis", "kv")] {
        let mut d = deployments
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let selector = d
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
            .unwrap_or_default();
        assert_eq!(
            selector,
            BTreeMap::from([("deployment".to_string(), name.to_string())]),
            "{name}: not the Go operator's selector"
        );
        // The Go operator's pass: its spec over the live one. Refused as an
        // immutable selector for this operator's layout; no rollout here.
        let generation = d.metadata.generation;
        d.spec = Some(
            serde_json::from_value(go_deployment_spec(kind, name))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let after = deployments
            .replace(name, &PostParams::default(), &d)
            .await
            .unwrap_or_else(|e| panic!("{name}: the Go operator's update is refused: {e}"));
        assert_eq!(
            after.metadata.generation, generation,
            "{name}: the Go operator's spec differs from what was made"
        );
        let policy = policies
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: no NetworkPolicy: {e}"));
        let pods = policy
            .spec
            .and_then(|s| s.pod_selector)
            .and_then(|s| s.match_labels)
            .unwrap_or_default();
        assert_eq!(
            pods, selector,
            "{name}: the NetworkPolicy does not select its pods"
        );
    }
    // buildDefaultPostgresSecret's keys, which the Go operator keeps once
    // set (CreateSecret), and its host (ReconcilePostgres).
    let creds = crate::cco::strings(
        &secrets
            .get("pg-postgres-credentials")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let output = crate::cco::strings(
        &secrets
            .get("pg-sec")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    assert_eq!(
        (creds.get("user"), creds.get("database")),
        (Some(&"postgresuser".to_string()), Some(&"pg".to_string()))
    );
    assert_eq!(
        output.get("password"),
        creds.get("password"),
        "the Secret's password is not the one the Go operator keeps"
    );
    assert_eq!(
        output.get("host"),
        Some(&format!("pg.{ns}.svc.cluster.local"))
    );
    let kv = crate::cco::strings(
        &secrets
            .get("kv-sec")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    assert_eq!(
        kv,
        BTreeMap::from([
            ("uri".to_string(), format!("kv.{ns}.svc.cluster.local")),
            ("port".to_string(), "6379".to_string())
        ])
    );

    postgres
        .delete("pg", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .delete("kv", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&postgres, "pg", DEFAULT_TIMEOUT).await;
    wait_deleted(&redis, "kv", DEFAULT_TIMEOUT).await;
    for name in ["pg", "kv"] {
        wait_deleted(&deployments, name, DEFAULT_TIMEOUT).await;
        wait_deleted(&policies, name, DEFAULT_TIMEOUT).await;
    }
    wait_deleted(&secrets, "pg-postgres-credentials", DEFAULT_TIMEOUT).await;
}

/// The in-cluster Postgres and Redis of the Go operator's openshift
/// provider (pkg/providers/openshift/provider_postgres.go,
/// provider_redis.go): no labels, no owner references, selector
/// `deployment: <name>`, rhscl images, credentials in
/// `<name>-postgres-credentials`, Redis config in the shared `redis-config`.
async fn go_in_cluster(client: &Client, ns: &str, kind: &str, name: &str) -> Value {
    let apply_raw = |kind: &'static str, obj: Value| {
        let client = client.clone();
        let ns = ns.to_string();
        async move {
            let api: Api<DynamicObject> = match kind {
                "Deployment" => Api::namespaced_with(
                    client,
                    &ns,
                    &kube::discovery::ApiResource::erase::<Deployment>(&()),
                ),
                "Service" => Api::namespaced_with(
                    client,
                    &ns,
                    &kube::discovery::ApiResource::erase::<Service>(&()),
                ),
                "PersistentVolumeClaim" => Api::namespaced_with(
                    client,
                    &ns,
                    &kube::discovery::ApiResource::erase::<PersistentVolumeClaim>(&()),
                ),
                "ConfigMap" => Api::namespaced_with(
                    client,
                    &ns,
                    &kube::discovery::ApiResource::erase::<ConfigMap>(&()),
                ),
                _ => Api::namespaced_with(
                    client,
                    &ns,
                    &kube::discovery::ApiResource::erase::<Secret>(&()),
                ),
            };
            let obj: DynamicObject = serde_json::from_value(obj).unwrap_or_else(|e| panic!("{e}"));
            api.create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("creating {kind}: {e}"));
        }
    };
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    apply_raw("PersistentVolumeClaim", pvc).await;
    let selector = json!({"deployment": name});
    let (service_port, output) = if kind == "Postgres" {
        // buildDefaultPostgresSecret: user, a dashless uuid, the CR's name.
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-postgres-credentials")}, "type": "Opaque",
            "stringData": {"user": "postgresuser", "password": "9b1f6a0c2d3e4f5a6b7c8d9e0f1a2b3c", "database": name}});
        apply_raw("Secret", secret).await;
        (
            json!({"name": "postgresql", "protocol": "TCP", "port": 5432, "targetPort": 5432}),
            json!({"username": "postgresuser", "password": "9b1f6a0c2d3e4f5a6b7c8d9e0f1a2b3c", "database": name,
                   "host": format!("{name}.{ns}.svc.cluster.local"), "port": "5432"}),
        )
    } else {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "redis-config"}, "data": {"redis.conf": "port 6379\ndir /var/lib/redis/data\n"}});
        apply_raw("ConfigMap", cm).await;
        (
            json!({"port": 6379, "targetPort": 6379, "protocol": "TCP"}),
            json!({"uri": format!("{name}.{ns}.svc.cluster.local"), "port": "6379"}),
        )
    };
    apply_raw(
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": go_deployment_spec(kind, name)}),
    )
    .await;
    apply_raw(
        "Service",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [service_port], "selector": selector}}),
    )
    .await;
    output
}

#[tokio::test]
async fn in_cluster_workloads_the_go_operator_made_are_adopted_without_an_outage() {
    with_namespace("migrate-incluster", |client, ns| async move {
        ensure_crds(&client).await;
        let spec = |secret: &str| json!({"type": "openshift", "tier": "development", "secretRef": {"name": secret}});
        let mut outputs = BTreeMap::new();
        for (kind, name, provider) in [("Postgres", "db", "openshift-postgres-template"), ("Redis", "cache", "openshift-redis-template")] {
            let output = go_in_cluster(&client, &ns, kind, name).await;
            let secret = format!("{name}-sec");
            let data: Vec<(String, String)> = output.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
            let pairs: Vec<(&str, &str)> = data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let status = json!({"strategy": "openshift", "provider": provider, "secretRef": {"name": secret}, "phase": "complete", "message": "creation successful"});
            if kind == "Postgres" {
                let cr: Postgres = go_cr(&client, &ns, kind, name, spec(&secret), GO_FINALIZER, None).await;
                go_output_secret(&client, &ns, &cr, &secret, &pairs).await;
                go_status::<Postgres>(&client, &ns, name, status).await;
            } else {
                let cr: Redis = go_cr(&client, &ns, kind, name, spec(&secret), GO_FINALIZER, None).await;
                go_output_secret(&client, &ns, &cr, &secret, &pairs).await;
                go_status::<Redis>(&client, &ns, name, status).await;
            }
            outputs.insert(secret, data.into_iter().collect::<BTreeMap<_, _>>());
        }
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let services = Api::<Service>::namespaced(client.clone(), &ns);
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        // Pods of the Go operator's Deployments running (kwok).
        for name in ["db", "cache"] {
            wait_for(&deployments, name, "Available", DEFAULT_TIMEOUT, |d: Option<&Deployment>| {
                d.and_then(|d| d.status.as_ref()).and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
            })
            .await;
        }
        let generations: Vec<Option<i64>> = futures::future::join_all(["db", "cache"].map(|n| {
            let deployments = deployments.clone();
            async move { deployments.get(n).await.unwrap_or_else(|e| panic!("{e}")).metadata.generation }
        }))
        .await;
        let creds_before = read_secret(&secrets.get("db-postgres-credentials").await.unwrap_or_else(|e| panic!("{e}")));

        let op = Operator::start(&ns).await;
        let pg: Postgres = taken_over(&client, &ns, "db").await;
        let _: Redis = taken_over(&client, &ns, "cache").await;
        for (i, name) in ["db", "cache"].into_iter().enumerate() {
            let d = deployments.get(name).await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(d.metadata.generation, generations[i], "{name}: the Deployment's spec was changed");
            assert!(d.owner_references().iter().any(|o| Some(&o.uid) == pg.meta().uid.as_ref() || o.kind == "Redis"), "{name}: not adopted");
            let s = services.get(name).await.unwrap_or_else(|e| panic!("{e}"));
            let selector = s.spec.and_then(|s| s.selector).unwrap_or_default();
            assert_eq!(selector, BTreeMap::from([("deployment".to_string(), name.to_string())]), "{name}: the Service no longer selects the pods");
        }
        assert_eq!(read_secret(&secrets.get("db-postgres-credentials").await.unwrap_or_else(|e| panic!("{e}"))), creds_before, "the password changed");
        for (secret, data) in &outputs {
            assert_eq!(&read_secret(&secrets.get(secret).await.unwrap_or_else(|e| panic!("{e}"))), data, "{secret} changed");
        }

        // A Service deleted by hand comes back in the Go operator's shape.
        services.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let back = wait_for(&services, "db", "Service back", DEFAULT_TIMEOUT, |s: Option<&Service>| s.is_some_and(|s| s.metadata.deletion_timestamp.is_none())).await;
        assert_eq!(back.spec.and_then(|s| s.selector), Some(BTreeMap::from([("deployment".to_string(), "db".to_string())])));
        // So does its Deployment, and open as the Go operator left it: no
        // NetworkPolicy cuts off the clients it had (the policy is applied
        // before the Deployment, so it would be there by now).
        let old_uid = deployments.get("db").await.unwrap_or_else(|e| panic!("{e}")).metadata.uid;
        deployments.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let back = wait_for(&deployments, "db", "Deployment back", DEFAULT_TIMEOUT, move |d: Option<&Deployment>| {
            d.is_some_and(|d| d.metadata.deletion_timestamp.is_none() && d.metadata.uid != old_uid)
        }).await;
        assert!(legacy_selector(&back, "db"), "not the Go operator's shape: {:?}", back.spec);
        let policies = Api::<k8s_openapi::api::networking::v1::NetworkPolicy>::namespaced(client.clone(), &ns);
        assert!(policies.get_opt("db").await.unwrap_or_else(|e| panic!("{e}")).is_none(), "an adopted database was isolated when made again");

        // Deleting the CRs removes what the Go operator made for them.
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let redis = Api::<Redis>::namespaced(client.clone(), &ns);
        pgs.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        redis.delete("cache", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
        wait_deleted(&redis, "cache", DEFAULT_TIMEOUT).await;
        assert!(secrets.get_opt("db-postgres-credentials").await.unwrap_or_else(|e| panic!("{e}")).is_none());
        let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
        assert!(cms.get_opt("redis-config").await.unwrap_or_else(|e| panic!("{e}")).is_none(), "the last Redis's shared config left");
        op.stop().await;
    })
    .await;
}

/// Takeover, second round (#24 items 1–3): RDS instances as the Go
/// operator leaves them (buildRDSCreateStrategy, provider_postgres.go),
/// held by the emulator as AWS holds changes for the maintenance window
/// (tests/testenv/moto_server.py), and CRs as products leave them during
/// an upgrade. The Go operator modified only under `maintenanceWindow`,
/// sent ApplyImmediately only for engine upgrades the CR asked to apply
/// at once (buildRDSUpdateStrategy), and cleared `maintenanceWindow` after
/// every pass over an available instance (ReconcilePostgres). Asserted:
/// no modify carries ApplyImmediately, a class change the Go operator
/// queued stays queued (and shows in pendingChanges) while an online
/// change goes out, `applyImmediately` alone applies nothing disruptive,
/// and `maintenanceWindow` is cleared though nothing differed.
#[tokio::test]
async fn queued_changes_and_maintenance_flags_are_read_as_the_go_operator_did() {
    with_namespace("migrate-window", |client, ns| async move {
        ensure_crds(&client).await;
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        create_go_strategies(&client, &ns).await;
        let password = "5d1c8e7f2a9b4c3d6e0f1a2b3c4d5e6f";
        // Row: (CR name, its live class, CR spec flags)
        let rows = [
            ("queued", "db.t3.small", json!({})),
            ("armed", "db.t3.small", json!({"maintenanceWindow": true})),
            ("immediate", "db.t3.micro", json!({"applyImmediately": true})),
        ];
        let id = |name: &str| cloud_identifier(CLUSTER, &ns, name);
        for (name, class, _) in &rows {
            let mut tags = go_tags(name);
            tags.push(("cro-test/maintenance-window".into(), "held".into()));
            go_rds_instance(&rds, &id(name), class, password, tags).await;
        }
        let describe = |name: &str| {
            let (rds, id) = (rds.clone(), id(name));
            async move {
                let out = rds.describe_db_instances().db_instance_identifier(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
                out.db_instances().first().cloned().unwrap_or_else(|| panic!("no instance {id}"))
            }
        };
        for (name, _, _) in &rows {
            while describe(name).await.db_instance_status() != Some("available") {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
        // The Go operator queued a class change for the window on
        // "queued" (ModifyDBInstance without ApplyImmediately); someone
        // then lifted its deletion protection in the console.
        rds.modify_db_instance().db_instance_identifier(id("queued")).db_instance_class("db.m5.large").apply_immediately(false)
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        rds.modify_db_instance().db_instance_identifier(id("queued")).deletion_protection(false).apply_immediately(false)
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let queued = describe("queued").await;
        assert_eq!(queued.pending_modified_values().and_then(|p| p.db_instance_class()), Some("db.m5.large"), "the emulator did not hold the change");
        for (name, _, flags) in &rows {
            let mut spec = json!({"type": "aws", "tier": "production", "secretRef": {"name": format!("{name}-sec")}});
            spec.as_object_mut().into_iter().for_each(|s| s.extend(flags.as_object().cloned().unwrap_or_default()));
            create_secret(&client, &ns, plain_secret(&format!("{name}-aws-rds-credentials"), &[("user", "postgres"), ("password", password)])).await;
            let _: Postgres = go_cr(&client, &ns, "Postgres", name, spec, GO_FINALIZER, Some(&id(name))).await;
            go_status::<Postgres>(&client, &ns, name, json!({"strategy": "aws", "provider": "aws-rds", "version": "13.13", "phase": "complete",
                "message": format!("rds instance {} is as expected, aws rds status is available", id(name))})).await;
        }

        let since = aws_requests().len();
        let op = Operator::start(&ns).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let pending = |pg: &Postgres| -> Vec<(String, String)> {
            pg.status.iter().flat_map(|s| &s.pending_changes).map(|c| (c.field.clone(), c.when.clone())).collect()
        };
        // Nothing is modified while `maintenanceWindow` is false, as the Go
        // operator modified nothing without it (`if maintenanceWindow {
        // buildRDSUpdateStrategy … }`, provider_postgres.go): the lifted
        // deletion protection waits beside the queued class.
        let pg = wait_for(&pgs, "queued", "the changes shown", DEFAULT_TIMEOUT, move |o: Option<&Postgres>| {
            o.is_some_and(|o| {
                pending(o).contains(&("DeletionProtection".into(), "maintenanceWindow".into()))
                    && pending(o).contains(&("DBInstanceClass".into(), "scheduled for the next maintenance window".into()))
            })
        })
        .await;
        assert_eq!(pg.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete));
        assert_eq!(writes_mentioning(since, &id("queued")), Vec::<String>::new(), "AWS writes for queued before its window opened");
        assert_eq!(describe("queued").await.deletion_protection(), Some(false));

        // The window opens: the online change goes out at once; the queued
        // class stays queued for AWS's window.
        pgs.patch("queued", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maintenanceWindow": true}}))).await.unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while describe("queued").await.deletion_protection() != Some(true) {
            assert!(tokio::time::Instant::now() < deadline, "deletion protection was not restored in the window");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let queued = describe("queued").await;
        assert_eq!(queued.db_instance_class(), Some("db.t3.small"), "the queued class change was pulled forward");
        assert_eq!(queued.pending_modified_values().and_then(|p| p.db_instance_class()), Some("db.m5.large"));
        wait_for(&pgs, "queued", "its maintenanceWindow cleared", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| !o.spec.resource.maintenance_window && o.status.as_ref().and_then(|s| s.phase) == Some(Phase::Complete))
        })
        .await;

        // `maintenanceWindow` is cleared though nothing differed.
        let armed = wait_for(&pgs, "armed", "maintenanceWindow cleared", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| !o.spec.resource.maintenance_window)
        })
        .await;
        assert_eq!(armed.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete));

        // `applyImmediately` alone applies nothing disruptive.
        let immediate: Postgres = taken_over(&client, &ns, "immediate").await;
        assert_eq!(pending(&immediate), [("DBInstanceClass".to_string(), "maintenanceWindow".to_string())]);
        assert_eq!(describe("immediate").await.db_instance_class(), Some("db.t3.micro"));

        let modifies: Vec<Value> = aws_requests().into_iter().skip(since).filter(|r| r["action"] == "ModifyDBInstance").collect();
        let immediately: Vec<&Value> = modifies.iter().filter(|r| r["params"]["ApplyImmediately"] == json!(["true"])).collect();
        assert!(immediately.is_empty(), "modifies carrying ApplyImmediately: {immediately:#?}");
        for name in ["armed", "immediate"] {
            assert_eq!(writes_mentioning(since, &id(name)), Vec::<String>::new(), "AWS writes for {name}");
        }
        assert_eq!(writes_mentioning(since, &id("queued")), ["ModifyDBInstance"], "{modifies:#?}");
        for (name, _, _) in &rows {
            pgs.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for (name, _, _) in &rows {
            wait_deleted(&pgs, name, DEFAULT_TIMEOUT * 2).await;
        }
        op.stop().await;
    })
    .await;
}

/// Takeover, second round (#24 item 7): a Redis CR from before the Go
/// operator wrote the `resourceIdentifier` annotation, whose replication
/// group carries no tags because the Go operator tagged its nodes
/// (`TagElasticacheNode`, provider_redis.go: the first node group's
/// members, by hand-built `cluster:` ARNs). It is recognised as this
/// cluster's by its first node's tags: complete, nothing modified.
#[tokio::test]
async fn an_old_redis_is_recognised_by_its_nodes_tags() {
    with_namespace("migrate-oldredis", |client, ns| async move {
        ensure_crds(&client).await;
        let env = TestEnv::load();
        let ec = aws_sdk_elasticache::Client::new(&env.aws_config().await);
        create_go_strategies(&client, &ns).await;
        let cache_id = cloud_identifier(CLUSTER, &ns, "cache");
        go_redis_group(&ec, &cache_id).await;
        let group = available_group(&ec, &cache_id).await;
        let arn = group.arn().unwrap_or_default();
        let (prefix, _) = arn.rsplit_once(":replicationgroup:").unwrap_or_else(|| panic!("unexpected ARN {arn}"));
        for member in group.member_clusters() {
            let tags = go_tags("cache").into_iter().map(|(k, v)| aws_sdk_elasticache::types::Tag::builder().key(k).value(v).build());
            ec.add_tags_to_resource().resource_name(format!("{prefix}:cluster:{member}")).set_tags(Some(tags.collect()))
                .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        }
        let spec = json!({"type": "aws", "tier": "production", "secretRef": {"name": "cache-sec"}});
        let cache: Redis = go_cr(&client, &ns, "Redis", "cache", spec, GO_FINALIZER, None).await;
        let primary = group.node_groups().first().and_then(|n| n.primary_endpoint()).and_then(|e| e.address()).unwrap_or_default().to_string();
        go_output_secret(&client, &ns, &cache, "cache-sec", &[("uri", &primary), ("port", "6379")]).await;
        go_status::<Redis>(&client, &ns, "cache", json!({"strategy": "aws", "provider": "aws-elasticache", "version": "7.1", "secretRef": {"name": "cache-sec"},
            "phase": "complete", "message": "successfully created and tagged, aws elasticache status is available"})).await;

        let since = aws_requests().len();
        let op = Operator::start(&ns).await;
        let taken: Redis = taken_over(&client, &ns, "cache").await;
        let adopted = taken.status.iter().flat_map(|s| &s.conditions).find(|c| c.type_ == "Adopted").map(|c| c.status.clone());
        assert_ne!(adopted.as_deref(), Some("False"), "waiting for adoption: {:?}", taken.status);
        assert_eq!(writes_mentioning(since, &cache_id), Vec::<String>::new(), "AWS writes for {cache_id}");
        let redis = Api::<Redis>::namespaced(client.clone(), &ns);
        redis.delete("cache", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&redis, "cache", DEFAULT_TIMEOUT * 2).await;
        op.stop().await;
    })
    .await;
}

/// Takeover, second round (#24 item 8): the Go operator used the
/// identifiers its strategies name as given (buildRDSCreateStrategy,
/// buildRDSDeleteConfig, buildElasticacheDeleteConfig), and honoured
/// `RetainPrimaryCluster`. A tier that pins a Postgres's instance and final
/// snapshot names, and a Redis deleteStrategy as its helper writes it,
/// work: the instance is created and found under the tier's name, and
/// deleting leaves the final snapshot the tier names.
#[tokio::test]
async fn identifiers_a_tier_names_are_used_as_given() {
    use crate::support::{create_json, wait_phase};
    with_namespace("migrate-pinned", |client, ns| async move {
        ensure_crds(&client).await;
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let pinned = format!("pinned{}", ns.replace('-', ""));
        let final_snapshot = format!("{pinned}-last");
        let tiers = json!({
            "postgres": json!({"production": {"createStrategy": {"DBInstanceIdentifier": pinned},
                "deleteStrategy": {"DBInstanceIdentifier": null, "FinalDBSnapshotIdentifier": final_snapshot, "SkipFinalSnapshot": null}}}).to_string(),
            "redis": json!({"production": {"deleteStrategy": {"ReplicationGroupId": null, "RetainPrimaryCluster": false, "FinalSnapshotIdentifier": null}}}).to_string(),
        });
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resources-aws-strategies"}, "data": tiers}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &cm).await.unwrap_or_else(|e| panic!("{e}"));
        let op = Operator::start(&ns).await;
        let cr = |kind: &str, name: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"type": "aws", "tier": "production", "secretRef": {"name": format!("{name}-sec")}}});
        create_json::<Postgres>(&client, &ns, cr("Postgres", "db")).await;
        create_json::<Redis>(&client, &ns, cr("Redis", "cache")).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let redis = Api::<Redis>::namespaced(client.clone(), &ns);
        let db = wait_phase(&pgs, "db", Phase::Complete).await;
        wait_phase(&redis, "cache", Phase::Complete).await;
        assert_eq!(db.annotations().get("resourceIdentifier"), Some(&pinned));
        rds.describe_db_instances().db_instance_identifier(&pinned).send().await
            .unwrap_or_else(|e| panic!("no instance under the tier's name {pinned}: {e:?}"));

        for (api, name) in [(&pgs, "db")] {
            api.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(api, name, DEFAULT_TIMEOUT * 2).await;
        }
        redis.delete("cache", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&redis, "cache", DEFAULT_TIMEOUT * 2).await;
        rds.describe_db_snapshots().db_snapshot_identifier(&final_snapshot).send().await
            .unwrap_or_else(|e| panic!("no final snapshot under the tier's name {final_snapshot}: {e:?}"));
        op.stop().await;
    })
    .await;
}

/// Takeover, second round (#24 item 6): the Go operator reads its
/// strategies ConfigMaps from its WATCH_NAMESPACE (`DefaultConfigMapNamespace`,
/// pkg/providers/aws/config.go). Run with that one namespace watched and
/// another operator namespace holding no strategies, the operator uses the
/// Go operator's tiers (not its built-in ones) and follows their edits.
#[tokio::test]
async fn strategies_are_found_where_the_go_operator_reads_them() {
    use crate::support::{Launch, create_json, create_namespace, wait_phase};
    with_namespace("migrate-where", |client, ns| async move {
        ensure_crds(&client).await;
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let elsewhere = create_namespace(&client, "migrate-opns").await;
        let tiers = |class: &str| json!({"postgres": json!({"production": {"createStrategy": {"DBInstanceClass": class}}}).to_string()});
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resources-aws-strategies"}, "data": tiers("db.t3.micro")}))
            .unwrap_or_else(|e| panic!("{e}"));
        let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
        cms.create(&PostParams::default(), &cm).await.unwrap_or_else(|e| panic!("{e}"));
        // The Go layout is an explicit choice (docs/migration.md).
        let mut launch = Launch { operator_namespace: Some(elsewhere.clone()), ..Launch::new(&ns) };
        launch.extra_args.push("--namespace-config=true".into());
        let op = Operator::launch(launch).await;
        create_json::<Postgres>(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "aws", "tier": "production", "secretRef": {"name": "db-sec"}}})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        let id = cloud_identifier(CLUSTER, &ns, "db");
        let class = || async {
            let out = rds.describe_db_instances().db_instance_identifier(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            out.db_instances().first().and_then(|d| d.db_instance_class()).unwrap_or_default().to_string()
        };
        assert_eq!(class().await, "db.t3.micro", "the built-in tier was used");
        // An edit of the Go operator's ConfigMap reaches the CR.
        cms.patch("cloud-resources-aws-strategies", &PatchParams::default(), &Patch::Merge(json!({"data": tiers("db.t3.medium")})))
            .await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&pgs, "db", "the edited tier's difference", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| o.status.iter().flat_map(|s| &s.pending_changes).any(|c| c.field == "DBInstanceClass" && c.desired == "db.t3.medium"))
        })
        .await;
        pgs.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT * 2).await;
        op.stop().await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()).delete(&elsewhere, &DeleteParams::default()).await;
    })
    .await;
}

/// Takeover, second round (#24 item 4): the Go operator forced its
/// supported engine version at create (`buildRDSCreateStrategy`: 13.13
/// unless the tier names 13.11-13.13), so an instance it made under a tier
/// that says 15.2 runs 13.13. Taken over, that tier version is no major
/// upgrade at the next window: it shows as `never`, saying what to set,
/// and nothing is modified.
#[tokio::test]
async fn a_version_the_go_operator_overrode_is_no_major_upgrade() {
    with_namespace("migrate-version", |client, ns| async move {
        ensure_crds(&client).await;
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let tiers = json!({"postgres": json!({"production": {"createStrategy": {"EngineVersion": "15.2"}}}).to_string()});
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resources-aws-strategies"}, "data": tiers}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &cm).await.unwrap_or_else(|e| panic!("{e}"));
        let id = cloud_identifier(CLUSTER, &ns, "db");
        let password = "6e2d9f8a3b0c5d4e7f1a2b3c4d5e6f70";
        go_rds_instance(&rds, &id, "db.t3.small", password, go_tags("db")).await;
        create_secret(&client, &ns, plain_secret("db-aws-rds-credentials", &[("user", "postgres"), ("password", password)])).await;
        let spec = json!({"type": "aws", "tier": "production", "maintenanceWindow": true, "secretRef": {"name": "db-sec"}});
        let _: Postgres = go_cr(&client, &ns, "Postgres", "db", spec, GO_FINALIZER, Some(&id)).await;
        go_status::<Postgres>(&client, &ns, "db", json!({"strategy": "aws", "provider": "aws-rds", "version": "13.13", "phase": "complete",
            "message": format!("rds instance {id} is as expected, aws rds status is available")})).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        loop {
            let out = rds.describe_db_instances().db_instance_identifier(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            if out.db_instances().first().and_then(|d| d.db_instance_status()) == Some("available") { break; }
            assert!(tokio::time::Instant::now() < deadline, "instance {id} never available");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }

        let since = aws_requests().len();
        let op = Operator::start(&ns).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let pg = wait_for(&pgs, "db", "the version difference shown", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| o.status.iter().flat_map(|s| &s.pending_changes).any(|c| c.field == "EngineVersion" && c.when.contains("AllowMajorVersionUpgrade")))
        })
        .await;
        assert_eq!(pg.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete));
        assert_eq!(writes_mentioning(since, &id), Vec::<String>::new(), "AWS writes for {id}");
        pgs.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT * 2).await;
        op.stop().await;
    })
    .await;
}

/// The configuration ConfigMaps of config/, as deploy/ and the chart
/// install them into the operator's namespace.
pub(crate) async fn install_shipped_configuration(client: &Client, ns: &str) {
    let dir = crate::support::repo_root().join("config");
    for name in [
        "cloud-resource-config",
        "cloud-resources-aws-strategies",
        "cloud-resources-openshift-strategies",
    ] {
        let path = dir.join(format!("{name}.yaml"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let cm: ConfigMap =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &cm)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// A real Go installation switches (issue #41's "done when"): this
/// operator installed as deploy/ installs it (config/ in its own namespace),
/// with no AWS keys of its own, only the Cloud Credential Operator's Secret
/// the Go operator's CredentialsRequest made; WATCH_NAMESPACE the Go
/// operator's namespace, holding its tiers (with fields it passed through
/// to AWS and a pinned bucket) and its cloud-resource-config. The Go-made
/// RDS instance and pinned bucket become complete untouched, and a new
/// Postgres gets the tier's pass-through MasterUsername.
#[tokio::test]
async fn a_real_go_installation_switches_with_its_tiers_credentials_and_pinned_bucket() {
    use crate::support::{Launch, create_namespace, wait_phase};
    with_namespace("go-switch", |client, ns| async move {
        ensure_crds(&client).await;
        let env = TestEnv::load();
        let config = env.aws_config().await;
        let (rds, iam, s3) = (aws_sdk_rds::Client::new(&config), aws_sdk_iam::Client::new(&config), env.s3().await);
        let opns = create_namespace(&client, "go-switch-op").await;
        install_shipped_configuration(&client, &opns).await;

        // The Go operator's own key: CCO mints it for its CredentialsRequest
        // cloud-resources-aws-credentials (ReconcileProviderCredentials,
        // pkg/providers/aws/credentials.go) into the operator's namespace.
        let go_user = format!("cco-{ns}-operator");
        iam.create_user().user_name(&go_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let go_key = iam.create_access_key().user_name(&go_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let go_key = go_key.access_key().cloned().unwrap_or_else(|| panic!("no key"));
        let operator_entries = std::fs::read_to_string(crate::support::repo_root().join("tests/fixtures/go-operator/operator-policy.json"))
            .ok().and_then(|p| serde_json::from_str::<Value>(&p).ok()).map(|p| p["Statement"].clone()).unwrap_or_default();
        let operator_entries = json!(operator_entries.as_array().into_iter().flatten()
            .map(|s| json!({"effect": s["Effect"], "action": s["Action"], "resource": s["Resource"]})).collect::<Vec<_>>());
        create_secret(&client, &opns, go_minted(&opns, "cloud-resources-aws-credentials",
            (go_key.access_key_id(), go_key.secret_access_key()), &go_user, operator_entries)).await;

        // Its cloud-resource-config (buildDefaultConfigMap, pkg/providers/config.go)
        // with the type a platform added, and its tiers: the helper's null
        // fields (go_strategies), fields it passed through to AWS, and a
        // tier pinning a bucket (S3 CreateBucketInput.Bucket).
        let types: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resource-config"}, "data": {
            "openshift": "{\"blobstorage\":\"openshift\", \"redis\":\"openshift\", \"postgres\":\"openshift\"}",
            "aws": "{\"blobstorage\":\"aws\", \"redis\":\"aws\", \"postgres\":\"aws\"}",
            "gcp": "{\"blobstorage\":\"gcp\", \"redis\":\"gcp\", \"postgres\":\"gcp\"}",
            "rhoam": "{\"blobstorage\":\"aws\", \"redis\":\"aws\", \"postgres\":\"aws\"}"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &types).await.unwrap_or_else(|e| panic!("{e}"));
        let pinned = format!("go-pinned-{}", ns.rsplit('-').next().unwrap_or_default());
        let mut data = go_strategies();
        let mut postgres: Value = serde_json::from_str(&data["postgres"]).unwrap_or_else(|e| panic!("{e}"));
        for (field, value) in [("MasterUsername", json!("postgres")), ("MonitoringInterval", json!(0)), ("EnablePerformanceInsights", json!(false)),
            ("OptionGroupName", json!("default:postgres-13")), ("AvailabilityZone", json!(format!("{}a", env.aws_region)))] {
            postgres["production"]["createStrategy"][field] = value;
        }
        postgres["development"]["createStrategy"] = json!({"MasterUsername": "cro_admin", "MonitoringInterval": 0, "EnablePerformanceInsights": false});
        data.insert("postgres".into(), postgres.to_string());
        let blob_tiers = json!({"production": {"region": "", "_network": "", "createStrategy": {"Bucket": pinned, "ACL": null}, "deleteStrategy": {}}});
        data.insert("blobstorage".into(), blob_tiers.to_string());
        let strategies: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resources-aws-strategies"}, "data": data}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &strategies).await.unwrap_or_else(|e| panic!("{e}"));

        // The Go operator's Postgres (as in the first takeover test) and
        // its pinned bucket (reconcileBucketCreate, TagBlobStorage; key
        // minted by CCO for cro-aws-s3-<bucket>-creds).
        let spec = |secret: &str| json!({"type": "rhoam", "tier": "production", "secretRef": {"name": secret}});
        let password = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e";
        let (pg, db_id) = go_postgres(&client, &rds, &ns, spec("db-sec"), password).await;
        s3.create_bucket().bucket(&pinned)
            .create_bucket_configuration(aws_sdk_s3::types::CreateBucketConfiguration::builder().location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(env.aws_region.as_str())).build())
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let tag_set = go_tags("assets").into_iter().map(|(k, v)| aws_sdk_s3::types::Tag::builder().key(k).value(v).build().unwrap_or_else(|e| panic!("{e}"))).collect();
        s3.put_bucket_tagging().bucket(&pinned).tagging(aws_sdk_s3::types::Tagging::builder().set_tag_set(Some(tag_set)).build().unwrap_or_else(|e| panic!("{e}")))
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let bucket_user = format!("cco-{ns}-assets");
        iam.create_user().user_name(&bucket_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let key = iam.create_access_key().user_name(&bucket_user).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let key = key.access_key().cloned().unwrap_or_else(|| panic!("no key"));
        create_secret(&client, &ns, go_minted(&ns, &format!("cro-aws-s3-{pinned}-creds"),
            (key.access_key_id(), key.secret_access_key()), &bucket_user, go_bucket_entries(&pinned))).await;
        let blob: BlobStorage = go_cr(&client, &ns, "BlobStorage", "assets", spec("assets-sec"), GO_FINALIZER, Some(&pinned)).await;
        go_postgres_complete(&client, &rds, &ns, &pg, &db_id, password).await;
        go_output_secret(&client, &ns, &blob, "assets-sec", &[("bucketName", &pinned), ("bucketRegion", &env.aws_region),
            ("credentialKeyID", key.access_key_id()), ("credentialSecretKey", key.secret_access_key())]).await;
        // Months later a backup tool has labelled it (Velero's
        // `velero.io/backup-name` on what it restored); the Go operator's
        // ReconcileResultSecret (pkg/resources/provider.go) wrote it regardless.
        Api::<Secret>::namespaced(client.clone(), &ns)
            .patch("assets-sec", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"velero.io/backup-name": "nightly"}}})))
            .await.unwrap_or_else(|e| panic!("{e}"));
        go_status::<BlobStorage>(&client, &ns, "assets", json!({"strategy": "aws", "provider": "aws-s3", "secretRef": {"name": "assets-sec"},
            "phase": "complete", "message": "successfully created and tagged"})).await;

        // Switch: installed as deploy/ installs it, with no keys of its own.
        // With the Go layout turned on, as docs/migration.md says.
        let since = aws_requests().len();
        let mut launch = Launch {
            operator_namespace: Some(opns.clone()),
            env_remove: vec!["AWS_ACCESS_KEY_ID".into(), "AWS_SECRET_ACCESS_KEY".into(), "AWS_SESSION_TOKEN".into()],
            ..Launch::new(&ns)
        };
        launch.extra_args.push("--namespace-config=true".into());
        let op = Operator::launch(launch).await;
        op.wait_log(&format!("Cloud Credential Operator's Secret {opns}/cloud-resources-aws-credentials"), DEFAULT_TIMEOUT).await;
        let pg: Postgres = taken_over(&client, &ns, "db").await;
        let _: BlobStorage = taken_over(&client, &ns, "assets").await;
        let status = pg.status.clone().unwrap_or_default();
        assert!(status.pending_changes.is_empty(), "the shipped sample tier shadowed the Go one: {:?}", status.pending_changes);
        let writes: Vec<String> = aws_requests().into_iter().skip(since)
            .filter(|r| r["action"] == "ModifyDBInstance" && r["params"].to_string().contains(&db_id))
            .map(|r| r["params"].to_string()).collect();
        assert!(writes.is_empty(), "the Go instance was modified: {writes:?}");
        assert_eq!(writes_mentioning(since, &pinned), Vec::<String>::new(), "AWS writes for the pinned bucket");
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let assets = read_secret(&secrets.get("assets-sec").await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(assets.get("bucketName"), Some(&pinned));

        // A new Postgres under the Go tier gets what it passed through.
        create_json_postgres(&client, &ns, "fresh", json!({"type": "rhoam", "tier": "development", "secretRef": {"name": "fresh-sec"}})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "fresh", Phase::Complete).await;
        let fresh_id = cloud_identifier(CLUSTER, &ns, "fresh");
        let out = rds.describe_db_instances().db_instance_identifier(&fresh_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let user = out.db_instances().first().and_then(|d| d.master_username()).map(str::to_string);
        assert_eq!(user.as_deref(), Some("cro_admin"), "createStrategy.MasterUsername not passed through");
        let fresh = read_secret(&secrets.get("fresh-sec").await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(fresh.get("username").map(String::as_str), Some("cro_admin"));

        for name in ["fresh", "db"] {
            pgs.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for name in ["fresh", "db"] {
            wait_deleted(&pgs, name, DEFAULT_TIMEOUT * 2).await;
        }
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        blobs.delete("assets", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "assets", DEFAULT_TIMEOUT).await;
        op.stop().await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()).delete(&opns, &DeleteParams::default()).await;
    })
    .await;
}

async fn create_json_postgres(client: &Client, ns: &str, name: &str, spec: Value) {
    crate::support::create_json::<Postgres>(client, ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": name}, "spec": spec})).await;
}

/// A CR the Go operator's GCP provider made (type mapped to `gcp` by its
/// default cloud-resource-config, `buildDefaultConfigMap`,
/// pkg/providers/config.go): this operator has no GCP provider, so
/// deleting the CR keeps the finalizer (nothing leaks silently) and says
/// what to do; once a person removes the finalizers, it goes.
#[tokio::test]
async fn a_gcp_crs_deletion_says_what_a_person_does() {
    with_namespace("migrate-gcp", |client, ns| async move {
        ensure_crds(&client).await;
        let types: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resource-config"}, "data": {
            "gcp": "{\"blobstorage\":\"gcp\", \"redis\":\"gcp\", \"postgres\":\"gcp\"}"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &types).await.unwrap_or_else(|e| panic!("{e}"));
        let spec = json!({"type": "gcp", "tier": "production", "secretRef": {"name": "db-sec"}});
        let _: Postgres = go_cr(&client, &ns, "Postgres", "db", spec, GO_FINALIZER, Some("gcp-instance-1")).await;
        go_status::<Postgres>(&client, &ns, "db", json!({"strategy": "gcp", "provider": "gcp-cloudsql", "phase": "complete", "message": "creation successful"})).await;
        let op = Operator::start(&ns).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        pgs.delete("db", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let stuck = wait_for(&pgs, "db", "a message on what to do", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).is_some_and(|s| s.message.as_deref().unwrap_or_default().contains("cannot delete what that provider made"))
        })
        .await;
        let message = stuck.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("gcp-instance-1") && message.contains("finalizers\":null"), "{message}");
        assert!(stuck.metadata.finalizers.is_some_and(|f| !f.is_empty()), "the finalizer went: a GCP resource leaked silently");
        pgs.patch("db", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
        op.stop().await;
    })
    .await;
}

/// A cluster-wide Go installation asked for its AWS credentials in each
/// CR's namespace (`ReconcileProviderCredentials(ctx, pg.Namespace)`,
/// pkg/providers/aws/provider_postgres.go; the CredentialsRequest's
/// Secret `cloud-resources-aws-credentials` lands in that namespace,
/// credentials.go `reconcileCredentialRequest`), so its own namespace may
/// hold none. Such a Secret in a CR's namespace is named for a person,
/// never used: a tenant may create one of that name (here, through its
/// own identity), and would choose the account of every CR's resources.
#[tokio::test]
async fn a_secret_named_as_the_go_operators_credentials_in_a_crs_namespace_is_never_used() {
    use cloud_resource_operator::providers::aws_identity::{
        CCO_SECRET, Source, choose_in_cluster, go_secrets_elsewhere,
    };
    with_namespace("gocreds", |client, ns| async move {
        let tenant = crate::support::tenant_client(&client, &ns).await;
        let planted = plain_secret(
            CCO_SECRET,
            &[
                ("aws_access_key_id", "AKIATENANT"),
                ("aws_secret_access_key", "tenant"),
            ],
        );
        create_secret(&tenant, &ns, planted).await;
        // An operator namespace with no such Secret, watching everything.
        let operator_namespace = format!("{ns}-operator");
        let chosen = choose_in_cluster(&client, &operator_namespace, &[], None)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(chosen.source, Source::StandardChain);
        assert!(chosen.keys.is_none(), "keys read from somewhere");
        let named = go_secrets_elsewhere(&client, &operator_namespace)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(named.contains(&ns), "{named:?}");
        // The operator's own namespace is not "elsewhere".
        let named = go_secrets_elsewhere(&client, &ns)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(!named.contains(&ns), "{named:?}");
    })
    .await;
}

/// The calls the private emulators of [`crate::iam_policy::start_moto`]
/// served (their query-protocol services: RDS, ElastiCache, IAM).
fn private_requests() -> Vec<Value> {
    let log =
        crate::support::repo_root().join("target/testenv/logs/moto-iam-enforced-requests.jsonl");
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    (lines.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// The create, modify and delete calls of [`private_requests`] after the
/// first `since` whose parameters mention `text`.
fn private_writes_mentioning(since: usize, text: &str) -> Vec<String> {
    private_requests()
        .into_iter()
        .skip(since)
        .filter(|r| r["params"].to_string().contains(text))
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .filter(|a| {
            ["Create", "Modify", "Delete"]
                .iter()
                .any(|p| a.starts_with(p))
        })
        .collect()
}

/// A Go installation as it ran: its AWS identity is the key the Cloud
/// Credential Operator minted for its CredentialsRequest, which grants
/// exactly `operatorEntries` (pkg/providers/aws/credentials.go;
/// tests/fixtures/go-operator/operator-policy.json): no
/// `elasticache:ListTagsForResource`, no `s3:GetBucketTagging`, no
/// `tag:GetResources`. Switched without widening that policy, its
/// Postgres, Redis, bucket and snapshots are served as they are: all
/// `complete`, nothing failed, nothing created, modified or deleted, the
/// refused reads named; deleting the snapshot CRs deletes their snapshots
/// (issue #58).
#[tokio::test]
async fn a_go_installation_switches_under_exactly_its_own_iam_policy() {
    use crate::iam_policy::{
        cco_secret, cluster_vpc, enforce_iam_after, iam_as, named_user_with_the_policy, start_moto,
        unenforced, user_with_the_policy,
    };
    let moto = start_moto().await;
    let vpc = cluster_vpc(&moto.endpoint).await;
    let path = crate::support::repo_root().join("tests/fixtures/go-operator/operator-policy.json");
    let go_policy: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let key = user_with_the_policy(&moto.endpoint, &go_policy).await;
    // The Cloud Credential Operator's own identity, which may manage users.
    let everything = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]});
    let cco_key =
        named_user_with_the_policy(&moto.endpoint, "cloud-credential-operator", &everything).await;
    let admin = unenforced(&moto.endpoint).await;
    let endpoint = moto.endpoint.clone();
    with_namespace("gopolicy", move |client, ns| async move {
        ensure_crds(&client).await;
        let region = TestEnv::load().aws_region;
        let (rds, ec) = (aws_sdk_rds::Client::new(&admin), aws_sdk_elasticache::Client::new(&admin));
        let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&admin).force_path_style(true).build());
        create_go_strategies(&client, &ns).await;
        // A tier edit the Go operator had not applied: it modifies an
        // instance only on a pass with spec.maintenanceWindow
        // (`if maintenanceWindow { buildRDSUpdateStrategy … }`,
        // ReconcilePostgres in provider_postgres.go), and made it with
        // defaultAwsBackupRetentionPeriod, 31.
        let mut postgres_tiers: Value = serde_json::from_str(&go_strategies()["postgres"]).unwrap_or_else(|e| panic!("{e}"));
        postgres_tiers["production"]["createStrategy"]["BackupRetentionPeriod"] = json!(20);
        Api::<ConfigMap>::namespaced(client.clone(), &ns).patch("cloud-resources-aws-strategies", &PatchParams::default(),
            &Patch::Merge(json!({"data": {"postgres": postgres_tiers.to_string()}}))).await.unwrap_or_else(|e| panic!("{e}"));
        let spec = |secret: &str| json!({"type": "aws", "tier": "production", "secretRef": {"name": secret}});

        // What the Go operator made, made with the emulator's own keys
        // before IAM is enforced: a Postgres (go_postgres), a Redis
        // (buildElasticacheCreateStrategy) and a bucket
        // (provider_blobstorage.go, its key from a CCO CredentialsRequest).
        let password = "5b9e2c7d1a3f4e8b9c0d1e2f3a4b5c6d";
        let (pg, db_id) = go_postgres(&client, &rds, &ns, spec("db-sec"), password).await;
        let cache_id = cloud_identifier(CLUSTER, &ns, "cache");
        go_redis_group(&ec, &cache_id).await;
        let cache: Redis = go_cr(&client, &ns, "Redis", "cache", spec("cache-sec"), GO_FINALIZER, Some(&cache_id)).await;
        let bucket = cloud_identifier(CLUSTER, &ns, "blob");
        go_bucket(&s3, &bucket, &region).await;
        create_secret(&client, &ns, go_minted(&ns, &format!("cro-aws-s3-{bucket}-creds"), ("AKIAGOBUCKETOWNER", "go-bucket-owner"),
            &format!("testcluster-cro-aws-s3-{bucket}-creds"), go_bucket_entries(&bucket))).await;
        let blob: BlobStorage = go_cr(&client, &ns, "BlobStorage", "blob", spec("blob-sec"), GO_FINALIZER, Some(&bucket)).await;
        go_postgres_complete(&client, &rds, &ns, &pg, &db_id, password).await;
        go_redis_complete(&client, &ec, &ns, &cache, &cache_id).await;
        go_output_secret(&client, &ns, &blob, "blob-sec", &[("bucketName", &bucket), ("bucketRegion", &region),
            ("credentialKeyID", "AKIAGOBUCKETOWNER"), ("credentialSecretKey", "go-bucket-owner")]).await;
        go_status::<BlobStorage>(&client, &ns, "blob", json!({"strategy": "aws", "provider": "aws-s3", "secretRef": {"name": "blob-sec"},
            "phase": "complete", "message": "successfully created and tagged"})).await;
        // Its snapshots: createPostgresSnapshot and createRedisSnapshot tag
        // them with their own identifier; TagRDSPostgres and
        // TagElasticacheNode re-tag them with the parent's on later passes.
        let pg_snap_id = go_postgres_snapshot(&client, &rds, &ns, &db_id, Some("db")).await;
        go_status::<PostgresSnapshot>(&client, &ns, "db-snap", json!({"snapshotID": pg_snap_id, "phase": "complete", "message": "snapshot created", "strategy": "aws"})).await;
        let redis_snap_id = go_redis_snapshot(&client, &ec, &ns, &cache_id, Some("cache")).await;
        go_status::<RedisSnapshot>(&client, &ns, "cache-snap", json!({"snapshotID": redis_snap_id, "phase": "complete", "message": "snapshot created"})).await;

        // The switch: IAM enforced; the operator's identity is the CCO
        // Secret holding the key with exactly the Go policy.
        enforce_iam_after(&endpoint, 0).await;
        create_secret(&client, &ns, cco_secret(&key)).await;
        let since = private_requests().len();
        let mut launch = Launch::new(&ns);
        launch.extra_args.push(format!("--aws-vpc-id={vpc}"));
        launch.env.push(("AWS_ENDPOINT_URL".into(), endpoint.clone()));
        launch.env_remove = vec!["AWS_ACCESS_KEY_ID".into(), "AWS_SECRET_ACCESS_KEY".into()];
        let op = Operator::launch(launch.clone()).await;
        let _: Postgres = taken_over(&client, &ns, "db").await;
        let _: Redis = taken_over(&client, &ns, "cache").await;
        let _: BlobStorage = taken_over(&client, &ns, "blob").await;
        let _: PostgresSnapshot = taken_over(&client, &ns, "db-snap").await;
        let _: RedisSnapshot = taken_over(&client, &ns, "cache-snap").await;
        // The refused reads are named where a person looks.
        let refused = |action: &'static str| move |o: Option<&DynamicObject>| {
            let conditions = o.and_then(|o| o.data["status"]["conditions"].as_array().cloned()).unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "AWSPermissions" && c["message"].as_str().is_some_and(|m| m.contains(action)))
        };
        let api = |kind: &str| {
            let plural = cloud_resource_operator::api::crds().into_iter().find(|c| c.spec.names.kind == kind).map(|c| c.spec.names.plural).unwrap_or_default();
            let resource = kube::discovery::ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind), &plural);
            Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &resource)
        };
        wait_for(&api("Redis"), "cache", "AWSPermissions naming elasticache:ListTagsForResource", DEFAULT_TIMEOUT, refused("elasticache:ListTagsForResource")).await;
        wait_for(&api("BlobStorage"), "blob", "AWSPermissions naming s3:GetBucketTagging", DEFAULT_TIMEOUT, refused("s3:GetBucketTagging")).await;
        for id in [&db_id, &cache_id, &pg_snap_id, &redis_snap_id] {
            assert_eq!(private_writes_mentioning(since, id), Vec::<String>::new(), "AWS writes for {id}");
        }
        // The window opens: the pending edit goes out, once.
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        pgs.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maintenanceWindow": true}})))
            .await.unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while private_writes_mentioning(since, &db_id).is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "no ModifyDBInstance after maintenanceWindow: true");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        wait_for(&pgs, "db", "maintenanceWindow written back to false", DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| o.is_some_and(|o| !o.spec.resource.maintenance_window)).await;
        assert_eq!(private_writes_mentioning(since, &db_id), ["ModifyDBInstance"], "the window's writes for {db_id}");
        // The bucket kept its tags (read with the emulator's own keys while
        // no operator runs and IAM is not enforced), and a restart under
        // the Go policy serves the rest.
        op.stop().await;
        enforce_iam_after(&endpoint, 1_000_000).await;
        let retention = rds.describe_db_instances().db_instance_identifier(&db_id).send().await.ok()
            .and_then(|o| o.db_instances().first().and_then(|i| i.backup_retention_period()));
        assert_eq!(retention, Some(20), "the tier edit applied");
        let blob_tags = s3.get_bucket_tagging().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(blob_tags.tag_set().len(), go_tags("blob").len(), "the bucket's tags were rewritten: {blob_tags:?}");
        enforce_iam_after(&endpoint, 0).await;
        let op = Operator::launch(Launch { log_name: format!("operator-{ns}-restarted.log"), ..launch.clone() }).await;

        // Deleting the snapshot CRs deletes the Go operator's snapshots.
        for (kind, name) in [("PostgresSnapshot", "db-snap"), ("RedisSnapshot", "cache-snap")] {
            api(kind).delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&api(kind), name, DEFAULT_TIMEOUT).await;
        }
        assert!(rds.describe_db_snapshots().db_snapshot_identifier(&pg_snap_id).send().await.is_err(), "{pg_snap_id} left");
        let left = ec.describe_snapshots().snapshot_name(&redis_snap_id).send().await.map(|o| o.snapshots().len()).unwrap_or(0);
        assert_eq!(left, 0, "{redis_snap_id} left");
        for (kind, name) in [("BlobStorage", "blob"), ("Redis", "cache"), ("Postgres", "db")] {
            api(kind).delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&api(kind), name, DEFAULT_TIMEOUT * 2).await;
        }
        let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &ns);
        let failed: Vec<String> = (events.list(&Default::default()).await).unwrap_or_else(|e| panic!("{e}")).items.into_iter()
            .filter(|e| e.reason.as_deref() == Some("Failed")).map(|e| e.message.unwrap_or_default()).collect();
        assert!(failed.is_empty(), "failed under the Go policy: {failed:?}");

        // A new BlobStorage needs a key of its own, and the Go policy
        // refuses IAM users. Where no Cloud Credential Operator runs (no
        // CredentialsRequest API; the environment may keep CCO's CRD from
        // an earlier run), it is refused before a bucket is made, naming
        // the fix.
        use crate::support::Phased as _;
        let cco_crd_absent = CCO_CRD.write().await;
        remove_cco_crd(&client).await;
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let _: BlobStorage = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "BlobStorage", "metadata": {"name": "newblob"}, "spec": spec("newblob-sec")})).await;
        // (AWS answers AccessDenied, and the CR fails; the emulator's
        // refusal has no code, so it is retried: the message is the same.)
        let refused = wait_for(&blobs, "newblob", "the refusal named", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| {
            o.is_some_and(|o| o.message().contains("nothing was created"))
        }).await.message();
        assert!(refused.contains("no Cloud Credential Operator runs") && refused.contains("docs/operations.md"), "{refused}");
        let new_bucket = (refused.split("a new bucket ").nth(1).and_then(|r| r.split(' ').next()))
            .unwrap_or_else(|| panic!("no bucket named: {refused}")).to_string();
        // Deleted as it is (nothing to delete), not stuck on IAM.
        blobs.delete("newblob", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "newblob", DEFAULT_TIMEOUT).await;
        op.stop().await;
        enforce_iam_after(&endpoint, 1_000_000).await;
        // Not found, not merely refused: the emulator's own keys may read.
        let looked = s3.head_bucket().bucket(&new_bucket).send().await;
        let missing = looked.as_ref().err().and_then(|e| e.as_service_error()).is_some_and(|e| e.is_not_found());
        assert!(missing, "bucket {new_bucket} was made, or could not be looked at: {looked:?}");

        // On OpenShift, CCO runs (its CRD as published; cco.rs stands in
        // for it): the key is asked for as the Go operator asked
        // (ReconcileBucketOwnerCredentials, provider_blobstorage.go), the
        // bucket made, and the CR complete with CCO's key, which writes to
        // the bucket under IAM.
        // A Go bucket whose key Secret is gone: under this policy it is
        // the CR's by its identifier alone, which a tenant could forge, so
        // CCO is never asked for a key to it.
        let orphan = cloud_identifier(CLUSTER, &ns, "orphan");
        go_bucket(&s3, &orphan, &region).await;
        let _: BlobStorage = go_cr(&client, &ns, "BlobStorage", "orphan", spec("orphan-sec"), GO_FINALIZER, Some(&orphan)).await;
        crate::support::ensure_cco_crd(&client).await;
        drop(cco_crd_absent);
        let _cco = crate::cco::Cco::start(client.clone(), &ns, iam_as(&endpoint, &cco_key).await);
        enforce_iam_after(&endpoint, 0).await;
        let op = Operator::launch(Launch { log_name: format!("operator-{ns}-with-cco.log"), ..launch }).await;
        let _: BlobStorage = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "BlobStorage", "metadata": {"name": "minted"}, "spec": spec("minted-sec")})).await;
        wait_for(&blobs, "minted", "complete with CCO's key", DEFAULT_TIMEOUT * 2, |o: Option<&BlobStorage>| {
            o.is_some_and(|o| o.phase() == Some(cloud_resource_operator::api::Phase::Complete))
        }).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let output = crate::cco::strings(&secrets.get("minted-sec").await.unwrap_or_else(|e| panic!("{e}")));
        let minted_bucket = output.get("bucketName").cloned().unwrap_or_default();
        let request_name = format!("cro-aws-s3-{minted_bucket}-creds");
        let request = crate::cco::requests(&client, &ns).get(&request_name).await.unwrap_or_else(|e| panic!("{request_name}: {e}"));
        assert_eq!(request.data["spec"], json!({
            "providerSpec": {"apiVersion": "cloudcredential.openshift.io/v1", "kind": "AWSProviderSpec",
                "statementEntries": go_bucket_entries(&minted_bucket)},
            "secretRef": {"name": request_name, "namespace": ns}}), "the CredentialsRequest is not the Go operator's");
        let minted = crate::cco::strings(&secrets.get(&request_name).await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(output.get("credentialKeyID"), minted.get("aws_access_key_id"), "the output Secret does not hand out CCO's key");
        assert_eq!(output.get("credentialSecretKey"), minted.get("aws_secret_access_key"));
        // The promise: an application with the Secret writes to the bucket.
        let app = aws_config::defaults(aws_config::BehaviorVersion::latest()).endpoint_url(&endpoint)
            .region(aws_config::Region::new(region.clone()))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                output.get("credentialKeyID").cloned().unwrap_or_default(),
                output.get("credentialSecretKey").cloned().unwrap_or_default(), None, None, "output Secret"))
            .load().await;
        let app = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&app).force_path_style(true).build());
        app.put_object().bucket(&minted_bucket).key("hello").body(b"hi".to_vec().into()).send().await
            .unwrap_or_else(|e| panic!("the application cannot write with the output Secret's key: {e:?}"));
        app.delete_object().bucket(&minted_bucket).key("hello").send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let refused = wait_for(&blobs, "orphan", "the key's IAM user refused", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| {
            o.is_some_and(|o| o.message().contains("iam:"))
        }).await.message();
        let asked = crate::cco::requests(&client, &ns).get_opt(&format!("cro-aws-s3-{orphan}-creds")).await;
        assert!(matches!(asked, Ok(None)), "CCO was asked for a key to an existing bucket ({refused}): {asked:?}");
        blobs.delete("orphan", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "orphan", DEFAULT_TIMEOUT).await;
        // Deleting the CR deletes its CredentialsRequest (CCO then removes
        // the user) and the empty bucket.
        let user = request.data["status"]["providerStatus"]["user"].as_str().unwrap_or_default().to_string();
        blobs.delete("minted", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "minted", DEFAULT_TIMEOUT).await;
        wait_deleted(&crate::cco::requests(&client, &ns), &request_name, DEFAULT_TIMEOUT).await;
        op.stop().await;
        enforce_iam_after(&endpoint, 1_000_000).await;
        let iam = aws_sdk_iam::Client::new(&admin);
        let user_left = iam.get_user().user_name(&user).send().await;
        assert!(user_left.is_err() && !user.is_empty(), "CCO's user {user:?} is left: {user_left:?}");
        let looked = s3.head_bucket().bucket(&minted_bucket).send().await;
        let missing = looked.as_ref().err().and_then(|e| e.as_service_error()).is_some_and(|e| e.is_not_found());
        assert!(missing, "bucket {minted_bucket} is left, or could not be looked at: {looked:?}");
    })
    .await;
}

/// A switch that may still be rolled back: the stopped Go operator's Lease
/// is still in the namespace it ran in (controller-runtime leaves it: the
/// Go main.go sets `LeaderElectionID` and no release on cancel), and this
/// operator, installed there with its defaults, makes new resources as the
/// Go operator made them, so the Go operator takes them back whole:
/// - a Redis with neither TLS nor AUTH (`defaultInTransitEncryption`,
///   pkg/providers/aws/provider_redis.go), whose Secret holds exactly what
///   the Go operator's `ReconcileResultSecret` writes over it (`uri`,
///   `port`: `RedisDeploymentDetails.Data`, pkg/providers/aws);
/// - a bucket whose key the Cloud Credential Operator minted for the
///   CredentialsRequest the Go operator asks for
///   (`ReconcileBucketOwnerCredentials`, provider_blobstorage.go), so the
///   Secret it writes back (`BlobStorageDeploymentDetails`: the bucket,
///   the tier's region, that key) is the one applications hold, and no
///   IAM user of this operator is left behind.
#[tokio::test]
async fn after_a_switch_new_resources_are_made_so_the_go_operator_can_take_them_back() {
    use k8s_openapi::{
        api::coordination::v1::{Lease, LeaseSpec},
        apimachinery::pkg::apis::meta::v1::MicroTime,
        jiff::{SignedDuration, Timestamp},
    };
    with_namespace("go-rollback", |client, ns| async move {
        let _cco_crd = CCO_CRD.read().await;
        ensure_crds(&client).await;
        crate::support::ensure_cco_crd(&client).await;
        let stopped = Timestamp::now() - SignedDuration::from_hours(1);
        let lease = Lease {
            metadata: kube::api::ObjectMeta { name: Some("ce8de7ea.integreatly.org".into()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some("cloud-resource-operator-7d9f8c6b5-x2x4q_6f1c".into()),
                lease_duration_seconds: Some(15),
                acquire_time: Some(MicroTime(stopped - SignedDuration::from_hours(24 * 90))),
                renew_time: Some(MicroTime(stopped)),
                lease_transitions: Some(3),
                ..Default::default()
            }),
        };
        Api::<Lease>::namespaced(client.clone(), &ns).create(&PostParams::default(), &lease).await.unwrap_or_else(|e| panic!("{e}"));
        let env = TestEnv::load();
        let admin = env.aws_config().await;
        let _cco = crate::cco::Cco::start(client.clone(), &ns, aws_sdk_iam::Client::new(&admin));
        let op = Operator::launch(Launch::new(&ns)).await;
        op.wait_log(&format!("made as the Go operator made them (the Go operator's Lease {ns}/ce8de7ea.integreatly.org is here)"), DEFAULT_TIMEOUT).await;

        let spec = |secret: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": secret}});
        let _: Redis = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "Redis", "metadata": {"name": "cache"}, "spec": spec("cache-sec")})).await;
        let _: BlobStorage = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "BlobStorage", "metadata": {"name": "files"}, "spec": spec("files-sec")})).await;
        let in_cluster = |secret: &str| json!({"type": "openshift", "tier": "development", "secretRef": {"name": secret}});
        let _: Postgres = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "Postgres", "metadata": {"name": "pg"}, "spec": in_cluster("pg-sec")})).await;
        let _: Redis = crate::support::create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1",
            "kind": "Redis", "metadata": {"name": "kv"}, "spec": in_cluster("kv-sec")})).await;
        let (redis, blobs) = (Api::<Redis>::namespaced(client.clone(), &ns), Api::<BlobStorage>::namespaced(client.clone(), &ns));
        crate::support::wait_phase(&redis, "cache", Phase::Complete).await;
        crate::support::wait_phase(&blobs, "files", Phase::Complete).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let read = |name: &'static str| {
            let secrets = secrets.clone();
            async move { crate::cco::strings(&secrets.get(name).await.unwrap_or_else(|e| panic!("{name}: {e}"))) }
        };

        let id = cloud_identifier(CLUSTER, &ns, "cache");
        let ec = aws_sdk_elasticache::Client::new(&admin);
        let groups = ec.describe_replication_groups().replication_group_id(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let group = groups.replication_groups().first().cloned().unwrap_or_else(|| panic!("no group {id}"));
        assert_eq!((group.transit_encryption_enabled(), group.auth_token_enabled()), (Some(false), Some(false)), "{group:?}");
        let primary = group.node_groups().first().and_then(|g| g.primary_endpoint()).and_then(|e| e.address()).unwrap_or_default().to_string();
        let port = group.node_groups().first().and_then(|g| g.primary_endpoint()).and_then(|e| e.port()).unwrap_or_default().to_string();
        let go_writes = BTreeMap::from([("uri".to_string(), primary), ("port".to_string(), port)]);
        assert_eq!(read("cache-sec").await, go_writes, "the Go operator would rewrite the Redis Secret otherwise");
        let token = secrets.get_opt("cache-aws-elasticache-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(token.is_none(), "an AUTH token was kept for a group without one");

        let output = read("files-sec").await;
        let bucket = output.get("bucketName").cloned().unwrap_or_default();
        assert_eq!(bucket, cloud_identifier(CLUSTER, &ns, "files"));
        let request_name = format!("cro-aws-s3-{bucket}-creds");
        let request = crate::cco::requests(&client, &ns).get(&request_name).await.unwrap_or_else(|e| panic!("{request_name}: {e}"));
        assert_eq!(request.data["spec"]["providerSpec"]["statementEntries"], go_bucket_entries(&bucket), "not the Go operator's CredentialsRequest");
        let minted = crate::cco::strings(&secrets.get(&request_name).await.unwrap_or_else(|e| panic!("{e}")));
        let go_writes = BTreeMap::from([
            ("bucketName".to_string(), bucket.clone()),
            ("bucketRegion".to_string(), env.aws_region.clone()),
            ("credentialKeyID".to_string(), minted.get("aws_access_key_id").cloned().unwrap_or_default()),
            ("credentialSecretKey".to_string(), minted.get("aws_secret_access_key").cloned().unwrap_or_default()),
        ]);
        assert_eq!(output, go_writes, "the Go operator would rewrite the BlobStorage Secret otherwise");
        let iam = aws_sdk_iam::Client::new(&admin);
        let user = iam.get_user().user_name(&bucket).send().await;
        assert!(user.is_err(), "an IAM user of this operator was made for {bucket}: {user:?}");

        go_takes_back_new_in_cluster_databases(&client, &ns).await;

        redis.delete("cache", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        blobs.delete("files", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&redis, "cache", DEFAULT_TIMEOUT).await;
        wait_deleted(&blobs, "files", DEFAULT_TIMEOUT).await;
        wait_deleted(&crate::cco::requests(&client, &ns), &request_name, DEFAULT_TIMEOUT).await;
        op.stop().await;
    })
    .await;
}
