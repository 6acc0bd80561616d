//! deploy/aws/operator-policy.json, the least-privilege policy users give
//! the operator (issue #42): it grants every action docs/operations.md's
//! table names, and the AWS samples are served and deleted under it, on an
//! emulator of their own that enforces IAM.
//!
//! moto evaluates a policy's actions but not its `Resource` or
//! `Condition` elements (moto/iam/access_control.py: "TODO add support for
//! the Resource and Condition parts of IAM policies"; every request is
//! checked against resource `*`). So the emulator is given the policy's
//! statements with their actions as shipped, their resources widened to
//! `*` and their conditions dropped: what is proven here is that no call
//! the operator makes is missing from the policy. The resource and tag
//! scoping are AWS's to evaluate and are documented beside the policy.

use std::{path::PathBuf, time::Duration};

use kube::{Api, ResourceExt, api::DynamicObject};
use serde_json::{Value, json};

use crate::{
    foundation::{api_for, objects_in},
    support::{
        DEFAULT_TIMEOUT, Launch, TestEnv, repo_root, wait_deleted, wait_for, with_operator_launched,
    },
};

fn policy(file: &str) -> Value {
    let path = repo_root().join("deploy/aws").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every action a policy allows, `service:Action`.
fn allowed(policy: &Value) -> std::collections::BTreeSet<String> {
    let statements = policy["Statement"].as_array().cloned().unwrap_or_default();
    statements
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(|s| match &s["Action"] {
            Value::String(a) => vec![a.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        })
        .collect()
}

#[test]
fn the_shipped_policy_allows_exactly_the_documented_actions() {
    let mut documented = crate::deploy::documented_aws_actions();
    // Called with the web identity token, never with the policy's identity.
    documented.remove("sts:AssumeRoleWithWebIdentity");
    assert!(documented.len() > 70, "{documented:?}");
    assert_eq!(
        allowed(&policy("operator-policy.json")),
        documented,
        "deploy/aws/operator-policy.json and docs/operations.md differ"
    );
    // The users' permissions boundary allows what their own policies do
    // (providers/aws/src/iam_user: bucket_policy, ses_send_policy).
    let boundary = allowed(&policy("user-permissions-boundary.json"));
    for action in [
        "s3:GetObject",
        "s3:PutObject",
        "s3:ListBucket",
        "ses:SendRawEmail",
        "ses:SendEmail",
    ] {
        assert!(boundary.contains(action), "the boundary lacks {action}");
    }
    for trust in [
        "trust-policy-irsa.json",
        "trust-policy-eks-pod-identity.json",
        "trust-policy-openshift-sts.json",
    ] {
        assert!(
            policy(trust)["Statement"]
                .as_array()
                .is_some_and(|s| !s.is_empty()),
            "{trust}"
        );
    }
}

/// A moto of this test's own (enforcing IAM touches every caller of the
/// process), killed on drop.
struct PrivateMoto {
    child: std::process::Child,
    endpoint: String,
}

impl Drop for PrivateMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_python() -> PathBuf {
    let versions =
        std::fs::read_to_string(repo_root().join("tests/testenv/versions.env")).unwrap_or_default();
    let version = |key: &str| {
        versions
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in tests/testenv/versions.env"))
            .trim()
            .to_string()
    };
    let cache = std::env::var("CRO_TESTENV_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/cro-testenv")
        });
    cache.join(format!(
        "moto-{}-cbor2-{}/bin/python",
        version("MOTO_VERSION"),
        version("CBOR2_VERSION")
    ))
}

