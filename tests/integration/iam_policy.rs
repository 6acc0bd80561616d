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
        DEFAULT_TIMEOUT, Launch, Operator, TestEnv, repo_root, wait_deleted, wait_for,
        with_namespace, with_operator_launched,
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

/// The actions a statement names, one string or a list.
fn actions_of(statement: &Value) -> Vec<String> {
    match &statement["Action"] {
        Value::String(a) => vec![a.clone()],
        Value::Array(a) => (a.iter())
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        _ => vec![],
    }
}

/// The scoping issue #59 asked for, read from the statements themselves:
/// no tag write on RDS, ElastiCache or EC2 and no change or delete of a
/// database without a condition on this cluster's tag, no AssumeRole on
/// `*`, and IAM users only on the path and within the boundary.
#[test]
fn the_shipped_policys_scoping_is_in_its_conditions() {
    let shipped = policy("operator-policy.json");
    let statements = shipped["Statement"].as_array().cloned().unwrap_or_default();
    let key = "integreatly.org/clusterID";
    let on_cluster_tag = |s: &Value| {
        let conditions = s["Condition"].to_string();
        conditions.contains(&format!("aws:ResourceTag/{key}"))
            || conditions.contains(&format!("aws:RequestTag/{key}"))
    };
    let tag_writes = [
        "rds:AddTagsToResource",
        "elasticache:AddTagsToResource",
        "ec2:CreateTags",
    ];
    let changes = [
        "rds:ModifyDBInstance",
        "rds:DeleteDBInstance",
        "elasticache:ModifyReplicationGroup",
        "elasticache:DeleteReplicationGroup",
        "ec2:DeleteVpc",
        "ec2:DeleteSecurityGroup",
    ];
    for s in &statements {
        let sid = s["Sid"].as_str().unwrap_or("a statement");
        for action in actions_of(s) {
            if tag_writes.contains(&action.as_str()) || changes.contains(&action.as_str()) {
                assert!(
                    on_cluster_tag(s),
                    "{sid} allows {action} without a condition on {key}"
                );
                // The value is the install's cluster, not any (`?*`).
                assert!(
                    s["Condition"].to_string().contains("<CLUSTER_ID>"),
                    "{sid}: {action} for any cluster"
                );
            }
            if action == "sts:AssumeRole" {
                assert_ne!(s["Resource"], json!("*"), "{sid} allows AssumeRole on *");
            }
            if action == "iam:CreateUser" || action == "iam:PutUserPolicy" {
                let boundary = &s["Condition"]["ArnEquals"]["iam:PermissionsBoundary"];
                assert!(
                    boundary.is_string(),
                    "{sid} allows {action} without the permissions boundary"
                );
            }
            if action.starts_with("iam:") && action != "iam:GetAccountAuthorizationDetails" {
                let resource = s["Resource"].as_str().unwrap_or_default();
                assert!(
                    resource.ends_with(":user/cloud-resource-operator/*"),
                    "{sid}: {action} on {resource}"
                );
            }
        }
    }
    // Every trust policy names who may assume the role.
    for trust in [
        "trust-policy-irsa.json",
        "trust-policy-eks-pod-identity.json",
        "trust-policy-openshift-sts.json",
    ] {
        for s in policy(trust)["Statement"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            assert!(
                s["Condition"].is_object(),
                "{trust} has a statement without conditions"
            );
        }
    }
}

/// One finding of a third-party auditor: which policy, what it says,
/// about which actions.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Finding {
    tool: String,
    policy: String,
    issue: String,
    actions: Vec<String>,
}

