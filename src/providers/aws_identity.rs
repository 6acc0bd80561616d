//! Which AWS identity the operator's own calls run as, in order: its own
//! Secret (AWS_ACCESS_KEY_ID in its environment, from the Secret its
//! Deployment reads), the Cloud Credential Operator's Secret that the Go
//! operator's CredentialsRequest made (`cloud-resources-aws-credentials`,
//! pkg/providers/aws/credentials.go, in the operator's namespace, else the
//! watched one), STS mode, the rest of the standard chain (IRSA, EKS Pod
//! Identity, a profile). A cluster switching from the Go operator thus
//! keeps the identity it had, with nothing to copy; a cluster-wide one's
//! Secrets in other namespaces are named, never used
//! ([`go_secrets_elsewhere`]).

use cro_provider_api::ProviderError;
use cro_provider_aws::{AccessKeys, ReadKeys, Sts};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, api::ListParams};

/// The Secret the Cloud Credential Operator mints for the Go operator's
/// CredentialsRequest, and its keys.
pub const CCO_SECRET: &str = "cloud-resources-aws-credentials";
const KEY_ID: &str = "aws_access_key_id";
const SECRET_KEY: &str = "aws_secret_access_key";

/// Where the operator's AWS identity comes from.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    OwnSecret,
    CloudCredentialOperator { namespace: String },
    Sts { role_arn: String },
    StandardChain,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::OwnSecret => f.write_str(
                "the operator's own keys (AWS_ACCESS_KEY_ID in its environment, e.g. from Secret cloud-resource-operator-aws)",
            ),
            Source::CloudCredentialOperator { namespace } => write!(
                f,
                "the Cloud Credential Operator's Secret {namespace}/{CCO_SECRET} (the Go operator's CredentialsRequest)"
            ),
            Source::Sts { role_arn } => write!(
                f,
                "STS mode: role {role_arn} of Secret sts-credentials, with the pod's projected token"
            ),
            Source::StandardChain => f.write_str(
                "the standard AWS chain (web identity / IRSA, EKS Pod Identity, a profile)",
            ),
        }
    }
}

/// The identity chosen, and what the provider gets for it: keys to read,
/// or STS mode (which also means BlobStorage gets no IAM user).
pub struct Chosen {
    pub source: Source,
    pub keys: Option<ReadKeys>,
    pub sts: Option<Sts>,
}

/// Whether the operator's environment carries keys of its own.
fn own_keys() -> bool {
    std::env::var("AWS_ACCESS_KEY_ID").is_ok_and(|v| !v.trim().is_empty())
}

/// Chooses, in the order above; `sts` is STS mode as Secret
/// `sts-credentials` says.
pub async fn choose(
    client: &Client,
    operator_namespace: &str,
    watched: &[String],
    sts: Option<Sts>,
) -> anyhow::Result<Chosen> {
    if own_keys() {
        return Ok(Chosen {
            source: Source::OwnSecret,
            keys: None,
            sts: None,
        });
    }
    choose_in_cluster(client, operator_namespace, watched, sts).await
}

/// [`choose`] past the operator's own keys: what the cluster holds.
pub async fn choose_in_cluster(
    client: &Client,
    operator_namespace: &str,
    watched: &[String],
    sts: Option<Sts>,
) -> anyhow::Result<Chosen> {
    let mut namespaces = vec![operator_namespace];
    if let [one] = watched
        && one != operator_namespace
    {
        namespaces.push(one);
    }
    for namespace in namespaces {
        if cco_secret(client, namespace).await?.is_some() {
            return Ok(Chosen {
                source: Source::CloudCredentialOperator {
                    namespace: namespace.to_string(),
                },
                keys: Some(read_keys(client.clone(), namespace.to_string())),
                sts: None,
            });
        }
    }
    let source = match &sts {
        Some(sts) => Source::Sts {
            role_arn: sts.role_arn.clone(),
        },
        None => Source::StandardChain,
    };
    Ok(Chosen {
        source,
        keys: None,
        sts,
    })
}