async fn start_moto() -> PrivateMoto {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let logs = repo_root().join("target/testenv/logs");
    let log =
        std::fs::File::create(logs.join("moto-iam-enforced.log")).unwrap_or_else(|e| panic!("{e}"));
    let child = std::process::Command::new(moto_python())
        .arg(repo_root().join("tests/testenv/moto_server.py"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_DEFAULT_REGION", TestEnv::load().aws_region)
        .env(
            "CRO_MOTO_REQUEST_LOG",
            logs.join("moto-iam-enforced-requests.jsonl"),
        )
        .stdout(log.try_clone().unwrap_or_else(|e| panic!("{e}")))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting moto: {e}"));
    let moto = PrivateMoto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        while !answers(&moto.endpoint).await {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("moto did not answer at {} within 60 s", moto.endpoint));
    moto
}

/// Whether `GET /moto-api/` answers 200 (a raw HTTP/1.0 request).
async fn answers(endpoint: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(endpoint.trim_start_matches("http://")).await
    else {
        return false;
    };
    let _ = s.write_all(b"GET /moto-api/ HTTP/1.0\r\n\r\n").await;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.is_ok() && head.ends_with(b"200")
}

/// `POST /moto-api/reset-auth` with `count`: IAM is enforced after that
/// many more calls.
async fn enforce_iam_after(endpoint: &str, count: u32) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = count.to_string();
    let mut s = tokio::net::TcpStream::connect(endpoint.trim_start_matches("http://"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let request = format!(
        "POST /moto-api/reset-auth HTTP/1.0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
}

/// The policy as moto can evaluate it (see the module's comment).
fn as_moto_evaluates(policy: &Value) -> Value {
    let mut p = policy.clone();
    for s in p["Statement"].as_array_mut().into_iter().flatten() {
        s["Resource"] = json!("*");
        if let Some(s) = s.as_object_mut() {
            s.remove("Condition");
        }
    }
    p
}

/// The SDK's configuration for `endpoint` with the keys moto takes while
/// it answers anyone (before IAM is enforced).
async fn unenforced(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new(TestEnv::load().aws_region))
        .credentials_provider(aws_sdk_iam::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await
}

/// An IAM user holding only `policy`, made while moto still answers
/// anyone; its access key.
async fn user_with_the_policy(endpoint: &str, policy: &Value) -> (String, String) {
    let config = unenforced(endpoint).await;
    let iam = aws_sdk_iam::Client::new(&config);
    let document = as_moto_evaluates(policy).to_string();
    let arn = iam
        .create_policy()
        .policy_name("cloud-resource-operator")
        .policy_document(document)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .policy
        .and_then(|p| p.arn)
        .unwrap_or_default();
    iam.create_user()
        .user_name("cloud-resource-operator")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    iam.attach_user_policy()
        .user_name("cloud-resource-operator")
        .policy_arn(arn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let key = iam
        .create_access_key()
        .user_name("cloud-resource-operator")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let key = key.access_key.unwrap_or_else(|| panic!("no access key"));
    (key.access_key_id, key.secret_access_key)
}

/// The cluster's VPC in the private moto (tests/testenv/aws_cluster.py's
/// layout): its id, for --aws-vpc-id, since the node's providerID names an
/// instance of the shared emulator (so `ec2:DescribeInstances`, the
/// providerID lookup, is the one documented action not exercised here).
async fn cluster_vpc(endpoint: &str) -> String {
    let env = TestEnv::load();
    let out = std::process::Command::new(moto_python())
        .arg(repo_root().join("tests/testenv/aws_cluster.py"))
        .args([endpoint, &env.aws_region, "testcluster"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "aws_cluster.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = unenforced(endpoint).await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let vpcs = ec2
        .describe_vpcs()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:Name")
                .values("cro-testenv-eks")
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    vpcs.vpcs()
        .first()
        .and_then(|v| v.vpc_id())
        .unwrap_or_else(|| panic!("no cluster VPC"))
        .to_string()
}

/// The operator as a new user runs it (no --cluster-id), against the
/// private moto as the IAM user of `key`, in the cluster's VPC.
fn as_the_user(endpoint: &str, vpc: String, key: (String, String)) -> impl Fn(&mut Launch) + Clone {
    let endpoint = endpoint.to_string();
    move |l: &mut Launch| {
        l.cluster_id = None;
        l.extra_args.push(format!("--aws-vpc-id={vpc}"));
        l.env.push(("AWS_ENDPOINT_URL".into(), endpoint.clone()));
        l.env.push(("AWS_ACCESS_KEY_ID".into(), key.0.clone()));
        l.env.push(("AWS_SECRET_ACCESS_KEY".into(), key.1.clone()));
    }
}

/// The configuration ConfigMaps of config/, as shipped, in `ns`.
async fn shipped_configuration(client: &kube::Client, ns: &str) {
    for (file, cm) in objects_in("config") {
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(serde_json::to_value(&cm).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        crate::support::apply(&Api::namespaced(client.clone(), ns), &cm)
            .await
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[tokio::test]
async fn the_aws_samples_are_served_and_deleted_under_the_shipped_policy() {
    let moto = start_moto().await;
    let vpc = cluster_vpc(&moto.endpoint).await;
    let shipped = policy("operator-policy.json");
    let (key_id, secret) = user_with_the_policy(&moto.endpoint, &shipped).await;
    enforce_iam_after(&moto.endpoint, 0).await;
    let adjust = as_the_user(&moto.endpoint, vpc, (key_id, secret));
    with_operator_launched("iampolicy", adjust, |client, ns, op| async move {
        shipped_configuration(&client, &ns).await;
        let samples = objects_in("config/samples/aws");
        assert!(samples.len() >= 6, "{samples:?}");
        for (file, obj) in &samples {
            api_for(&client, &ns, obj)
                .create(&Default::default(), obj)
                .await
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        for (_, obj) in &samples {
            let name = obj.name_any();
            wait_for(
                &api_for(&client, &ns, obj),
                &name,
                "phase complete",
                DEFAULT_TIMEOUT * 3,
                |o: Option<&DynamicObject>| {
                    o.is_some_and(|o| o.data["status"]["phase"] == "complete")
                },
            )
            .await;
        }
        // Deleting needs its own actions: snapshots first, then the rest.
        for (_, obj) in samples.iter().rev() {
            api_for(&client, &ns, obj)
                .delete(&obj.name_any(), &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for (_, obj) in &samples {
            wait_deleted(
                &api_for(&client, &ns, obj),
                &obj.name_any(),
                DEFAULT_TIMEOUT * 3,
            )
            .await;
        }
        let logs = op.logs();
        let denied: Vec<&str> = logs
            .lines()
            .filter(|l| {
                l.contains("AccessDenied")
                    || l.contains("AuthFailure")
                    || l.contains("not allowed to do this")
            })
            .map(|l| l.trim())
            .collect::<Vec<_>>();
        assert!(
            denied.is_empty(),
            "calls the policy does not allow:\n{}",
            denied.join("\n")
        );
    })
    .await;
}

/// An identity refused tag:GetResources, as one holding the Go operator's
/// policy is (its CredentialsRequest, pkg/providers/aws/credentials.go,
/// lacks it): a recheck reads each resource on its own instead, the CR
/// stays complete, and the refusal is named in its `AWSPermissions`
/// condition and in `cro_aws_permission_refused` (issue #41).
#[tokio::test]
async fn a_refused_listing_read_falls_back_and_is_named() {
    let moto = start_moto().await;
    let vpc = cluster_vpc(&moto.endpoint).await;
    let mut without = policy("operator-policy.json");
    for s in without["Statement"].as_array_mut().into_iter().flatten() {
        if let Some(actions) = s["Action"].as_array_mut() {
            actions.retain(|a| a != "tag:GetResources");
        }
    }
    assert!(!allowed(&without).contains("tag:GetResources"));
    let (key_id, secret) = user_with_the_policy(&moto.endpoint, &without).await;
    enforce_iam_after(&moto.endpoint, 0).await;
    let as_user = as_the_user(&moto.endpoint, vpc, (key_id, secret));
    let adjust = move |l: &mut Launch| {
        as_user(l);
        // Rechecks (which read from listings) every 10 s, not hourly.
        l.env.push(("RECHECK_INTERVAL".into(), "10".into()));
    };
    with_operator_launched("refusedread", adjust, |client, ns, op| async move {
        shipped_configuration(&client, &ns).await;
        let samples = objects_in("config/samples/aws");
        let (file, blob) = (samples.iter())
            .find(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "BlobStorage"))
            .unwrap_or_else(|| panic!("no BlobStorage sample: {samples:?}"));
        let api = api_for(&client, &ns, blob);
        api.create(&Default::default(), blob)
            .await
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let name = blob.name_any();
        let refused = |o: &DynamicObject| {
            let conditions = o.data["status"]["conditions"].as_array().cloned();
            conditions.unwrap_or_default().iter().any(|c| {
                c["type"] == "AWSPermissions"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("tag:GetResources"))
            })
        };
        wait_for(
            &api,
            &name,
            "complete, AWSPermissions naming tag:GetResources",
            DEFAULT_TIMEOUT * 2,
            |o: Option<&DynamicObject>| {
                o.is_some_and(|o| o.data["status"]["phase"] == "complete" && refused(o))
            },
        )
        .await;
        let metrics = op.http_get("/metrics").await;
        assert!(
            metrics
                .lines()
                .any(|l| l == r#"cro_aws_permission_refused{action="tag:GetResources"} 1"#),
            "{metrics}"
        );
        // It keeps serving: deleted with the calls the policy allows.
        api.delete(&name, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&api, &name, DEFAULT_TIMEOUT * 2).await;
    })
    .await;
}
