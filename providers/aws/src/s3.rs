//! BlobStorage as an S3 bucket (public access blocked, default encryption,
//! tagged) plus an IAM user limited to that bucket, whose access key is
//! kept in `<name>-aws-s3-credentials` from the moment it is created. On
//! delete the user and keys always go; a non-empty bucket stays unless
//! deleteStrategy.forceBucketDeletion is true.

use std::collections::BTreeMap;

use aws_sdk_s3::{
    Client,
    error::ProvideErrorMetadata,
    operation::delete_bucket::DeleteBucketError,
    types::{
        BucketLocationConstraint, CreateBucketConfiguration, Delete, ObjectIdentifier,
        PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
        ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    },
};
use cro_provider_api::{
    Adoption, Change, ConnectionDetails, Deletion, IdentifierRules, Outcome, ProviderError,
    Provisioned, ResourceRequest, Timing,
};
use serde_json::Value;
use tracing::warn;

use crate::{
    At, RECHECK, cco,
    clients::Clients,
    errors::{Answer, Created, created, not_yet_visible, taken},
    iam_user,
    keys::{self, KeySource},
    plan::{self, vanished},
    service::{Sections, Service, Tags},
    strategy::{Tier, TypedSection, parse_section},
    tags::Tagging,
};

pub const PROVIDER: &str = "aws-s3";
const POLICY_NAME: &str = "cro-bucket-access";
/// deleteStrategy: the Go operator's own field (not an AWS input).
#[derive(Clone, Debug, Default, serde::Deserialize, PartialEq)]
pub struct DeleteStrategy {
    /// Delete a bucket that still holds objects (default: keep it).
    #[serde(rename = "forceBucketDeletion")]
    pub force_bucket_deletion: Option<bool>,
}

impl TypedSection for DeleteStrategy {
    const NAME: &'static str = "deleteStrategy";
    const API: &'static str = "the blob storage delete strategy";
}

/// createStrategy as the operator reads it: only the bucket a tier pins.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CreateStrategy {
    pub bucket: Option<String>,
}

/// createStrategy.Bucket: the bucket a tier pins, as the Go operator's
/// `buildS3BucketConfig` (provider_blobstorage.go) used it instead of the
/// computed name. The bucket is created with fixed, safe settings, so the
/// rest of the Go operator's CreateBucketInput is accepted and ignored.
fn pinned_bucket(tier: &Tier) -> Result<Option<String>, ProviderError> {
    let given = |exact: bool| {
        tier.create.iter().find(|(k, v)| {
            !v.is_null()
                && if exact {
                    *k == "Bucket"
                } else {
                    k.eq_ignore_ascii_case("Bucket")
                }
        })
    };
    match given(true).or_else(|| given(false)) {
        None => Ok(None),
        Some((_, Value::String(b))) if !b.trim().is_empty() => Ok(Some(b.trim().to_string())),
        Some((k, v)) => Err(ProviderError::invalid_strategy(format!(
            "createStrategy.{k} must be a bucket name (a non-empty string), found {v}"
        ))),
    }
}

pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-s3-credentials")
}

/// Buckets' tags by bucket, as last listed (see [`crate::listing`]).
type Buckets = crate::listing::Listing<BTreeMap<String, String>>;

/// What S3 was last seen to hold in one account and region: every tagged
/// bucket's tags, shared by every BlobStorage there.
pub struct AccountCache {
    buckets: Buckets,
}

impl AccountCache {
    pub fn new(memory: &std::sync::Arc<cro_provider_api::Memory>) -> Self {
        AccountCache {
            buckets: Buckets::new(memory),
        }
    }
}

fn build_error(e: impl std::fmt::Display) -> ProviderError {
    ProviderError::transient(format!("building an S3 request: {e}"))
}

async fn exists(s3: &Client, bucket: &str) -> Result<bool, ProviderError> {
    let found = s3.head_bucket().bucket(bucket).send().await;
    Ok(found
        .unless_missing(|e| e.is_not_found(), "s3:HeadBucket", bucket)?
        .is_some())
}

