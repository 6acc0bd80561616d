//! API-server faults under load: with 100 CRs in flight and two operator
//! replicas electing a leader, the real kube-apiserver process is restarted
//! twice (and etcd once), and frozen for 20 s (SIGSTOP: it accepts
//! connections and answers nothing, so requests hang rather than fail). Watches drop and resume (relisting when their
//! resourceVersion is gone), writes in flight fail and are retried on fresh
//! state, and the Lease is kept or re-acquired without a second leader
//! acting. Afterwards every CR is complete, nothing is duplicated, and no
//! CR reports a stale error.

use std::{collections::BTreeMap, time::Duration};

use cloud_resource_operator::api::{BlobStorage, Redis, SMTPCredentialSet};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, Phased, TestEnv, create_json, create_namespace, ensure_crds,
};

fn cr(kind: &str, name: &str, type_: &str) -> serde_json::Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"type": type_, "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
}

/// The first line of `log` containing `needle`, by its timestamp.
fn first_time(log: &str, needle: &str) -> Option<String> {
    // Only log records carry a timestamp; the process's exit message
    // ("Error: lost leadership ...") does not.
    log.lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.split_whitespace().next())
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

/// An operator replica started again whenever it exits, as the kubelet does
/// for a pod with `restartPolicy: Always`: a replica that cannot renew its
/// Lease while the API server is down exits by design, and when both do,
/// only the restart brings reconciling back. Each run logs to its own file.
/// Only such exits are allowed: a run that panicked, or one that exits
/// once the faults are over (plus the Lease's renew deadline), fails the
/// test with its log.
struct Replica {
    launch: Launch,
    current: Operator,
    earlier_logs: String,
    runs: usize,
    /// Exits are expected until then (set when the faults begin).
    exits_allowed_until: Option<tokio::time::Instant>,
}

/// After the last fault, how long a replica may still find its Lease lost
/// (the renew deadline is 10 s) and exit.
const EXIT_GRACE: Duration = Duration::from_secs(30);

/// The last lines of a log, for a failure message.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

impl Replica {
    async fn start(launch: Launch) -> Replica {
        let current = Operator::launch(launch.clone()).await;
        Replica {
            launch,
            current,
            earlier_logs: String::new(),
            runs: 1,
            exits_allowed_until: None,
        }
    }

    async fn revive(&mut self) {
        if self.current.exited() {
            let log = self.current.logs();
            let name = &self.launch.log_name;
            assert!(
                !log.contains("panicked"),
                "{name} run {} panicked:\n{}",
                self.runs,
                tail(&log)
            );
            assert!(
                self.exits_allowed_until
                    .is_some_and(|t| tokio::time::Instant::now() < t),
                "{name} run {} exited outside the faults:\n{}",
                self.runs,
                tail(&log)
            );
            self.earlier_logs.push_str(&log);
            self.runs += 1;
            let log_name = format!("{}.{}", self.launch.log_name, self.runs);
            self.current = Operator::launch(Launch {
                log_name,
                ..self.launch.clone()
            })
            .await;
        }
    }

    /// Every run's log, oldest first.
    fn logs(&self) -> String {
        format!("{}{}", self.earlier_logs, self.current.logs())
    }
}

