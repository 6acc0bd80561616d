//! The Cloud Credential Operator (CCO) in mint mode, as
//! openshift/cloud-credential-operator serves an AWS CredentialsRequest at
//! the version the Go operator pins (`CLOUD_CREDENTIAL_OPERATOR_VERSION`,
//! tests/testenv/versions.env), whose CRD the environment installs as
//! published: no CCO runs here, so this stands in for it, held to what its
//! source does (pkg/aws/actuator/actuator.go and
//! pkg/operator/credentialsrequest/credentialsrequest_controller.go):
//! - the request gets the finalizer `cloudcredential.openshift.io/deprovision`
//!   first;
//! - `syncMint`: an IAM user `<infra>-<request name, 37 at most>-<5 random>`
//!   (`generateUserName`) with one inline policy `<user>-policy`
//!   (`getPolicyName`): the request's statements with AWS's key case, plus
//!   `iam:GetUser` on the user itself (`addGetUserStatement`), and an access
//!   key;
//! - `syncAccessKeySecret`: the Secret `spec.secretRef`, see [`minted_secret`];
//! - the status: `provisioned`, `providerStatus` (`AWSProviderStatus`, the
//!   user and policy names), `lastSyncGeneration`;
//! - a deleted request: the user (keys, policy) and the Secret go, then the
//!   finalizer.
//!
//! moto checks every request against resource `*` (see iam_policy.rs), so
//! the user's policy is put there with its resources widened; the
//! annotation keeps the policy as CCO would have put it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use serde_json::{Value, json};

const GROUP: &str = "cloudcredential.openshift.io";
/// CCO's label and annotation naming the request a Secret was filled for
/// (`LabelCredentialsRequest`, `AnnotationCredentialsRequest`).
const REQUEST_KEY: &str = "cloudcredential.openshift.io/credentials-request";
const FINALIZER: &str = "cloudcredential.openshift.io/deprovision";
/// The infrastructure name CCO prefixes its users with.
const INFRA: &str = "testcluster";