/// Creates the bucket, tagged in the same call, and sets it up: a bucket
/// whose create or set-up was cut short (its answer lost, the leader gone)
/// is found tagged for this CR and set up again (see [`decide`]).
async fn create(
    (s3, buckets): (&Client, &Buckets),
    req: &ResourceRequest,
    region: &str,
) -> Result<(), ProviderError> {
    let bucket = req.identifier.as_str();
    let tags = crate::tags::s3_tags(&req.creation_tags())?;
    let mut sent = buckets
        .writing(bucket, send_create(s3, bucket, region, Some(tags)))
        .await;
    // Tags on CreateBucket need s3:TagResource beside s3:CreateBucket; an
    // identity granted only the older list still gets its bucket, tagged
    // by the set-up.
    if sent.as_ref().err().and_then(|e| e.code()) == Some("AccessDenied") {
        warn!(
            bucket,
            "s3:CreateBucket with tags was refused; creating it untagged and tagging it after: grant s3:TagResource (docs/operations.md, AWS permissions) so no bucket is ever untagged"
        );
        sent = buckets
            .writing(bucket, send_create(s3, bucket, region, None))
            .await;
    }
    if created(sent, "s3:CreateBucket", bucket)? == Created::Already {
        // This account's bucket: ours when untagged (the retry of a create
        // whose answer was lost; or its tags may not be read) or tagged
        // for this CR.
        let found = match exists(s3, bucket).await? {
            true => Some(s3.readable(bucket).await?.unwrap_or_default()),
            false => None,
        };
        match found {
            Some(tags)
                if tags.is_empty()
                    || crate::tags::made_for(&req.tag_keys, &req.creation_tags(), &tags) => {}
            Some(_) => return Err(taken("S3 bucket", bucket)),
            None => return Err(not_yet_visible("S3 bucket", bucket)),
        }
    }
    set_up(s3, req).await
}

/// One CreateBucket call; us-east-1 is the one region that must not be
/// named.
async fn send_create(
    s3: &Client,
    bucket: &str,
    region: &str,
    tags: Option<Vec<aws_sdk_s3::types::Tag>>,
) -> Result<
    aws_sdk_s3::operation::create_bucket::CreateBucketOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::create_bucket::CreateBucketError>,
> {
    let location = (region != "us-east-1").then(|| BucketLocationConstraint::from(region));
    let create = s3.create_bucket().bucket(bucket);
    let create = match (location, tags) {
        (None, None) => create,
        (location, tags) => create.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .set_location_constraint(location)
                .set_tags(tags)
                .build(),
        ),
    };
    create.send().await
}

/// Public access blocked, default encryption, the CR's tags: each call
/// idempotent, so a set-up cut short is simply made again.
async fn set_up(s3: &Client, req: &ResourceRequest) -> Result<(), ProviderError> {
    let bucket = req.identifier.as_str();
    let block = PublicAccessBlockConfiguration::builder()
        .block_public_acls(true)
        .ignore_public_acls(true)
        .block_public_policy(true)
        .restrict_public_buckets(true)
        .build();
    let call = s3.put_public_access_block().bucket(bucket);
    let out = call.public_access_block_configuration(block).send().await;
    out.named("s3:PutPublicAccessBlock", bucket)?;
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .map_err(build_error)?;
    let encryption = ServerSideEncryptionConfiguration::builder()
        .rules(
            ServerSideEncryptionRule::builder()
                .apply_server_side_encryption_by_default(by_default)
                .build(),
        )
        .build()
        .map_err(build_error)?;
    let call = s3.put_bucket_encryption().bucket(bucket);
    let out = call
        .server_side_encryption_configuration(encryption)
        .send()
        .await;
    out.named("s3:PutBucketEncryption", bucket)?;
    let all: Vec<(String, String)> = req.creation_tags().into_iter().collect();
    s3.add_tags(bucket, &all).await
}

/// What of [`set_up`] a bucket no longer has (pure): public access not
/// fully blocked (`block`: its configuration, `None` when it has none), no
/// default encryption.
fn lost_settings(
    block: Option<&PublicAccessBlockConfiguration>,
    encrypted: bool,
) -> Vec<&'static str> {
    let blocked = block.is_some_and(|b| {
        [
            b.block_public_acls(),
            b.ignore_public_acls(),
            b.block_public_policy(),
            b.restrict_public_buckets(),
        ]
        .iter()
        .all(|flag| *flag == Some(true))
    });
    let mut lost = Vec::new();
    if !blocked {
        lost.push("public access block");
    }
    if !encrypted {
        lost.push("default encryption");
    }
    lost
}

