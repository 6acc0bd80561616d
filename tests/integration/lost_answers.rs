//! Lost answers (issue 23): every AWS kind through create, edit, rotation,
//! snapshot and delete with an AWS endpoint that loses 20 % of requests
//! before they arrive and 20 % of answers after AWS acted
//! (tests/testenv/fault_proxy.py in front of moto), over five seeds at
//! once. The first answer of every create, modify and delete is lost on
//! top, so each one's retry meets what the lost call did. AWS's eventual
//! consistency too: for a few seconds after a create of an instance, a
//! replication group or a bucket reached AWS, describing it answers "not
//! found"; and in one seed the first CreateBucket's answer hangs past the
//! SDK's read timeout. Every CR completes and is deleted without ever being
//! `failed`, and moto is left with nothing of it but the final snapshots
//! its tiers ask for.

use std::{collections::BTreeSet, fmt::Debug, path::PathBuf, process::Stdio, time::Duration};

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet,
};
use cro_provider_api::{IdentifierRules, cloud_identifier};
use k8s_openapi::{NamespaceResourceScope, api::core::v1::Secret};
use kube::{
    Api, Client, Resource,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::{
    Phased, TestEnv, apply_config_map, create_json, failed_events, passwords_set, wait_deleted,
    wait_for, with_operator_launched,
};

const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];
/// The share of requests lost before they arrive, and of answers lost
/// after AWS acted.
const LOSS: &str = "0.2";
/// The calls whose first answer is lost whatever the dice say.
const LOSE_FIRST: &str = "CreateDBInstance,CreateReplicationGroup,CreateBucket,CreateUser,\
CreateAccessKey,PutUserPolicy,CreateDBSnapshot,CreateSnapshot,ModifyDBInstance,\
ModifyReplicationGroup,DeleteDBInstance,DeleteReplicationGroup,DeleteDBSnapshot,DeleteSnapshot,\
DeleteBucket,DeleteAccessKey,DeleteUser";
/// How long a created instance, group or bucket stays invisible to
/// describes (AWS documents no bound; seconds are what it shows).
const NOT_VISIBLE_FOR: &str = "5";
/// The seed whose first CreateBucket answer hangs past the SDK's timeout.
const HUNG_SEED: u64 = 1;
/// Room for a few backoffs after consecutive lost calls (5 s doubling to
/// 300 s: six failed reconciles in a row wait 315 s, eight 915 s). The
/// SDK's retry quota (aws-smithy-runtime's TokenBucket: 500 tokens, 10 per
/// retry of a transient error, kept when that retry fails too, one back
/// per first-attempt success) can run dry with 36 % of attempts lost; a
/// BlobStorage pass of ten calls then rarely succeeds, and seven failed
/// passes in a row (over ten minutes) were seen.
const TIMEOUT: Duration = Duration::from_secs(900);

/// The fault-injecting endpoint of one seed.
pub(crate) struct Proxy {
    _child: tokio::process::Child,
    pub(crate) url: String,
    log: PathBuf,
}

impl Proxy {
    async fn start(seed: u64) -> Proxy {
        let mut faults = vec!["--not-visible-for", NOT_VISIBLE_FOR];
        if seed == HUNG_SEED {
            faults.extend(["--hang-first-answer", "CreateBucket"]);
        }
        Proxy::launch(&format!("seed{seed}"), seed, LOSS, LOSE_FIRST, &faults).await
    }

    /// A proxy that loses nothing: one replica's own way to AWS, whose log
    /// says which calls that replica made.
    pub(crate) async fn lossless(name: &str) -> Proxy {
        Proxy::launch(name, 0, "0", "", &[]).await
    }

    /// A proxy that answers every call to AWS `service` with 503 while
    /// `flag` exists, and passes the others.
    pub(crate) async fn with_service_down(
        name: &str,
        service: &str,
        flag: &std::path::Path,
    ) -> Proxy {
        let flag = flag.display().to_string();
        let args = [
            "--unavailable",
            service,
            "--unavailable-flag",
            flag.as_str(),
        ];
        Proxy::launch(name, 0, "0", "", &args).await
    }