/// `file` with sample values, through deploy/aws/render.sh as a user
/// renders it.
fn rendered(file: &str) -> PathBuf {
    let out = std::process::Command::new("sh")
        .arg(repo_root().join("deploy/aws/render.sh"))
        .arg(repo_root().join("deploy/aws").join(file))
        .args(["CLUSTER_ID=mycluster-x7k2p", "ACCOUNT_ID=123456789012"])
        .output()
        .unwrap_or_else(|e| panic!("render.sh: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "render.sh {file}: {stderr}");
    let path = std::env::temp_dir().join(format!("cro-audit-{}-{file}", std::process::id()));
    std::fs::write(&path, &out.stdout).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn parliament(bin: &std::path::Path, file: &str) -> Vec<Finding> {
    let text = std::fs::read_to_string(rendered(file)).unwrap_or_else(|e| panic!("{e}"));
    // parliament refuses --file when stdin is not a terminal.
    let out = std::process::Command::new(bin.join("parliament"))
        .args(["--string", &text, "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("parliament: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim().is_empty(), "parliament {file}: {stderr}");
    (stdout.lines().filter(|l| !l.trim().is_empty()))
        .map(|line| {
            let f: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let mut actions: Vec<String> = match &f["detail"] {
                Value::Array(a) => a
                    .iter()
                    .map(|a| a.as_str().unwrap_or_default().to_string())
                    .collect(),
                other => vec![other.to_string()],
            };
            actions.sort();
            Finding {
                tool: "parliament".into(),
                policy: file.into(),
                issue: f["issue"].as_str().unwrap_or_default().into(),
                actions,
            }
        })
        .collect()
}

fn cloudsplaining(bin: &std::path::Path, file: &str) -> Vec<Finding> {
    let out = std::process::Command::new(bin.join("cloudsplaining"))
        .args(["scan-policy-file", "--input-file"])
        .arg(rendered(file))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cloudsplaining: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // Its report is coloured text: "Potential Issue found: Policy is
    // capable of <risk>" then "Actions: a, b".
    let plain: String = {
        let mut plain = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                chars.by_ref().find(|c| c.is_ascii_alphabetic());
            } else {
                plain.push(c);
            }
        }
        plain
    };
    let mut findings = vec![];
    let mut issue = None;
    for line in plain.lines() {
        if let Some(rest) = line.strip_prefix("Potential Issue found: ") {
            let risk = rest
                .trim_start_matches("Policy is capable of ")
                .trim_start_matches("Policy allows ");
            issue = Some(risk.trim().to_string());
        } else if let (Some(actions), Some(risk)) = (line.strip_prefix("Actions: "), issue.take()) {
            let mut actions: Vec<String> =
                actions.split(',').map(|a| a.trim().to_string()).collect();
            actions.sort();
            findings.push(Finding {
                tool: "cloudsplaining".into(),
                policy: file.into(),
                issue: risk,
                actions,
            });
        }
    }
    assert!(
        !findings.is_empty() || plain.contains("There were no results found"),
        "cloudsplaining's report on {file} was not understood:\n{plain}"
    );
    findings
}

/// parliament and cloudsplaining (third-party IAM auditors, from PyPI)
/// over the identity policies as an install renders them: every finding
/// is one deploy/aws/policy-audit.json explains, and every explanation is
/// of a finding still there.
#[test]
fn the_policy_auditors_find_nothing_left_unexplained() {
    let bin = PathBuf::from(std::env::var("CRO_TESTENV_POLICY_AUDIT").unwrap_or_else(|_| {
        panic!("CRO_TESTENV_POLICY_AUDIT is not set: restart the environment (make testenv-down testenv-up) to install the policy auditors")
    }));
    let mut found = vec![];
    for file in ["operator-policy.json", "user-permissions-boundary.json"] {
        found.extend(parliament(&bin, file));
        found.extend(cloudsplaining(&bin, file));
    }
    found.sort();
    let explained = policy("policy-audit.json");
    let mut listed = vec![];
    for e in explained["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let why = e["why"].as_str().unwrap_or_default();
        assert!(why.len() > 20, "an explanation says nothing: {e}");
        let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
        let mut actions: Vec<String> =
            (e["actions"].as_array().cloned().unwrap_or_default().iter())
                .map(|a| a.as_str().unwrap_or_default().to_string())
                .collect();
        actions.sort();
        listed.push(Finding {
            tool: text("tool"),
            policy: text("policy"),
            issue: text("issue"),
            actions,
        });
    }
    listed.sort();
    let unexplained: Vec<_> = found.iter().filter(|f| !listed.contains(f)).collect();
    let stale: Vec<_> = listed.iter().filter(|f| !found.contains(f)).collect();
    assert!(
        unexplained.is_empty(),
        "findings deploy/aws/policy-audit.json does not explain: {unexplained:#?}"
    );
    assert!(
        stale.is_empty(),
        "explanations of findings no longer made: {stale:#?}"
    );
}

/// A moto of this test's own (enforcing IAM touches every caller of the
/// process), killed on drop.
pub(crate) struct PrivateMoto {
    child: std::process::Child,
    pub endpoint: String,
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

pub(crate) async fn start_moto() -> PrivateMoto {
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
pub(crate) async fn enforce_iam_after(endpoint: &str, count: u32) {
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
pub(crate) async fn unenforced(endpoint: &str) -> aws_config::SdkConfig {
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
pub(crate) async fn user_with_the_policy(endpoint: &str, policy: &Value) -> (String, String) {
    named_user_with_the_policy(endpoint, "cloud-resource-operator", policy).await
}

/// [`user_with_the_policy`], for the user `name`.
pub(crate) async fn named_user_with_the_policy(
    endpoint: &str,
    name: &str,
    policy: &Value,
) -> (String, String) {
    let config = unenforced(endpoint).await;
    let iam = aws_sdk_iam::Client::new(&config);
    let document = as_moto_evaluates(policy).to_string();
    let arn = iam
        .create_policy()
        .policy_name(name)
        .policy_document(document)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .policy
        .and_then(|p| p.arn)
        .unwrap_or_default();
    iam.create_user()
        .user_name(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    iam.attach_user_policy()
        .user_name(name)
        .policy_arn(arn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let key = iam
        .create_access_key()
        .user_name(name)
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
pub(crate) async fn cluster_vpc(endpoint: &str) -> String {
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

/// The Secret the Cloud Credential Operator mints for the Go operator's
/// CredentialsRequest (pkg/providers/aws/credentials.go,
/// `defaultCredentialsSecretName`), holding `key`.
pub(crate) fn cco_secret(key: &(String, String)) -> k8s_openapi::api::core::v1::Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "cloud-resources-aws-credentials"},
        "stringData": {"aws_access_key_id": key.0, "aws_secret_access_key": key.1},
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

/// An IAM client of the private moto signing with `key`.
pub(crate) async fn iam_as(endpoint: &str, key: &(String, String)) -> aws_sdk_iam::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new(TestEnv::load().aws_region))
        .credentials_provider(aws_sdk_iam::config::Credentials::new(
            &key.0, &key.1, None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_iam::Client::new(&config)
}

/// The Cloud Credential Operator rotates the operator's key as it does:
/// a new key in its Secret, the old key deleted at once. The operator,
/// which found its identity in that Secret, takes the new key up without
/// a restart, and no CR fails meanwhile: AWS refusing the old key is
/// retried, not a failure a person must clear (issue #62).
#[tokio::test]
async fn a_rotated_cco_key_is_taken_up_without_a_restart_or_a_failed_cr() {
    let moto = start_moto().await;
    let vpc = cluster_vpc(&moto.endpoint).await;
    let old = user_with_the_policy(&moto.endpoint, &policy("operator-policy.json")).await;
    enforce_iam_after(&moto.endpoint, 0).await;
    let endpoint = moto.endpoint.clone();
    with_namespace("ccorotation", move |client, ns| async move {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
        secrets
            .create(&Default::default(), &cco_secret(&old))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        shipped_configuration(&client, &ns).await;
        // As a switched Go installation runs it: no keys of its own.
        let mut launch = Launch::new(&ns);
        launch.cluster_id = None;
        launch.extra_args.push(format!("--aws-vpc-id={vpc}"));
        launch
            .env
            .push(("AWS_ENDPOINT_URL".into(), endpoint.clone()));
        launch.env_remove = vec!["AWS_ACCESS_KEY_ID".into(), "AWS_SECRET_ACCESS_KEY".into()];
        let op = Operator::launch(launch).await;
        op.wait_log("Cloud Credential Operator's Secret", DEFAULT_TIMEOUT)
            .await;

        // A BlobStorage (S3 first) and an SMTPCredentialSet (IAM first),
        // before and after the rotation.
        let samples = objects_in("config/samples/aws");
        let kinds: Vec<DynamicObject> = ["BlobStorage", "SMTPCredentialSet"]
            .iter()
            .map(|kind| {
                (samples.iter())
                    .find(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == *kind))
                    .map(|(_, o)| o.clone())
                    .unwrap_or_else(|| panic!("no {kind} sample: {samples:?}"))
            })
            .collect();
        let named = |sample: &DynamicObject, name: &str| {
            let mut o = sample.clone();
            o.metadata.name = Some(name.into());
            let kind = sample.types.as_ref().map(|t| t.kind.to_lowercase());
            let secret = format!("{name}-{}", kind.unwrap_or_default());
            o.data["spec"]["secretRef"]["name"] = json!(secret);
            o
        };
        let complete =
            |o: Option<&DynamicObject>| o.is_some_and(|o| o.data["status"]["phase"] == "complete");
        let serve = |when: &'static str, timeout: Duration| {
            let (client, ns, kinds) = (client.clone(), ns.clone(), kinds.clone());
            async move {
                for sample in &kinds {
                    let api = api_for(&client, &ns, sample);
                    api.create(&Default::default(), &named(sample, when))
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
                for sample in &kinds {
                    let api = api_for(&client, &ns, sample);
                    wait_for(&api, when, "phase complete", timeout, complete).await;
                }
            }
        };
        serve("before", DEFAULT_TIMEOUT * 2).await;

        // The rotation: a new key in the Secret, the old one deleted.
        let iam = iam_as(&endpoint, &old).await;
        let new = iam
            .create_access_key()
            .user_name("cloud-resource-operator")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"))
            .access_key
            .unwrap_or_else(|| panic!("no access key"));
        let new = (new.access_key_id, new.secret_access_key);
        crate::support::apply(&secrets, &cco_secret(&new))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let iam = iam_as(&endpoint, &new).await;
        iam.delete_access_key()
            .user_name("cloud-resource-operator")
            .access_key_id(&old.0)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        // AWS takes the old key no more.
        let refused = iam_as(&endpoint, &old)
            .await
            .list_access_keys()
            .user_name("cloud-resource-operator")
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("{:?}", aws_sdk_iam::error::DisplayErrorContext(e)));
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("InvalidClientTokenId")),
            "the deleted key: {refused:?}"
        );

        // Work after the rotation completes, with the same process.
        serve("after", DEFAULT_TIMEOUT * 3).await;
        for sample in &kinds {
            let api = api_for(&client, &ns, sample);
            for name in ["before", "after"] {
                api.delete(name, &Default::default())
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                wait_deleted(&api, name, DEFAULT_TIMEOUT * 2).await;
            }
        }
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
        let failed: Vec<String> = (events.list(&Default::default()).await)
            .unwrap_or_else(|e| panic!("{e}"))
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Failed"))
            .map(|e| e.message.unwrap_or_default())
            .collect();
        assert!(
            failed.is_empty(),
            "a CR failed over the rotation: {failed:?}"
        );
        let restarts = op.logs().matches("AWS identity source=").count();
        assert_eq!(restarts, 1, "the operator chose its identity again");
        op.stop().await;
    })
    .await;
}