/// What of [`set_up`] the bucket no longer has, as S3 answers now (the Go
/// operator puts both back on every reconcile, reconcileS3BucketSettings).
async fn observe_settings(s3: &Client, bucket: &str) -> Result<Vec<&'static str>, ProviderError> {
    let none = |e: &aws_sdk_s3::operation::get_public_access_block::GetPublicAccessBlockError| {
        e.code() == Some("NoSuchPublicAccessBlockConfiguration")
    };
    let block = s3.get_public_access_block().bucket(bucket).send().await;
    // An identity granted only the permissions of earlier releases cannot
    // read them: the bucket keeps working, and the log says what to grant.
    if block.as_ref().err().and_then(|e| e.code()) == Some("AccessDenied") {
        warn!(
            bucket,
            "cannot read the bucket's public access block and encryption: grant s3:GetBucketPublicAccessBlock and s3:GetEncryptionConfiguration (docs/operations.md, AWS permissions) so a bucket opened by hand is closed again"
        );
        return Ok(Vec::new());
    }
    let block = block.unless_missing(none, "s3:GetPublicAccessBlock", bucket)?;
    let block = block.and_then(|b| b.public_access_block_configuration().cloned());
    let none = |e: &aws_sdk_s3::operation::get_bucket_encryption::GetBucketEncryptionError| {
        e.code() == Some("ServerSideEncryptionConfigurationNotFoundError")
    };
    let encryption = s3.get_bucket_encryption().bucket(bucket).send().await;
    if encryption.as_ref().err().and_then(|e| e.code()) == Some("AccessDenied") {
        warn!(
            bucket,
            "cannot read the bucket's default encryption: grant s3:GetEncryptionConfiguration (docs/operations.md, AWS permissions)"
        );
        return Ok(lost_settings(block.as_ref(), true));
    }
    let encryption = encryption.unless_missing(none, "s3:GetBucketEncryption", bucket)?;
    let encrypted = (encryption.as_ref())
        .and_then(|e| e.server_side_encryption_configuration())
        .is_some_and(|c| {
            c.rules()
                .iter()
                .any(|r| r.apply_server_side_encryption_by_default().is_some())
        });
    Ok(lost_settings(block.as_ref(), encrypted))
}

/// What to do about the bucket.
#[derive(Debug, PartialEq)]
pub enum Plan {
    Create,
    /// Made for this CR and not recorded on it yet: its set-up may have
    /// been cut short (it is untagged, made by this process; or it is
    /// tagged for this CR at create): set it up, which is idempotent.
    SetUp,
    /// It is this cluster's: add the tags it lacks.
    Tag(Vec<(String, String)>),
    /// Someone else's bucket: changed only once a person approves.
    Unadopted(Adoption),
    Fail(String),
}

/// The plan for the bucket from its tags (`None`: no such bucket), pure:
/// a recorded bucket that is gone is reported, never created again empty.
/// `made_here`: this process created (or tried to create) it.
pub fn decide(
    live_tags: Option<&BTreeMap<String, String>>,
    req: &ResourceRequest,
    made_here: bool,
) -> Plan {
    match (live_tags, req.recorded_identifier.as_deref()) {
        (Some(tags), None) if tags.is_empty() && made_here => Plan::SetUp,
        (Some(tags), None) if crate::tags::made_for(&req.tag_keys, &req.creation_tags(), tags) => {
            Plan::SetUp
        }
        (Some(tags), _) if let Some(owner) = plan::another_crs(req, tags) => Plan::Fail(
            plan::another_crs_message("S3 bucket", &req.identifier, &owner),
        ),
        (Some(tags), _) => match plan::adoption(req, tags, &[]) {
            Some(adoption) => Plan::Unadopted(adoption),
            None => Plan::Tag(crate::tags::missing(&req.tags, tags)),
        },
        (None, Some(id)) => Plan::Fail(vanished(
            "S3 bucket",
            id,
            "the objects it held are gone with it",
        )),
        (None, None) => Plan::Create,
    }
}

/// The bucket's tags, if it exists: from the tagging API's listing of
/// every tagged bucket on a recheck, else read on its own.
async fn observe(
    (c, cache): (&Clients, &AccountCache),
    req: &ResourceRequest,
) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
    let bucket = req.identifier.as_str();
    if let Some(max_age) = req.options.observed_within
        && let Some(tags) = cache
            .buckets
            // Bucket ARNs are `arn:<partition>:s3:::<bucket>`.
            .get(bucket, max_age, || {
                crate::tags::tagged(c, "s3", |arn| {
                    arn.split_once(":s3:::")
                        .map(|(_, bucket)| bucket.to_string())
                })
            })
            .await?
    {
        return Ok(Some(tags));
    }
    let described = describe(c, bucket).await;
    cache.buckets.described(bucket);
    described
}

/// The bucket's tags if it exists, read on its own (none where they may
/// not be read, see [`crate::tags::or_refused`]).
pub async fn describe(
    c: &Clients,
    bucket: &str,
) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
    Ok(match exists(&c.s3, bucket).await? {
        true => Some(crate::tags::or_refused(c, &c.s3, bucket).await?),
        false => None,
    })
}

