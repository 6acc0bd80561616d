//! The in-cluster provider (name `openshift`, as in the Go operator; it
//! works on any Kubernetes). Postgres and Redis run as a one-replica
//! Deployment with a Service and a PVC in the CR's namespace; blob storage
//! and SMTP get placeholder Secrets a person fills in.

mod apply;
mod credentials;
mod merge;
mod strategy;
mod workload;

use std::collections::BTreeMap;

use apply::{Applied, ensure};
use cro_provider_api::{
    ConnectionDetails, Deletion, Outcome, Provider, ProviderError, Provisioned, ResourceKind,
    ResourceRequest, SnapshotRequest, Snapshotted,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
};
use kube::{Api, Client};

pub use merge::{is_subset, merge};
pub use workload::{MANAGED_BY, MANAGED_BY_LABEL};

pub const NAME: &str = "openshift";

pub struct InClusterProvider {
    client: Client,
    cluster_domain: Option<String>,
}

impl InClusterProvider {
    /// `cluster_domain` (e.g. `cluster.local`) is appended to service hosts
    /// when set; otherwise hosts are `<name>.<namespace>.svc`.
    pub fn new(client: Client, cluster_domain: Option<String>) -> Self {
        InClusterProvider {
            client,
            cluster_domain,
        }
    }

    fn host(&self, req: &ResourceRequest) -> String {
        match &self.cluster_domain {
            Some(d) if !d.is_empty() => format!("{}.{}.svc.{d}", req.name, req.namespace),
            _ => format!("{}.{}.svc", req.name, req.namespace),
        }
    }

    fn api<K>(&self, req: &ResourceRequest) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &req.namespace)
    }

    /// Applies the workload; `Ready` when its Deployment is Available.
    async fn workload(
        &self,
        req: &ResourceRequest,
        desired: &workload::Desired,
    ) -> Result<Outcome<()>, ProviderError> {
        let mut terminating = Vec::new();
        if let Applied::Terminating =
            ensure(&self.api::<PersistentVolumeClaim>(req), &desired.pvc).await?
        {
            terminating.push("PersistentVolumeClaim");
        }
        if let Some(cm) = &desired.config_map
            && let Applied::Terminating = ensure(&self.api::<ConfigMap>(req), cm).await?
        {
            terminating.push("ConfigMap");
        }
        if let Applied::Terminating = ensure(&self.api::<Service>(req), &desired.service).await? {
            terminating.push("Service");
        }
        let deployment = match ensure(&self.api::<Deployment>(req), &desired.deployment).await? {
            Applied::Current(d) => Some(d),
            Applied::Terminating => {
                terminating.push("Deployment");
                None
            }
        };
        if !terminating.is_empty() {
            return Ok(Outcome::InProgress(format!(
                "waiting for {} {} to finish deleting before recreating it",
                terminating.join(", "),
                req.name
            )));
        }
        Ok(match deployment {
            Some(d) if available(&d) => Outcome::Ready(()),
            _ => Outcome::InProgress(format!(
                "waiting for Deployment {} to become available",
                req.name
            )),
        })
    }
}

/// Available, and the status describes the current spec.
fn available(d: &Deployment) -> bool {
    let Some(status) = &d.status else {
        return false;
    };
    let current =
        status.observed_generation.unwrap_or_default() >= d.metadata.generation.unwrap_or_default();
    let updated = status.updated_replicas.unwrap_or_default()
        >= d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let condition = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Available" && c.status == "True");
    current && updated && condition
}