    /// A proxy whose listings of RDS instances and replication groups leave
    /// out `databases` while `flag` exists (a listing AWS has not brought
    /// up to date), and pass everything else.
    pub(crate) async fn with_stale_listing(
        name: &str,
        databases: &[&str],
        flag: &std::path::Path,
    ) -> Proxy {
        let (ids, flag) = (databases.join(","), flag.display().to_string());
        let args = [
            "--stale-listing",
            ids.as_str(),
            "--stale-flag",
            flag.as_str(),
        ];
        Proxy::launch(name, 0, "0", "", &args).await
    }

    /// A proxy that holds each request of `calls` while `flag` exists,
    /// before it reaches AWS, and passes everything else.
    pub(crate) async fn holding(name: &str, calls: &[&str], flag: &std::path::Path) -> Proxy {
        let (calls, flag) = (calls.join(","), flag.display().to_string());
        let args = ["--hold", calls.as_str(), "--hold-flag", flag.as_str()];
        Proxy::launch(name, 0, "0", "", &args).await
    }

    /// A proxy whose STS gives web-identity credentials for
    /// `expires_in_seconds` only, and refuses the tokens listed in the file
    /// `expired_tokens` as expired; it passes everything else.
    pub(crate) async fn shortening_web_identity(
        name: &str,
        expires_in_seconds: u32,
        expired_tokens: &std::path::Path,
    ) -> Proxy {
        let (expires_in, expired) = (
            expires_in_seconds.to_string(),
            expired_tokens.display().to_string(),
        );
        let args = [
            "--sts-expires-in",
            expires_in.as_str(),
            "--expired-tokens",
            expired.as_str(),
        ];
        Proxy::launch(name, 0, "0", "", &args).await
    }

    /// Whether it held a request.
    pub(crate) fn held(&self) -> bool {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.contains("\"held\"")
    }

    /// Whether it left a database out of a listing.
    pub(crate) fn listed_stale(&self) -> bool {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.contains("\"stale-listing\"")
    }

    /// A proxy that loses the first answer of each of `calls` (after AWS
    /// acted on it) and nothing else.
    pub(crate) async fn losing_first_answers(name: &str, calls: &[&str]) -> Proxy {
        Proxy::launch(name, 0, "0", &calls.join(","), &[]).await
    }

    /// The calls whose answer it lost.
    pub(crate) fn answers_lost(&self) -> BTreeSet<String> {
        self.losses().answers_of
    }

    /// The calls it passed, oldest first (action, or method and path).
    pub(crate) fn passed(&self) -> Vec<String> {
        self.received_after(0.0)
    }

    /// The calls whose request line reached it after `unix_seconds`: those
    /// the client began sending then.
    pub(crate) fn received_after(&self, unix_seconds: f64) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        (text.lines())
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|c| c["outcome"] == "received")
            .filter(|c| c["received"].as_f64().is_some_and(|t| t > unix_seconds))
            .filter_map(|c| c["call"].as_str().map(str::to_string))
            .collect()
    }

    async fn launch(name: &str, seed: u64, loss: &str, lose_first: &str, extra: &[&str]) -> Proxy {
        let env = TestEnv::load();
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let log = root.join(format!("target/testenv/logs/fault-proxy-{name}.jsonl"));
        let _ = std::fs::remove_file(&log);
        let mut child = tokio::process::Command::new("python3")
            .arg(root.join("tests/testenv/fault_proxy.py"))
            .args([
                "--upstream",
                &env.aws_endpoint_url,
                "--seed",
                &seed.to_string(),
            ])
            .args(["--drop-request", loss, "--drop-answer", loss])
            .args(extra)
            .args(["--lose-first-answer", lose_first, "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the fault proxy: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
        let line = match first {
            Ok(Ok(Some(line))) => line,
            other => panic!("the fault proxy did not start: {other:?}"),
        };
        let address = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected fault proxy output {line:?}"));
        Proxy {
            url: format!("http://{address}"),
            _child: child,
            log,
        }
    }

    /// What it did: the calls whose answer it lost, and how many calls it
    /// saw, lost the request of, and lost the answer of.
    fn losses(&self) -> Losses {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // What became of each call (its receipt is a line of its own).
        let calls: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|c| c["outcome"] != "received")
            .collect();
        let with = |outcome: &str| calls.iter().filter(|c| c["outcome"] == outcome).count();
        Losses {
            // A hung answer is lost too: the SDK gives up on it.
            answers_of: (calls.iter())
                .filter(|c| c["outcome"] == "answer-dropped" || c["outcome"] == "answer-hung")
                .filter_map(|c| c["call"].as_str().map(str::to_string))
                .collect(),
            calls: calls.len(),
            requests: with("request-dropped"),
            answers: with("answer-dropped"),
            not_visible_to: (calls.iter())
                .filter(|c| c["outcome"] == "not-visible-yet")
                .filter_map(|c| c["call"].as_str().map(str::to_string))
                .collect(),
            hung: (calls.iter())
                .filter(|c| c["outcome"] == "answer-hung")
                .filter_map(|c| c["call"].as_str().map(str::to_string))
                .collect(),
        }
    }
}