/// What `plan` shows for `plan` (pure), `lost`: the settings a bucket of
/// this cluster no longer has.
fn shown(
    plan: &Plan,
    live_tags: Option<&BTreeMap<String, String>>,
    lost: &[&str],
    req: &ResourceRequest,
) -> Vec<Change> {
    let (Some(have), plan) = (live_tags, plan) else {
        return vec![plan::missing_resource(
            "Bucket",
            req.recorded_identifier.as_deref(),
        )];
    };
    match plan {
        Plan::Create => vec![plan::missing_resource("Bucket", None)],
        Plan::SetUp => vec![plan::change(
            "Bucket",
            "made, maybe not set up",
            "public access block, encryption and tags set",
            Timing::Now,
            false,
        )],
        Plan::Tag(missing) => (missing.iter())
            .map(|(k, v)| plan::tag_change(k, v, have))
            .chain(
                lost.iter()
                    .map(|setting| plan::change(setting, "absent", "set", Timing::Now, false)),
            )
            .collect(),
        Plan::Unadopted(adoption) => {
            plan::awaiting_adoption("S3 bucket", &req.identifier, adoption)
        }
        Plan::Fail(why) => vec![plan::reported("Bucket", "there", why)],
    }
}

/// The bucket as observed: its tags (`None`: no such bucket), and whether
/// this process created (or tried to create) it.
pub struct Observed {
    tags: Option<BTreeMap<String, String>>,
    made_here: bool,
}

/// BlobStorage as the provider's [`Service`]: the bucket, then its IAM
/// user's key.
pub struct Bucket;

#[async_trait::async_trait]
impl Service for Bucket {
    type Create = CreateStrategy;
    type Delete = DeleteStrategy;
    type Live = Observed;
    type Plan = Plan;
    /// The bucket's IAM user has the same name; a valid bucket name is a
    /// valid user name.
    const RULES: IdentifierRules = IdentifierRules::S3Bucket;

    /// Of the Go operator's createStrategy only the pinned Bucket is read.
    fn sections(
        &self,
        tier: &Tier,
    ) -> Result<Sections<CreateStrategy, DeleteStrategy>, ProviderError> {
        let (delete, ignored) = parse_section(&tier.delete)?;
        Ok(Sections {
            create: CreateStrategy {
                bucket: pinned_bucket(tier)?,
            },
            delete,
            ignored,
        })
    }

    fn pinned(&self, s: &Sections<CreateStrategy, DeleteStrategy>, _: bool) -> Option<String> {
        s.create.bucket.clone()
    }

    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError> {
        describe(c, id).await
    }

    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError> {
        Ok(match describe(c, id).await? {
            Some(_) => format!("S3 bucket {id} exists in {}", c.region),
            None => format!("S3 bucket {id} does not exist in {}", c.region),
        })
    }

    async fn observe(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        _: &Sections<CreateStrategy, DeleteStrategy>,
    ) -> Result<Observed, ProviderError> {
        let cache = &at.account.s3;
        Ok(Observed {
            made_here: cache.buckets.written_since(&req.identifier, None),
            tags: observe((at.c, cache), req).await?,
        })
    }

    fn decide(
        &self,
        req: &ResourceRequest,
        _: &Sections<CreateStrategy, DeleteStrategy>,
        live: &Observed,
    ) -> Plan {
        decide(live.tags.as_ref(), req, live.made_here)
    }

    /// A bucket of this cluster is also read for the settings it lost.
    async fn shown(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        (live, plan): (&Observed, &Plan),
    ) -> Result<Vec<Change>, ProviderError> {
        let lost = match plan {
            Plan::Tag(_) => observe_settings(&at.c.s3, &req.identifier).await?,
            _ => Vec::new(),
        };
        Ok(shown(plan, live.tags.as_ref(), &lost, req))
    }

    async fn act(
        &self,
        at: &At<'_>,
        (req, _): (&ResourceRequest, &Tier),
        _: &Sections<CreateStrategy, DeleteStrategy>,
        (_, plan): (Observed, Plan),
    ) -> Result<Provisioned, ProviderError> {
        act(at, req, plan).await
    }

    async fn remove(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        s: &Sections<CreateStrategy, DeleteStrategy>,
    ) -> Result<Deletion, ProviderError> {
        delete(&at.keys, at.c, req, &s.delete).await
    }
}