/// The CCO Secret in `namespace` when it holds both keys; one without
/// them (CCO has not minted yet) is passed over. Not allowed to read it
/// is not an error: the operator may not be granted Secrets there.
async fn cco_secret(client: &Client, namespace: &str) -> anyhow::Result<Option<AccessKeys>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match secrets.get_opt(CCO_SECRET).await {
        Ok(found) => Ok(found.as_ref().and_then(keys_of)),
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::debug!(namespace, "may not read Secret {CCO_SECRET}; not using it");
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "reading Secret {namespace}/{CCO_SECRET} (AWS credentials)"
        ))),
    }
}

/// The namespaces other than `operator_namespace` whose Secret
/// `cloud-resources-aws-credentials` holds both keys, in order: a
/// cluster-wide Go installation asked for one in each CR's namespace
/// (`ReconcileProviderCredentials(ctx, cr.Namespace)`,
/// pkg/providers/aws/credentials.go). They are named so a person gives the
/// operator its own, never used: a tenant may create a Secret of that name
/// in its namespace, and would choose the AWS account every CR's resources
/// are made in. Not allowed to list Secrets everywhere is none.
pub async fn go_secrets_elsewhere(
    client: &Client,
    operator_namespace: &str,
) -> anyhow::Result<Vec<String>> {
    let secrets: Api<Secret> = Api::all(client.clone());
    let named = ListParams::default().fields(&format!("metadata.name={CCO_SECRET}"));
    let listed = match secrets.list(&named).await {
        Ok(listed) => listed.items,
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::debug!(
                "may not list Secrets in every namespace; not looking for {CCO_SECRET} there"
            );
            Vec::new()
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("listing Secrets {CCO_SECRET} (AWS credentials)")));
        }
    };
    let mut found: Vec<String> = (listed.iter())
        .filter(|s| keys_of(s).is_some())
        .filter_map(|s| s.metadata.namespace.clone())
        .filter(|ns| ns != operator_namespace)
        .collect();
    found.sort();
    Ok(found)
}

fn keys_of(secret: &Secret) -> Option<AccessKeys> {
    let data = secret.data.as_ref()?;
    let value = |key: &str| {
        let v = String::from_utf8_lossy(&data.get(key)?.0)
            .trim()
            .to_string();
        (!v.is_empty()).then_some(v)
    };
    Some(AccessKeys {
        id: value(KEY_ID)?,
        secret: value(SECRET_KEY)?,
    })
}

/// Reads the CCO Secret of `namespace` whenever the SDK asks.
fn read_keys(client: Client, namespace: String) -> ReadKeys {
    let source = format!("Secret {namespace}/{CCO_SECRET}");
    let read = std::sync::Arc::new(move || {
        let (client, namespace) = (client.clone(), namespace.clone());
        Box::pin(async move {
            match cco_secret(&client, &namespace).await {
                Ok(Some(keys)) => Ok(keys),
                Ok(None) => Err(ProviderError::permanent(format!(
                    "it is gone or lacks {KEY_ID} / {SECRET_KEY}: restore it (its CredentialsRequest), or give the operator keys of its own"
                ))),
                Err(e) => Err(ProviderError::transient(format!("{e:#}"))),
            }
        }) as std::pin::Pin<Box<dyn Future<Output = _> + Send>>
    });
    ReadKeys { source, read }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn a_cco_secret_is_used_only_with_both_keys() {
        let both = keys_of(&secret(&[(KEY_ID, "AKIA1\n"), (SECRET_KEY, "s")]));
        assert_eq!(
            both.map(|k| (k.id, k.secret)),
            Some(("AKIA1".into(), "s".into()))
        );
        assert!(keys_of(&secret(&[(KEY_ID, "AKIA1")])).is_none());
        assert!(keys_of(&secret(&[(KEY_ID, " "), (SECRET_KEY, "s")])).is_none());
        assert!(keys_of(&Secret::default()).is_none());
    }
}