#[derive(Debug)]
struct Losses {
    answers_of: BTreeSet<String>,
    calls: usize,
    requests: usize,
    answers: usize,
    /// The describes answered "not found" for what was just created.
    not_visible_to: BTreeSet<String>,
    /// The calls whose answer hung past the SDK's timeout.
    hung: BTreeSet<String>,
}

fn cr(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
}

fn snapshot(kind: &str, name: &str, of: &str) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"resourceName": of}})
}

/// Waits for `name` to be complete and to satisfy `also`.
async fn complete<K>(client: &Client, ns: &str, name: &str, also: fn(&K) -> bool) -> K
where
    K: Phased
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    wait_for(
        &api,
        name,
        "phase complete",
        TIMEOUT,
        move |o: Option<&K>| o.is_some_and(|o| o.phase() == Some(Phase::Complete) && also(o)),
    )
    .await
}

/// Polls `check` (reading the emulator directly, not through the proxy)
/// until it holds.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn delete_cr<K>(client: &Client, ns: &str, name: &str)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    api.delete(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    wait_deleted(&api, name, TIMEOUT).await;
}

/// The rotation the test asked for is answered.
fn rotated(status: Option<&cloud_resource_operator::api::ResourceTypeStatus>) -> bool {
    let requested = status.and_then(|s| s.credentials_rotation.as_ref()?.requested.as_deref());
    requested == Some("lost-answers")
}