/// Carries out `plan` for the bucket, then its user's key.
async fn act(at: &At<'_>, req: &ResourceRequest, plan: Plan) -> Result<Provisioned, ProviderError> {
    let (k, c, cache) = (&at.keys, at.c, &at.account.s3);
    let (s3, region) = (&c.s3, c.region.as_str());
    let bucket = req.identifier.as_str();
    let provisioned = |outcome| Provisioned {
        identifier: Some(bucket.to_string()),
        recheck_after: Some(RECHECK),
        ..Provisioned::new(PROVIDER, outcome)
    };
    match plan {
        Plan::Tag(missing) => {
            if !missing.is_empty() {
                cache
                    .buckets
                    .writing(bucket, s3.add_tags(bucket, &missing))
                    .await?;
            }
            // Public access and encryption are looked at too (a restart's
            // first look trusts them, as it trusts the keys), and put back.
            let lost = match req.options.defer_unbatched {
                true => Vec::new(),
                false => observe_settings(s3, bucket).await?,
            };
            if !lost.is_empty() {
                warn!(bucket, lost = %lost.join(", "), "the bucket lost settings outside the operator; setting them again");
                cache.buckets.writing(bucket, set_up(s3, req)).await?;
            }
        }
        Plan::Create => {
            if !k.sts {
                look_at_key_source(k, c, req, bucket).await?;
            }
            create((s3, &cache.buckets), req, region).await?
        }
        Plan::SetUp => {
            cache.buckets.writing(bucket, set_up(s3, req)).await?;
        }
        Plan::Fail(why) => return Ok(provisioned(Outcome::Failed(why))),
        Plan::Unadopted(adoption) => {
            let mut report = provisioned(Outcome::Failed(plan::unadopted_message(
                "S3 bucket",
                bucket,
            )));
            // Not recorded on the CR: recording would make it this CR's.
            report.identifier = None;
            report.adoption = Some(adoption);
            return Ok(report);
        }
    }

    let details = |id: &str, secret: &str| {
        ConnectionDetails(BTreeMap::from([
            ("bucketName".into(), bucket.to_string()),
            ("bucketRegion".into(), region.to_string()),
            ("credentialKeyID".into(), id.to_string()),
            ("credentialSecretKey".into(), secret.to_string()),
        ]))
    };
    // STS mode: workloads reach the bucket through roles of their own; no
    // IAM user, and the key fields empty, as the Go operator writes them
    // (CreateStorage, provider_blobstorage.go).
    if k.sts {
        return Ok(provisioned(Outcome::Ready(details("", ""))));
    }
    let keys = access_key(k, c, req, bucket).await?;
    let ready = details(&keys.key.id, &keys.key.secret);
    Ok(keys.report(provisioned(Outcome::Ready(ready))))
}

/// Where a bucket's key is kept: this operator's Secret
/// `<name>-aws-s3-credentials`, or the Cloud Credential Operator's
/// CredentialsRequest the Go operator made for the bucket.
struct KeyHome {
    secret: String,
    cco_request: String,
    /// What the Go operator asked CCO to grant a bucket's key.
    mint: Value,
}

impl KeyHome {
    fn of(req: &ResourceRequest, bucket: &str) -> Self {
        KeyHome {
            secret: credentials_secret(&req.name),
            cco_request: cco::s3_request(bucket),
            mint: cco::bucket_entries(bucket),
        }
    }

    /// `creating`: the bucket does not exist yet, so CCO may be asked.
    fn user_secrets<'a>(&'a self, bucket: &'a str, creating: bool) -> keys::UserSecrets<'a> {
        let mint = keys::Mint {
            statements: &self.mint,
            ask: creating,
        };
        keys::UserSecrets {
            user: bucket,
            policy_name: POLICY_NAME,
            secret_name: &self.secret,
            cco_request: &self.cco_request,
            mint: Some(mint),
        }
    }
}

/// The bucket's credentials: this operator's IAM user (its key kept in
/// `<name>-aws-s3-credentials`), or, for a bucket taken over from the Go
/// operator, the key the Cloud Credential Operator minted for it.
async fn access_key(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    bucket: &str,
) -> Result<iam_user::Keys, ProviderError> {
    let policy = iam_user::bucket_policy(bucket);
    let home = KeyHome::of(req, bucket);
    keys::user_keys(k, c, req, (&home.user_secrets(bucket, false), &policy)).await
}