/// The CredentialsRequests of `ns`.
pub(crate) fn requests(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "CredentialsRequest");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "credentialsrequests");
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// The Secret CCO fills for the CredentialsRequest `ns/name`
/// (`syncAccessKeySecret`): its label and annotations, no owner, the key
/// twice (the two keys and a `credentials` file, `generateAWSCredentialsConfig`).
pub(crate) fn minted_secret(ns: &str, name: &str, key: (&str, &str), policy: &str) -> Secret {
    let credentials = format!(
        "[default]\naws_access_key_id = {}\naws_secret_access_key = {}",
        key.0, key.1
    );
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {REQUEST_KEY: "true"},
            "annotations": {
                REQUEST_KEY: format!("{ns}/{name}"),
                "cloudcredential.openshift.io/aws-policy-last-applied": policy,
            },
        },
        "type": "Opaque",
        "stringData": {"aws_access_key_id": key.0, "aws_secret_access_key": key.1, "credentials": credentials},
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The policy CCO puts for `statements` (a request's `statementEntries`)
/// on `user` (`getDesiredUserPolicy`).
pub(crate) fn user_policy(statements: &Value, user: &str) -> Value {
    let mut statement: Vec<Value> = (statements.as_array().into_iter().flatten())
        .map(|s| json!({"Effect": s["effect"], "Action": s["action"], "Resource": s["resource"]}))
        .collect();
    let arn = format!("arn:aws:iam::123456789012:user/{user}");
    statement.push(json!({"Effect": "Allow", "Action": ["iam:GetUser"], "Resource": arn}));
    json!({"Version": "2012-10-17", "Statement": statement})
}

/// CCO serving the requests of one namespace with `iam` (an identity that
/// may manage users), until dropped.
pub(crate) struct Cco(tokio::task::JoinHandle<()>);

impl Drop for Cco {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Cco {
    pub(crate) fn start(client: Client, ns: &str, iam: aws_sdk_iam::Client) -> Cco {
        let (api, ns) = (requests(&client, ns), ns.to_string());
        let secrets = Api::<Secret>::namespaced(client, &ns);
        Cco(tokio::spawn(async move {
            loop {
                // Its controller watches; a short poll stands in.
                let listed = api.list(&Default::default()).await;
                for request in listed.map(|l| l.items).unwrap_or_default() {
                    serve(&api, &secrets, &iam, request).await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }))
    }
}

async fn serve(
    api: &Api<DynamicObject>,
    secrets: &Api<Secret>,
    iam: &aws_sdk_iam::Client,
    request: DynamicObject,
) {
    let name = request.name_any();
    let finalizers = request.finalizers().to_vec();
    if request.metadata.deletion_timestamp.is_some() {
        if !finalizers.iter().any(|f| f == FINALIZER) {
            return;
        }
        if let Some(user) = request.data["status"]["providerStatus"]["user"].as_str() {
            delete_user(iam, user).await;
        }
        let _ = secrets.delete(&name, &DeleteParams::default()).await;
        let rest: Vec<_> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        let patch = json!({"metadata": {"finalizers": rest}});
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        return;
    }
    if !finalizers.iter().any(|f| f == FINALIZER) {
        let mut all = finalizers;
        all.push(FINALIZER.to_string());
        let patch = json!({"metadata": {"finalizers": all}});
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        return;
    }
    if request.data["status"]["provisioned"] == json!(true) {
        return;
    }
    let spec = &request.data["spec"];
    let shortened: String = name.chars().take(37).collect();
    // Five random characters: the request's UID's first five.
    let random: String = request.uid().unwrap_or_default().chars().take(5).collect();
    let user = format!("{INFRA}-{shortened}-{random}");
    let policy = user_policy(&spec["providerSpec"]["statementEntries"], &user);
    let key = create_user(iam, &user, &policy).await;
    let target = spec["secretRef"]["name"].as_str().unwrap_or_default();
    let ns = spec["secretRef"]["namespace"].as_str().unwrap_or_default();
    let secret = minted_secret(ns, target, (&key.0, &key.1), &policy.to_string());
    crate::support::apply(secrets, &secret)
        .await
        .unwrap_or_else(|e| panic!("CCO writing Secret {ns}/{target}: {e}"));
    let status = json!({"status": {
        "provisioned": true,
        "lastSyncGeneration": request.metadata.generation.unwrap_or_default(),
        "providerStatus": {"apiVersion": format!("{GROUP}/v1"), "kind": "AWSProviderStatus",
            "user": user, "policy": format!("{user}-policy")},
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("CCO writing the status of CredentialsRequest {name}: {e}"));
}

/// The user, its policy (widened for moto) and a key.
async fn create_user(iam: &aws_sdk_iam::Client, user: &str, policy: &Value) -> (String, String) {
    let mut widened = policy.clone();
    for s in widened["Statement"].as_array_mut().into_iter().flatten() {
        s["Resource"] = json!("*");
    }
    let made = iam.create_user().user_name(user).send().await;
    made.unwrap_or_else(|e| panic!("CCO making user {user}: {e:?}"));
    let put = (iam.put_user_policy().user_name(user))
        .policy_name(format!("{user}-policy"))
        .policy_document(widened.to_string())
        .send()
        .await;
    put.unwrap_or_else(|e| panic!("CCO putting the policy of {user}: {e:?}"));
    let key = iam.create_access_key().user_name(user).send().await;
    let key = key.unwrap_or_else(|e| panic!("CCO making a key of {user}: {e:?}"));
    let key = key
        .access_key
        .unwrap_or_else(|| panic!("CCO: no key for {user}"));
    (key.access_key_id, key.secret_access_key)
}

/// CCO's deprovision: the user's keys, policy and the user.
async fn delete_user(iam: &aws_sdk_iam::Client, user: &str) {
    let keys = iam.list_access_keys().user_name(user).send().await;
    for key in keys.map(|k| k.access_key_metadata).unwrap_or_default() {
        let id = key.access_key_id.unwrap_or_default();
        let _ = iam
            .delete_access_key()
            .user_name(user)
            .access_key_id(id)
            .send()
            .await;
    }
    let policy = format!("{user}-policy");
    let _ = iam
        .delete_user_policy()
        .user_name(user)
        .policy_name(policy)
        .send()
        .await;
    let _ = iam.delete_user().user_name(user).send().await;
}

/// The data of `secret` as strings.
pub(crate) fn strings(secret: &Secret) -> std::collections::BTreeMap<String, String> {
    (secret.data.iter().flatten())
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}