async fn secret_value(client: &Client, ns: &str, name: &str, key: &str) -> String {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading Secret {name}: {e}"));
    let value = secret.data.and_then(|d| d.get(key).cloned());
    value
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

/// The access keys IAM holds for `user`.
async fn keys_of(iam: &aws_sdk_iam::Client, user: &str) -> BTreeSet<String> {
    let listed = iam.list_access_keys().user_name(user).send().await;
    let listed = listed.unwrap_or_else(|e| panic!("listing the keys of {user}: {e:?}"));
    (listed.access_key_metadata().iter())
        .filter_map(|k| k.access_key_id().map(str::to_string))
        .collect()
}

async fn tagged(
    iam: &aws_sdk_iam::Client,
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    user: &str,
) -> bool {
    let product = |k: &str, v: &str| k == "integreatly.org/product-name" && v == "lossy";
    let bucket_tags = s3.get_bucket_tagging().bucket(bucket).send().await;
    let user_tags = iam.list_user_tags().user_name(user).send().await;
    bucket_tags.is_ok_and(|t| t.tag_set().iter().any(|t| product(t.key(), t.value())))
        && user_tags.is_ok_and(|t| t.tags().iter().any(|t| product(t.key(), t.value())))
}

/// One seed's whole run: its own proxy, operator and namespace.
async fn one_seed(seed: u64) -> Losses {
    let proxy = Proxy::start(seed).await;
    let endpoint = ("AWS_ENDPOINT_URL".to_string(), proxy.url.clone());
    with_operator_launched(
        &format!("lost{seed}"),
        |launch| launch.env.push(endpoint),
        |client, ns, _op| async move { lifecycle(client, ns).await },
    )
    .await;
    proxy.losses()
}

/// Create, edit, rotate, snapshot and delete every AWS kind.
async fn lifecycle(client: Client, ns: String) {
    let env = TestEnv::load();
    let config = env.aws_config().await;
    let (rds, ec) = (
        aws_sdk_rds::Client::new(&config),
        aws_sdk_elasticache::Client::new(&config),
    );
    let (iam, s3) = (aws_sdk_iam::Client::new(&config), env.s3().await);
    let id = |name: &str| cloud_identifier("testcluster", &ns, name);
    let (db, cache, files) = (id("db"), id("cache"), id("files"));
    let mail_user = IdentifierRules::IamUser.conform(&format!("{}-ses", id("mail")));
    let strategies = |postgres: Value, redis: Value| {
        json!({
            // Online: the edit below applies without maintenanceWindow.
            "postgres": json!({"development": {"changePolicy": "Online", "createStrategy": postgres}}).to_string(),
            "redis": json!({"development": {"changePolicy": "Online", "createStrategy": redis}}).to_string(),
            "blobstorage": json!({"development": {}}).to_string(),
            "smtpcredentials": json!({"development": {}}).to_string(),
        })
    };
    let config_map = "cloud-resources-aws-strategies";
    apply_config_map(&client, &ns, config_map, strategies(json!({}), json!({}))).await;

    // Create.
    create_json::<Postgres>(&client, &ns, cr("Postgres", "db")).await;
    create_json::<Redis>(&client, &ns, cr("Redis", "cache")).await;
    create_json::<BlobStorage>(&client, &ns, cr("BlobStorage", "files")).await;
    create_json::<SMTPCredentialSet>(&client, &ns, cr("SMTPCredentialSet", "mail")).await;
    complete::<Postgres>(&client, &ns, "db", |_| true).await;
    complete::<Redis>(&client, &ns, "cache", |_| true).await;
    complete::<BlobStorage>(&client, &ns, "files", |_| true).await;
    complete::<SMTPCredentialSet>(&client, &ns, "mail", |_| true).await;
    let key = secret_value(&client, &ns, "files-sec", "credentialKeyID").await;
    assert_eq!(
        keys_of(&iam, &files).await,
        BTreeSet::from([key]),
        "one key, the published one"
    );

    // Edit: a tier field applied at once on each database (the tiers are
    // Online), a tag on each IAM-backed kind.
    let edited = strategies(
        json!({"BackupRetentionPeriod": 7}),
        json!({"SnapshotRetentionLimit": 5}),
    );
    apply_config_map(&client, &ns, config_map, edited).await;
    let label = Patch::Merge(json!({"metadata": {"labels": {"productName": "lossy"}}}));
    let params = PatchParams::default();
    Api::<BlobStorage>::namespaced(client.clone(), &ns)
        .patch("files", &params, &label)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns)
        .patch("mail", &params, &label)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eventually("the instance's backup retention is 7", || async {
        let found = rds
            .describe_db_instances()
            .db_instance_identifier(&db)
            .send()
            .await;
        found.is_ok_and(|o| {
            o.db_instances()
                .first()
                .and_then(|i| i.backup_retention_period())
                == Some(7)
        })
    })
    .await;
    eventually("the group's snapshot retention is 5", || async {
        let found = ec
            .describe_replication_groups()
            .replication_group_id(&cache)
            .send()
            .await;
        found.is_ok_and(|o| {
            o.replication_groups()
                .first()
                .and_then(|g| g.snapshot_retention_limit())
                == Some(5)
        })
    })
    .await;
    eventually(
        "the bucket and both users carry the new product tag",
        || async {
            tagged(&iam, &s3, &files, &files).await && tagged(&iam, &s3, &files, &mail_user).await
        },
    )
    .await;

    // Rotation.
    let rotate = Patch::Merge(
        json!({"metadata": {"annotations": {"integreatly.org/rotate-credentials": "lost-answers"}}}),
    );
    Api::<Postgres>::namespaced(client.clone(), &ns)
        .patch("db", &params, &rotate)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<BlobStorage>::namespaced(client.clone(), &ns)
        .patch("files", &params, &rotate)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns)
        .patch("mail", &params, &rotate)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    complete::<Postgres>(&client, &ns, "db", |o| rotated(o.status.as_ref())).await;
    complete::<BlobStorage>(&client, &ns, "files", |o| rotated(o.status.as_ref())).await;
    complete::<SMTPCredentialSet>(&client, &ns, "mail", |o| rotated(o.status.as_ref())).await;
    let password = secret_value(&client, &ns, "db-sec", "password").await;
    let set: BTreeSet<String> = passwords_set(&db).into_iter().collect();
    assert_eq!(
        set,
        BTreeSet::from([password]),
        "the instance got exactly the published password"
    );
    for (user, secret, key) in [
        (&files, "files-sec", "credentialKeyID"),
        (&mail_user, "mail-sec", "username"),
    ] {
        let published = secret_value(&client, &ns, secret, key).await;
        let live = keys_of(&iam, user).await;
        // The published key, and at most the one it replaced (in its grace).
        assert!(
            live.contains(&published) && live.len() <= 2,
            "keys of {user}: {live:?}, published {published}"
        );
    }

    // Snapshots, taken and deleted.
    create_json::<PostgresSnapshot>(&client, &ns, snapshot("PostgresSnapshot", "psnap", "db"))
        .await;
    create_json::<RedisSnapshot>(&client, &ns, snapshot("RedisSnapshot", "rsnap", "cache")).await;
    let psnap = complete::<PostgresSnapshot>(&client, &ns, "psnap", |_| true).await;
    let rsnap = complete::<RedisSnapshot>(&client, &ns, "rsnap", |_| true).await;
    let psnap = psnap.status.and_then(|s| s.snapshot_id).unwrap_or_default();
    let rsnap = rsnap.status.and_then(|s| s.snapshot_id).unwrap_or_default();
    delete_cr::<PostgresSnapshot>(&client, &ns, "psnap").await;
    delete_cr::<RedisSnapshot>(&client, &ns, "rsnap").await;
    assert!(
        rds.describe_db_snapshots()
            .db_snapshot_identifier(&psnap)
            .send()
            .await
            .is_err(),
        "RDS snapshot {psnap} left behind"
    );
    let left = ec.describe_snapshots().snapshot_name(&rsnap).send().await;
    assert_eq!(
        left.map(|o| o.snapshots().len()).unwrap_or(0),
        0,
        "ElastiCache snapshot {rsnap} left behind"
    );

    // Delete.
    delete_cr::<Postgres>(&client, &ns, "db").await;
    delete_cr::<Redis>(&client, &ns, "cache").await;
    delete_cr::<BlobStorage>(&client, &ns, "files").await;
    delete_cr::<SMTPCredentialSet>(&client, &ns, "mail").await;

    // Nothing left but one final snapshot of each database.
    let instance = rds
        .describe_db_instances()
        .db_instance_identifier(&db)
        .send()
        .await;
    assert!(instance.is_err(), "RDS instance {db} left behind");
    let group = ec
        .describe_replication_groups()
        .replication_group_id(&cache)
        .send()
        .await;
    assert!(group.is_err(), "replication group {cache} left behind");
    assert!(
        s3.head_bucket().bucket(&files).send().await.is_err(),
        "bucket {files} left behind"
    );
    for user in [&files, &mail_user] {
        assert!(
            iam.get_user().user_name(user).send().await.is_err(),
            "IAM user {user} left behind"
        );
    }
    let finals = rds
        .describe_db_snapshots()
        .db_instance_identifier(&db)
        .send()
        .await;
    let finals = finals.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        finals.db_snapshots().len(),
        1,
        "RDS snapshots of {db}: {:?}",
        finals.db_snapshots()
    );
    // Filtering by a group that no longer exists is an error: read them all.
    let pages = ec.describe_snapshots().into_paginator().send();
    let all = pages
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let finals: Vec<_> = (all.iter().flat_map(|p| p.snapshots()))
        .filter(|s| s.replication_group_id() == Some(cache.as_str()))
        .collect();
    assert_eq!(
        finals.len(),
        1,
        "ElastiCache snapshots of {cache}: {finals:?}"
    );

    // No CR was ever failed along the way.
    let failed = failed_events(&client, &ns).await;
    assert!(failed.is_empty(), "CRs went failed: {failed:#?}");
}