/// Before a bucket is made, where its key will come from is looked at: an
/// identity IAM refuses (the Go operator's own policy, under which CCO
/// minted a key per bucket) fails here, before anything changes in AWS,
/// rather than after the bucket exists.
async fn look_at_key_source(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    bucket: &str,
) -> Result<(), ProviderError> {
    let home = KeyHome::of(req, bucket);
    // `Ok` too where CCO was asked for the key instead: the bucket is made
    // meanwhile, as the Go operator made it before asking.
    match keys::observe(k, c, req, &home.user_secrets(bucket, true)).await {
        Ok(_) => Ok(()),
        Err(e) if crate::permissions::refused(&e) => Err(e.context(format!(
            "a new bucket {bucket} needs an IAM user of its own for its key, which this identity may not look at (the Go operator's policy has no IAM actions) and no Cloud Credential Operator runs to mint one; nothing was created: grant the IAM actions of docs/operations.md (AWS permissions)"
        ))),
        Err(e) => Err(e),
    }
}

async fn delete(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    strategy: &DeleteStrategy,
) -> Result<Deletion, ProviderError> {
    let (s3, iam) = (&c.s3, &c.iam);
    let force = strategy.force_bucket_deletion.unwrap_or(false);
    let bucket = req.identifier.as_str();
    if let Some(tags) = describe(c, bucket).await?
        && !plan::ours(req, &tags)
    {
        // Someone else's bucket (and user): deleting the CR never deletes them.
        return Ok(Deletion::Done);
    }
    // STS mode made no user (and its role may not touch IAM).
    if !k.sts {
        let credentials: (&str, &str) = (&credentials_secret(&req.name), &cco::s3_request(bucket));
        keys::delete_user_and_keys(k, iam, req, bucket, credentials).await?;
    }
    if exists(s3, bucket).await? {
        let objects = list(s3, bucket).await?;
        if objects.is_empty() || force {
            delete_with_objects(s3, bucket, &objects).await?;
        } else {
            warn!(
                bucket,
                objects = objects.len(),
                "keeping non-empty bucket (deleteStrategy.forceBucketDeletion is not true)"
            );
        }
    }
    Ok(Deletion::Done)
}