/// Waits for every CR of kind `K` to be complete, restarting replicas that
/// exited; the CRs not complete at the deadline are named.
async fn all_complete<K>(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
    replicas: &mut [Replica],
) -> Vec<K>
where
    K: Phased
        + kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        for replica in replicas.iter_mut() {
            replica.revive().await;
        }
        let list = api.list(&ListParams::default()).await.map(|l| l.items);
        if let Err(e) = &list {
            assert!(
                tokio::time::Instant::now() < deadline,
                "listing {} still fails at the deadline: {e}",
                K::kind(&())
            );
        }
        if let Ok(items) = list {
            let pending: Vec<String> = names
                .iter()
                .filter(|n| {
                    !items.iter().any(|i| {
                        i.meta().name.as_ref() == Some(n)
                            && i.phase() == Some(cloud_resource_operator::api::Phase::Complete)
                    })
                })
                .cloned()
                .collect();
            if pending.is_empty() {
                return items;
            }
            if tokio::time::Instant::now() >= deadline {
                let states: Vec<String> = pending
                    .iter()
                    .map(|n| {
                        let item = items.iter().find(|i| i.meta().name.as_ref() == Some(n));
                        let phase = item.and_then(Phased::phase);
                        let message = item.map(Phased::message).unwrap_or_default();
                        format!("{n}: {phase:?} {message:?}")
                    })
                    .collect();
                panic!(
                    "{} {} not complete: {states:?} (replica runs: {:?})",
                    pending.len(),
                    K::kind(&()),
                    replicas.iter().map(|r| r.runs).collect::<Vec<_>>()
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until a replica holds the Lease and renewed it in the last two
/// seconds, reviving replicas meanwhile.
async fn held_and_renewed(client: &Client, ns: &str, replicas: &mut [Replica]) {
    use k8s_openapi::api::coordination::v1::Lease;
    // Where `Launch` has the replicas elect.
    let leases = Api::<Lease>::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        for replica in replicas.iter_mut() {
            replica.revive().await;
        }
        let lease = leases.get_opt(&format!("cro-{ns}")).await.ok().flatten();
        let spec = lease.and_then(|l| l.spec);
        let renewed = spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0);
        let fresh = renewed.is_some_and(|t| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(t)
                .as_secs_f64()
                < 2.0
        });
        if fresh && spec.is_some_and(|s| s.holder_identity.is_some()) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no replica renewed the Lease cro-{ns} within {DEFAULT_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_api_server_restarts_twice_under_a_hundred_crs() {
    crate::support::bounded("the_api_server_restarts_twice_under_a_hundred_crs", async move {
    let _serial = crate::SERIAL.lock().await;
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ns = create_namespace(&client, "faults").await;
    // Two replicas electing a leader on one Lease.
    let first = Replica::start(Launch {
        log_name: format!("operator-{ns}-a.log"),
        ..Launch::new(&ns)
    })
    .await;
    first
        .current
        .wait_log("became the leader", DEFAULT_TIMEOUT)
        .await;
    let second = Replica::start(Launch {
        log_name: format!("operator-{ns}-b.log"),
        ..Launch::new(&ns)
    })
    .await;
    second
        .current
        .wait_log("waiting to become the leader", DEFAULT_TIMEOUT)
        .await;
    let mut replicas = [first, second];

    let names = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
    let (blobs, redis, s3, smtp) = (
        names("blob", 50),
        names("cache", 5),
        names("bucket", 25),
        names("mail", 20),
    );
    for name in &blobs {
        create_json::<BlobStorage>(&client, &ns, cr("BlobStorage", name, "workshop")).await;
    }
    for name in &redis {
        create_json::<Redis>(&client, &ns, cr("Redis", name, "workshop")).await;
    }
    for name in &s3 {
        create_json::<BlobStorage>(&client, &ns, cr("BlobStorage", name, "managed")).await;
    }
    for name in &smtp {
        create_json::<SMTPCredentialSet>(&client, &ns, cr("SMTPCredentialSet", name, "managed"))
            .await;
    }

    // With work provably in flight (not every CR complete yet): the API
    // server twice (once SIGKILLed, as a crash or OOM kill), etcd once
    // (SIGKILLed).
    let in_flight = |client: Client, ns: String| async move {
        let complete = |phases: Vec<Option<cloud_resource_operator::api::Phase>>| {
            phases
                .into_iter()
                .filter(|p| *p == Some(cloud_resource_operator::api::Phase::Complete))
                .count()
        };
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await;
        // A failed list is no count: it would pass the check below.
        let blobs = blobs
            .map(|l| l.items.iter().map(Phased::phase).collect())
            .unwrap_or_else(|e| panic!("listing BlobStorages: {e}"));
        let smtp = Api::<SMTPCredentialSet>::namespaced(client, &ns)
            .list(&ListParams::default())
            .await;
        let smtp = smtp
            .map(|l| l.items.iter().map(Phased::phase).collect())
            .unwrap_or_else(|e| panic!("listing SMTPCredentialSets: {e}"));
        complete(blobs) + complete(smtp)
    };
    let done_before = in_flight(client.clone(), ns.clone()).await;
    assert!(
        done_before < blobs.len() + s3.len() + smtp.len(),
        "every CR was complete before the first fault"
    );
    let until = tokio::time::Instant::now() + Duration::from_secs(3600);
    for replica in replicas.iter_mut() {
        replica.exits_allowed_until = Some(until);
    }
    crate::testenv(&["restart", "apiserver"]);
    tokio::time::sleep(Duration::from_secs(2)).await; // let reconciles start against the new server
    // Hung, not down: longer than the renew deadline (10 s), so the
    // leader's renewal hangs past it. Frozen once a leader renews again.
    held_and_renewed(&client, &ns, &mut replicas).await;
    crate::testenv(&["freeze", "apiserver", "20"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    crate::testenv(&["restart", "etcd", "--kill"]);
    crate::testenv(&["restart", "apiserver", "--kill"]);
    let until = tokio::time::Instant::now() + EXIT_GRACE;
    for replica in replicas.iter_mut() {
        replica.exits_allowed_until = Some(until);
    }
    eprintln!(
        "{done_before} of {} BlobStorages and SMTPCredentialSets complete when the faults began",
        blobs.len() + s3.len() + smtp.len()
    );

    let timeout = Duration::from_secs(300);
    let mut all_blobs = blobs.clone();
    all_blobs.extend(s3.iter().cloned());
    // A retry in flight shows its error beside a complete phase until it
    // runs (the longest backoff is 300 s); a stale error is one that stays.
    let settled = tokio::time::Instant::now() + Duration::from_secs(330);
    loop {
        let blob_crs: Vec<BlobStorage> =
            all_complete(&client, &ns, &all_blobs, timeout, &mut replicas).await;
        let redis_crs: Vec<Redis> =
            all_complete(&client, &ns, &redis, timeout, &mut replicas).await;
        let smtp_crs: Vec<SMTPCredentialSet> =
            all_complete(&client, &ns, &smtp, timeout, &mut replicas).await;
        let messages: Vec<String> = blob_crs
            .iter()
            .map(Phased::message)
            .chain(redis_crs.iter().map(Phased::message))
            .chain(smtp_crs.iter().map(Phased::message))
            .collect();
        assert_eq!(messages.len(), 100);
        let stale: Vec<&String> = messages.iter().filter(|m| m.contains("error")).collect();
        if stale.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < settled,
            "a stale error: {stale:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    // Nothing duplicated: one Deployment per Redis, one IAM key per user,
    // and that key is the one published.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(deployments.items.len(), redis.len());
    let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
    let secrets: BTreeMap<String, Secret> = Api::<Secret>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
        .collect();
    let value = |secret: &str, key: &str| {
        secrets
            .get(secret)
            .and_then(|s| s.data.as_ref()?.get(key))
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
    };
    for (name, key) in s3
        .iter()
        .map(|n| (n, "credentialKeyID"))
        .chain(smtp.iter().map(|n| (n, "username")))
    {
        let id = cro_provider_api::cloud_identifier("testcluster", &ns, name);
        // An SMTPCredentialSet's user carries `-ses` (see smtp::user_name).
        let user = match key {
            "username" => cro_provider_api::IdentifierRules::IamUser.conform(&format!("{id}-ses")),
            _ => id,
        };
        let keys = iam
            .list_access_keys()
            .user_name(&user)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let ids: Vec<&str> = keys
            .access_key_metadata()
            .iter()
            .filter_map(|k| k.access_key_id())
            .collect();
        assert_eq!(ids.len(), 1, "{user}: {ids:?}");
        assert_eq!(
            value(&format!("{name}-sec"), key).as_deref(),
            Some(ids[0]),
            "{name}"
        );
    }

    // One leader at a time: the standby reconciled nothing before the
    // first replica lost its Lease (if it did).
    let (a, b) = (replicas[0].logs(), replicas[1].logs());
    let b_first_work = first_time(&b, "reconcile finished");
    match first_time(&a, "lost leadership") {
        None => assert_eq!(
            b_first_work, None,
            "the standby reconciled while the leader held the Lease"
        ),
        Some(lost) => assert!(
            b_first_work.as_ref().is_none_or(|t| *t > lost),
            "the standby reconciled at {b_first_work:?}, before the leader lost at {lost}"
        ),
    }

    // The frozen server's leader gave its Lease up on the deadline rather
    // than waiting on the hung renewal.
    assert!(
        replicas.iter().any(|r| r.logs().contains("the API server did not answer")),
        "no replica gave its Lease up on an unanswered renewal"
    );
    for replica in &replicas {
        let log = replica.logs();
        assert!(
            !log.contains("panicked"),
            "{} panicked:\n{}",
            replica.launch.log_name,
            tail(&log)
        );
    }

    // Cleanup with the operators running (finalizers honoured).
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &Default::default()).await;
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT * 2;
    while matches!(namespaces.get_opt(&ns).await, Ok(Some(_)))
        && tokio::time::Instant::now() < deadline
    {
        for replica in replicas.iter_mut() {
            replica.revive().await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for replica in replicas {
        replica.current.stop().await;
    }
}).await;
}