#[tokio::test]
async fn every_aws_kind_survives_lost_requests_and_answers_over_five_seeds() {
    crate::support::bounded("every_aws_kind_survives_lost_requests_and_answers_over_five_seeds", async move {
    let runs: Vec<_> = SEEDS
        .iter()
        .map(|seed| tokio::spawn(one_seed(*seed)))
        .collect();
    let mut lost_everywhere: Option<BTreeSet<String>> = None;
    let mut met_the_lag = BTreeSet::new();
    for (seed, run) in SEEDS.iter().zip(runs) {
        let losses = run
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        let Losses {
            calls,
            requests,
            answers,
            ref not_visible_to,
            ref hung,
            ..
        } = losses;
        eprintln!(
            "seed {seed}: {calls} AWS calls, {requests} requests and {answers} answers lost; not visible yet to {not_visible_to:?}; hung {hung:?}"
        );
        assert!(requests > 0, "seed {seed}: no request was lost");
        met_the_lag.extend(not_visible_to.iter().cloned());
        if *seed == HUNG_SEED {
            assert!(
                hung.contains("CreateBucket"),
                "seed {seed}: no CreateBucket answer hung"
            );
        }
        lost_everywhere = Some(match lost_everywhere {
            None => losses.answers_of,
            Some(before) => before.intersection(&losses.answers_of).cloned().collect(),
        });
    }
    // The operator looked right after its creates and met AWS's lag, for
    // each kind in some seed (whether a look falls in the window is the
    // dice's).
    for describe in [
        "DescribeDBInstances",
        "DescribeReplicationGroups",
        "HeadBucket",
    ] {
        assert!(
            met_the_lag.contains(describe),
            "no {describe} met a just-created resource: {met_the_lag:?}"
        );
    }
    // Every create met what its lost call made, in every seed.
    let lost = lost_everywhere.unwrap_or_default();
    for call in [
        "CreateDBInstance",
        "CreateReplicationGroup",
        "CreateBucket",
        "CreateUser",
        "CreateAccessKey",
        "CreateDBSnapshot",
        "CreateSnapshot",
        "DeleteDBInstance",
        "DeleteBucket",
    ] {
        assert!(
            lost.contains(call),
            "not every seed lost an answer of {call}: {lost:?}"
        );
    }
}).await;
}