/// Deletes `objects` (all the bucket holds), then `bucket`; what is
/// already gone is fine (a lost answer's call acted).
pub(crate) async fn delete_with_objects(
    s3: &Client,
    bucket: &str,
    objects: &[String],
) -> Result<(), ProviderError> {
    for chunk in objects.chunks(1000) {
        let ids = chunk
            .iter()
            .map(|k| {
                ObjectIdentifier::builder()
                    .key(k)
                    .build()
                    .map_err(build_error)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let delete = Delete::builder()
            .set_objects(Some(ids))
            .quiet(true)
            .build()
            .map_err(build_error)?;
        s3.delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
            .named("s3:DeleteObjects", bucket)?;
    }
    let gone = |e: &DeleteBucketError| e.code() == Some("NoSuchBucket");
    s3.delete_bucket()
        .bucket(bucket)
        .send()
        .await
        .unless_missing(gone, "s3:DeleteBucket", bucket)?;
    Ok(())
}

/// Every key in `bucket`.
pub(crate) async fn list(s3: &Client, bucket: &str) -> Result<Vec<String>, ProviderError> {
    let mut keys = Vec::new();
    let mut token = None;
    loop {
        let out = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token)
            .send()
            .await
            .named("s3:ListObjectsV2", bucket)?;
        keys.extend(
            out.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
        token = out.next_continuation_token().map(str::to_string);
        if token.is_none() {
            return Ok(keys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tags::map as tags;

    fn req(recorded: Option<&str>) -> ResourceRequest {
        let kind = cro_provider_api::ResourceKind::BlobStorage;
        let mut req = ResourceRequest::offline(kind, serde_json::json!({}));
        // The Go operator's identifier of CR ns/cr in cluster c1.
        (req.namespace, req.name) = ("ns".into(), "cr".into());
        req.identifier = "c1nscr".into();
        req.recorded_identifier = recorded.map(str::to_string);
        req.owner_tag = ("clusterID".into(), "c1".into());
        req.namespace_tag = ("resource-namespace".into(), "ns".into());
        req.tag_keys = cro_provider_api::TagKeys::new("");
        req.tags = tags(&[("clusterID", "c1"), ("resource-name", "cr"), ("k", "v")]);
        req
    }

    /// An S3 client whose calls the rules answer, in order (no network).
    fn mocked(rules: &[&aws_smithy_mocks::Rule]) -> Client {
        let mut answers = aws_smithy_mocks::MockResponseInterceptor::new()
            .rule_mode(aws_smithy_mocks::RuleMode::Sequential);
        for rule in rules {
            answers = answers.with_rule(rule);
        }
        let credentials =
            aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new("eu-west-1"))
            .credentials_provider(credentials)
            .http_client(aws_smithy_mocks::create_mock_http_client())
            .interceptor(answers)
            .build();
        Client::from_conf(config)
    }

    /// The Go operator's policy has no s3:GetBucketTagging: a bucket whose
    /// tags may not be read is not tagged, as PutBucketTagging would
    /// replace the tags others gave it (a client with no rule for the
    /// put fails the test if it is sent).
    #[tokio::test]
    async fn a_bucket_whose_tags_may_not_be_read_is_not_tagged() {
        use aws_sdk_s3::operation::get_bucket_tagging::GetBucketTaggingError;
        use aws_smithy_mocks::mock;
        let refusal = || {
            mock!(Client::get_bucket_tagging).then_error(|| {
                let meta = aws_sdk_s3::error::ErrorMetadata::builder()
                    .code("AccessDenied")
                    .build();
                GetBucketTaggingError::generic(meta)
            })
        };
        let (refused, read) = (refusal(), refusal());
        let s3 = mocked(&[&refused, &read]);
        let tagged = s3.add_tags("c1nscr", &[("k".into(), "v".into())]).await;
        assert!(tagged.is_ok(), "{tagged:?}");
        assert_eq!(refused.num_calls(), 1);
        assert_eq!(s3.readable("c1nscr").await.ok(), Some(None));
    }

    /// S3 refuses a tagged CreateBucket to an identity without
    /// s3:TagResource (the emulator grants everything, so only a mock can
    /// say AccessDenied): the bucket is created untagged, then set up and
    /// tagged, never left untagged.
    #[tokio::test]
    async fn a_refused_tagged_create_makes_the_bucket_untagged_then_tags_it() {
        use aws_sdk_s3::operation::{
            create_bucket::{CreateBucketError, CreateBucketOutput},
            put_bucket_encryption::PutBucketEncryptionOutput,
            put_bucket_tagging::PutBucketTaggingOutput,
            put_public_access_block::PutPublicAccessBlockOutput,
        };
        use aws_smithy_mocks::mock;
        let tagged = |r: &aws_sdk_s3::operation::create_bucket::CreateBucketInput| {
            (r.create_bucket_configuration()).is_some_and(|c| !c.tags().is_empty())
        };
        let denied = mock!(Client::create_bucket)
            .match_requests(move |r| tagged(r))
            .then_error(|| {
                let meta = aws_sdk_s3::error::ErrorMetadata::builder()
                    .code("AccessDenied")
                    .message("not authorized to perform s3:TagResource")
                    .build();
                CreateBucketError::generic(meta)
            });
        let untagged = mock!(Client::create_bucket)
            .match_requests(move |r| !tagged(r) && r.bucket() == Some("c1nscr"))
            .then_output(|| CreateBucketOutput::builder().build());
        let block = mock!(Client::put_public_access_block)
            .then_output(|| PutPublicAccessBlockOutput::builder().build());
        let encryption = mock!(Client::put_bucket_encryption)
            .then_output(|| PutBucketEncryptionOutput::builder().build());
        let tagging = mock!(Client::put_bucket_tagging)
            .match_requests(|r| {
                r.tagging().is_some_and(|t| {
                    t.tag_set()
                        .iter()
                        .any(|t| t.key() == "clusterID" && t.value() == "c1")
                })
            })
            .then_output(|| PutBucketTaggingOutput::builder().build());
        // `add_tags` reads the bucket's tags first: none yet.
        let none_yet = mock!(Client::get_bucket_tagging).then_error(|| {
            let meta = aws_sdk_s3::error::ErrorMetadata::builder()
                .code("NoSuchTagSet")
                .build();
            aws_sdk_s3::operation::get_bucket_tagging::GetBucketTaggingError::generic(meta)
        });
        let rules = [&denied, &untagged, &block, &encryption, &none_yet, &tagging];
        let s3 = mocked(&rules);
        let buckets = Buckets::new(&Default::default());
        let made = create((&s3, &buckets), &req(None), "eu-west-1").await;
        assert!(made.is_ok(), "{made:?}");
        for (name, rule) in [
            "tagged create",
            "untagged create",
            "public access block",
            "encryption",
            "tagging",
        ]
        .iter()
        .zip([&denied, &untagged, &block, &encryption, &tagging])
        {
            assert_eq!(rule.num_calls(), 1, "{name}");
        }
        assert!(buckets.written_since("c1nscr", None), "the create is noted");
    }

    /// An identity without the read permissions of this release keeps
    /// its bucket working: nothing is judged lost, nothing is put again.
    #[tokio::test]
    async fn settings_that_cannot_be_read_are_not_judged_lost() {
        let denied = aws_smithy_mocks::mock!(Client::get_public_access_block).then_error(|| {
            let meta = aws_sdk_s3::error::ErrorMetadata::builder()
                .code("AccessDenied")
                .build();
            aws_sdk_s3::operation::get_public_access_block::GetPublicAccessBlockError::generic(meta)
        });
        let s3 = mocked(&[&denied]);
        let lost = observe_settings(&s3, "c1nscr").await;
        assert!(matches!(lost.as_deref(), Ok([])), "{lost:?}");
        assert_eq!(denied.num_calls(), 1);
    }

    #[test]
    fn a_bucket_that_lost_a_setting_says_which() {
        let block = |policy| {
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .ignore_public_acls(true)
                .block_public_policy(policy)
                .restrict_public_buckets(true)
                .build()
        };
        assert!(lost_settings(Some(&block(true)), true).is_empty());
        let policy_allowed = block(false);
        assert_eq!(
            lost_settings(Some(&policy_allowed), true),
            ["public access block"]
        );
        assert_eq!(
            lost_settings(None, false),
            ["public access block", "default encryption"]
        );
    }

    #[test]
    fn a_bucket_is_created_once_adopted_only_when_approved() {
        assert_eq!(decide(None, &req(None), false), Plan::Create);
        assert!(
            matches!(decide(None, &req(Some("c1nscr")), false), Plan::Fail(m) if m.contains("S3 bucket c1nscr") && m.contains("no longer exists"))
        );
        // Ours by tag (the Go operator's tags bind no namespace), or by the
        // recorded identifier.
        let go_operators = tags(&[("clusterID", "c1"), ("resource-name", "cr"), ("k", "v")]);
        assert_eq!(
            decide(Some(&go_operators), &req(None), false),
            Plan::Tag(vec![])
        );
        assert!(
            matches!(decide(Some(&tags(&[])), &req(Some("c1nscr")), false), Plan::Tag(t) if t.len() == 3)
        );
        // Untagged: set up when this process made it (a create whose
        // answer was lost), else someone else's.
        assert_eq!(decide(Some(&tags(&[])), &req(None), true), Plan::SetUp);
        assert!(matches!(
            decide(Some(&tags(&[])), &req(None), false),
            Plan::Unadopted(_)
        ));
        // Tagged for this CR at create, not recorded yet (the leader that
        // made it may have gone before its set-up): set up again, by any
        // process; once recorded, only what its tags lack is added.
        let at_create = req(None).creation_tags();
        assert_eq!(decide(Some(&at_create), &req(None), false), Plan::SetUp);
        assert_eq!(
            decide(Some(&at_create), &req(Some("c1nscr")), false),
            Plan::Tag(vec![])
        );
        // Someone else's: adoption waits for its hash.
        let theirs = tags(&[("clusterID", "other")]);
        let Plan::Unadopted(adoption) = decide(Some(&theirs), &req(None), true) else {
            panic!("adopted without approval")
        };
        assert_eq!(adoption.changes.len(), 4, "{adoption:?}");
        let mut approved = req(None);
        approved.options.approved_adoption = Some(adoption.hash.clone());
        assert!(matches!(decide(Some(&theirs), &approved, false), Plan::Tag(t) if t.len() == 3));
    }

    #[test]
    fn plan_shows_what_the_decision_would_do() {
        let fields = |live: Option<&BTreeMap<String, String>>, lost: &[&str], req: &_| {
            let plan = decide(live, req, false);
            (shown(&plan, live, lost, req).into_iter())
                .map(|c| format!("{}: {} -> {}", c.field, c.current, c.desired))
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(None, &[], &req(None)), ["Bucket: absent -> created"]);
        let ours = tags(&[("clusterID", "c1"), ("resource-name", "cr")]);
        assert_eq!(
            fields(Some(&ours), &["default encryption"], &req(None)),
            ["tag k: absent -> v", "default encryption: absent -> set"]
        );
        let theirs = tags(&[("clusterID", "other")]);
        let shown = shown(
            &decide(Some(&theirs), &req(None), false),
            Some(&theirs),
            &[],
            &req(None),
        );
        assert!(
            shown
                .iter()
                .all(|c| matches!(&c.timing, Timing::Never(m) if m.contains("adopt"))),
            "{shown:?}"
        );
    }
}