fn details(pairs: &[(&str, &str)]) -> ConnectionDetails {
    ConnectionDetails(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn provisioned(
    provider: &str,
    outcome: Outcome<ConnectionDetails>,
    version: Option<String>,
) -> Provisioned {
    // Watch events on the workload drive every change: no identifier to
    // record, no recheck.
    Provisioned {
        version,
        ..Provisioned::new(provider, outcome)
    }
}

/// Checks a tier's strategy for `kind` without a cluster: its keys, and
/// the objects built with its overrides against the Kubernetes types. The
/// same checks run on every reconcile; `cloud-resource-operator validate`
/// runs them offline.
pub fn validate_strategy(
    kind: ResourceKind,
    strategy: &serde_json::Value,
) -> Result<(), ProviderError> {
    let overrides = strategy::parse(strategy)?;
    let probe = ResourceRequest {
        kind,
        namespace: "validate".into(),
        name: "validate".into(),
        owner: cro_provider_api::Owner {
            api_version: "integreatly.org/v1alpha1".into(),
            kind: "Validate".into(),
            name: "validate".into(),
            uid: "validate".into(),
        },
        identifier: "validate".into(),
        recorded_identifier: None,
        final_snapshot_identifier: None,
        tier: String::new(),
        strategy: strategy.clone(),
        tags: BTreeMap::new(),
        options: Default::default(),
    };
    match kind {
        ResourceKind::Postgres => workload::postgres(&probe, &overrides).map(drop),
        ResourceKind::Redis => workload::redis(&probe, &overrides).map(drop),
        ResourceKind::BlobStorage | ResourceKind::Smtp => Ok(()),
    }
}

#[async_trait::async_trait]
impl Provider for InClusterProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let overrides = strategy::parse(&req.strategy)?;
        match req.kind {
            ResourceKind::Postgres => {
                let desired = workload::postgres(req, &overrides)?;
                let creds =
                    credentials::ensure(&self.api::<Secret>(req), req, &overrides.secret_data)
                        .await?;
                let version = workload::image_tag(&desired.deployment);
                let outcome = match self.workload(req, &desired).await? {
                    Outcome::Ready(()) => Outcome::Ready(ConnectionDetails(BTreeMap::from([
                        ("username".into(), creds.username),
                        ("password".into(), creds.password),
                        ("database".into(), creds.database),
                        ("host".into(), self.host(req)),
                        ("port".into(), "5432".into()),
                    ]))),
                    Outcome::InProgress(r) => Outcome::InProgress(r),
                    Outcome::Failed(r) => Outcome::Failed(r),
                };
                Ok(provisioned("openshift-postgres-template", outcome, version))
            }
            ResourceKind::Redis => {
                let desired = workload::redis(req, &overrides)?;
                let version = workload::image_tag(&desired.deployment);
                let host = self.host(req);
                let outcome = match self.workload(req, &desired).await? {
                    // The Go operator puts the host (not a URL) in `uri`.
                    Outcome::Ready(()) => {
                        Outcome::Ready(details(&[("uri", &host), ("port", "6379")]))
                    }
                    Outcome::InProgress(r) => Outcome::InProgress(r),
                    Outcome::Failed(r) => Outcome::Failed(r),
                };
                Ok(provisioned("openshift-redis-template", outcome, version))
            }
            // Nothing to run in-cluster: placeholders a person fills in.
            ResourceKind::BlobStorage => Ok(provisioned(
                "openshift-blobstorage-template",
                Outcome::Ready(details(&[
                    ("bucketName", ""),
                    ("bucketRegion", ""),
                    ("credentialKeyID", ""),
                    ("credentialSecretKey", ""),
                ])),
                None,
            )),
            ResourceKind::Smtp => Ok(provisioned(
                "openshift-smtp-template",
                Outcome::Ready(details(&[
                    ("username", ""),
                    ("password", ""),
                    ("host", ""),
                    ("port", "587"),
                    ("tls", "true"),
                ])),
                None,
            )),
        }
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        if !matches!(req.kind, ResourceKind::Postgres | ResourceKind::Redis) {
            return Ok(Deletion::Done);
        }
        let name = req.name.as_str();
        // Deployment first, so the PVC's pod goes and the PVC can follow.
        let mut left = Vec::new();
        if !apply::delete(&self.api::<Deployment>(req), name).await? {
            left.push(format!("Deployment {name}"));
        }
        if !apply::delete(&self.api::<Service>(req), name).await? {
            left.push(format!("Service {name}"));
        }
        if !apply::delete(&self.api::<PersistentVolumeClaim>(req), name).await? {
            left.push(format!("PersistentVolumeClaim {name}"));
        }
        let secret = workload::credentials_secret_name(name);
        if !apply::delete(&self.api::<Secret>(req), &secret).await? {
            left.push(format!("Secret {secret}"));
        }
        let cm = workload::config_map_name(name);
        if req.kind == ResourceKind::Redis
            && !apply::delete(&self.api::<ConfigMap>(req), &cm).await?
        {
            left.push(format!("ConfigMap {cm}"));
        }
        Ok(if left.is_empty() {
            Deletion::Done
        } else {
            Deletion::InProgress(format!("waiting for {} to be deleted", left.join(", ")))
        })
    }

    async fn snapshot(&self, _req: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        Ok(Snapshotted {
            outcome: Outcome::Failed(
                "snapshots need the aws provider: the parent resource's type maps to the in-cluster provider (openshift) in cloud-resource-config".into(),
            ),
        })
    }

    async fn delete_snapshot(&self, _req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        Ok(Deletion::Done)
    }
}