/// One AWS service down while the others work (issue #46): through its
/// own proxy, the operator meets ElastiCache answering 503
/// ServiceUnavailable to every call. Its Postgres and BlobStorage complete
/// meanwhile; its Redis waits, saying why; once ElastiCache is back, the
/// Redis completes by itself.
#[tokio::test]
async fn one_aws_service_down_holds_back_only_its_own_kind() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let flag = root.join(format!(
        "target/testenv/elasticache-down-{}",
        std::process::id()
    ));
    std::fs::write(&flag, "").unwrap_or_else(|e| panic!("{}: {e}", flag.display()));
    let proxy = Proxy::with_service_down("elasticache-down", "elasticache", &flag).await;
    let endpoint = ("AWS_ENDPOINT_URL".to_string(), proxy.url.clone());
    let log = proxy.log.clone();
    with_operator_launched(
        "svcdown",
        |launch| launch.env.push(endpoint),
        |client, ns, _op| async move {
            create_json::<Redis>(&client, &ns, cr("Redis", "cache")).await;
            create_json::<Postgres>(&client, &ns, cr("Postgres", "db")).await;
            create_json::<BlobStorage>(&client, &ns, cr("BlobStorage", "files")).await;
            complete::<Postgres>(&client, &ns, "db", |_| true).await;
            complete::<BlobStorage>(&client, &ns, "files", |_| true).await;
            let caches = Api::<Redis>::namespaced(client.clone(), &ns);
            let waiting = wait_for(
                &caches,
                "cache",
                "a message naming the outage",
                TIMEOUT,
                |o: Option<&Redis>| {
                    o.is_some_and(|o| {
                        o.message().contains("ServiceUnavailable") || o.message().contains("503")
                    })
                },
            )
            .await;
            assert_ne!(waiting.phase(), Some(Phase::Complete));
            assert_ne!(
                waiting.phase(),
                Some(Phase::Failed),
                "an outage failed the CR: {}",
                waiting.message()
            );
            let refused = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                refused.contains("\"unavailable\""),
                "the proxy refused no ElastiCache call"
            );

            // ElastiCache is back.
            std::fs::remove_file(&flag).unwrap_or_else(|e| panic!("{}: {e}", flag.display()));
            complete::<Redis>(&client, &ns, "cache", |_| true).await;
            for (kind, name) in [
                ("Redis", "cache"),
                ("Postgres", "db"),
                ("BlobStorage", "files"),
            ] {
                let resource = kube::discovery::ApiResource::from_gvk_with_plural(
                    &kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind),
                    &cloud_resource_operator::api::crds()
                        .into_iter()
                        .find(|c| c.spec.names.kind == kind)
                        .map(|c| c.spec.names.plural)
                        .unwrap_or_default(),
                );
                let api: Api<kube::core::DynamicObject> =
                    Api::namespaced_with(client.clone(), &ns, &resource);
                api.delete(name, &Default::default())
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                wait_deleted(&api, name, TIMEOUT).await;
            }
        },
    )
    .await;
}
