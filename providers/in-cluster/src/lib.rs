//! The in-cluster provider (name `openshift`, as in the Go operator; it
//! works on any Kubernetes). Postgres and Redis run as a one-replica
//! Deployment with a Service and a PVC in the CR's namespace, and so does a
//! BlobStorage's S3-compatible store (SeaweedFS), in which the operator
//! makes the bucket and a user that may use only it (see `bucket`), and an
//! SMTPCredentialSet's mail server (Mailpit, see `mail`), when their tier
//! says `own`; else they get placeholder Secrets a person fills in.

mod apply;
mod bucket;
mod corrections;
mod credentials;
mod drift;
mod legacy;
mod mail;
mod merge;
mod objects;
mod pod_safety;
mod relay;
mod shared_store;
mod snapshot;
mod store;
mod store_tls;
mod strategy;
mod unavailable;
mod workload;

use std::collections::BTreeMap;

use apply::{Applied, adopt, ensure};
use cro_kube::Owned;
use cro_provider_api::{
    Change, ChangePolicy, ConnectionDetails, Deletion, Outcome, Provider, ProviderError,
    Provisioned, ResourceKind, ResourceRequest, SnapshotRequest, Snapshotted, plan_hash,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, PersistentVolumeClaim, Pod, Secret, Service},
    networking::v1::NetworkPolicy,
};
use kube::{Api, Client, api::ListParams};

pub use merge::{is_subset, merge};
use objects::{Objects, Stored};
use strategy::Serving;
pub use workload::{
    DEFAULT_MAIL_SERVER_IMAGE, DEFAULT_OBJECT_STORE_IMAGE, DEFAULT_POSTGRES_IMAGE,
    DEFAULT_REDIS_IMAGE, Images,
};

pub const NAME: &str = "openshift";

pub struct InClusterProvider {
    client: Client,
    cluster_domain: Option<String>,
    images: Images,
    cache: Option<std::sync::Arc<dyn cro_kube::OwnedObjects>>,
    isolation: workload::Isolation,
    corrections: corrections::Corrections,
    /// Makes buckets, users and keys in a BlobStorage's store.
    object_store: Option<std::sync::Arc<dyn cro_provider_api::ObjectStore>>,
    /// New Postgres and Redis are laid out as the Go operator laid them
    /// (`--go-compatible-resources`), so it can take them back whole.
    go_layout_for_new: bool,
    /// One turn at a time on a namespace's shared object store.
    store_turns: shared_store::Turns,
}

impl InClusterProvider {
    /// `cluster_domain` (e.g. `cluster.local`) is appended to service hosts
    /// when set; otherwise hosts are `<name>.<namespace>.svc`.
    pub fn new(client: Client, cluster_domain: Option<String>) -> Self {
        InClusterProvider {
            client,
            cluster_domain,
            images: Images::default(),
            cache: None,
            isolation: workload::Isolation::default(),
            corrections: corrections::Corrections::new(&Default::default()),
            object_store: None,
            go_layout_for_new: false,
            store_turns: Default::default(),
        }
    }

    /// Lays new Postgres and Redis out as the Go operator did while a
    /// switch from it may be rolled back: its next pass over them then
    /// changes nothing (a Deployment of this operator's layout would meet
    /// its immutable selector, and a new password in its credentials
    /// Secret).
    pub fn with_go_layout_for_new(mut self, go_layout: bool) -> Self {
        self.go_layout_for_new = go_layout;
        self
    }

    /// Isolated workloads admit the operator's namespace too (its
    /// `Connectable` check connects from there).
    pub fn with_operator_namespace(mut self, namespace: Option<String>) -> Self {
        self.isolation.operator_namespace = namespace;
        self
    }

    /// Keeps what it remembers of each object (its corrections) in
    /// `memory`, the one table of every provider.
    pub fn with_memory(mut self, memory: &std::sync::Arc<cro_provider_api::Memory>) -> Self {
        self.corrections = corrections::Corrections::new(memory);
        self
    }

    /// The images Postgres and Redis run unless a tier names its own.
    pub fn with_images(mut self, images: Images) -> Self {
        self.images = images;
        self
    }

    /// What makes the bucket, user and key in a BlobStorage's store.
    pub fn with_object_store(
        mut self,
        store: std::sync::Arc<dyn cro_provider_api::ObjectStore>,
    ) -> Self {
        self.object_store = Some(store);
        self
    }

    /// Reads the objects it owns from `cache` when it holds them.
    pub fn with_cache(mut self, cache: std::sync::Arc<dyn cro_kube::OwnedObjects>) -> Self {
        self.cache = Some(cache);
        self
    }

    fn host(&self, req: &ResourceRequest) -> String {
        self.service_host(&req.name, &req.namespace)
    }

    /// `<name>.<namespace>.svc`, with the cluster domain when set.
    fn service_host(&self, name: &str, namespace: &str) -> String {
        match &self.cluster_domain {
            Some(d) if !d.is_empty() => format!("{name}.{namespace}.svc.{d}"),
            _ => format!("{name}.{namespace}.svc"),
        }
    }

    fn api<K>(&self, req: &ResourceRequest) -> Objects<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Owned
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Objects::new(
            Api::namespaced(self.client.clone(), &req.namespace),
            &req.namespace,
            self.cache.clone(),
        )
    }

    /// The CR's Deployment as last seen.
    async fn deployment(&self, req: &ResourceRequest) -> Result<Option<Deployment>, ProviderError> {
        self.api::<Deployment>(req)
            .get_opt(&req.name)
            .await
            .map_err(|e| {
                cro_kube::provider_error(
                    format!("reading Deployment {}/{}", req.namespace, req.name),
                    &e,
                )
            })
    }

    /// Every difference between the live workload and `desired` (for the
    /// Go operator's layout, only what adopting it asserts).
    async fn drift(
        &self,
        req: &ResourceRequest,
        desired: &workload::Desired,
        layout: Layout,
    ) -> Result<Vec<Change>, ProviderError> {
        let mut changes =
            (self.object_drift::<PersistentVolumeClaim>(req, &desired.pvc, layout)).await?;
        if let Some(cm) = &desired.config_map {
            changes.extend(self.object_drift::<ConfigMap>(req, cm, layout).await?);
        }
        changes.extend(
            self.object_drift::<Service>(req, &desired.service, layout)
                .await?,
        );
        changes.extend(
            self.object_drift::<Deployment>(req, &desired.deployment, layout)
                .await?,
        );
        if let Some(policy) = &desired.network_policy {
            changes.extend(
                self.object_drift::<NetworkPolicy>(req, policy, Layout::Ours)
                    .await?,
            );
        }
        Ok(changes)
    }

    /// The differences of one live object from `desired`.
    async fn object_drift<K: Stored>(
        &self,
        req: &ResourceRequest,
        desired: &serde_json::Value,
        layout: Layout,
    ) -> Result<Vec<Change>, ProviderError> {
        let view = match layout {
            Layout::Ours => desired.clone(),
            Layout::GoOperator => apply::adoption_view(desired),
        };
        let live = apply::live(&self.api::<K>(req), desired).await?;
        Ok(drift::changes(&K::kind(&()), &view, live.as_ref()))
    }

    /// Creates or updates one object as `layout` says.
    async fn put<K: Stored>(
        &self,
        req: &ResourceRequest,
        desired: &serde_json::Value,
        layout: Layout,
    ) -> Result<Applied<K>, ProviderError> {
        let api = self.api::<K>(req);
        match layout {
            Layout::Ours => ensure(&api, desired, &req.owner, &self.corrections).await,
            Layout::GoOperator => adopt(&api, desired, &req.owner).await,
        }
    }

    /// Under a `Plan` tier, a workload that exists is only changed once a
    /// person approved exactly its changes: until then they are returned
    /// (and the workload reported as it is). A new workload is created.
    async fn gated(
        &self,
        req: &ResourceRequest,
        desired: &workload::Desired,
        layout: Layout,
    ) -> Result<Option<(Outcome<()>, Vec<Change>)>, ProviderError> {
        if req.options.change_policy != ChangePolicy::Plan {
            return Ok(None);
        }
        let changes = self.drift(req, desired, layout).await?;
        let approved =
            req.options.approved_plan.as_deref() == Some(&plan_hash(&req.identifier, &changes));
        if changes.is_empty() || drift::creates_workload(&changes) || approved {
            return Ok(None);
        }
        let outcome = match self.deployment(req).await? {
            Some(d) if available(&d) => Outcome::Ready(()),
            d => Outcome::InProgress(self.not_available(req, d.as_ref()).await),
        };
        Ok(Some((outcome, changes)))
    }

    /// Applies the workload (`layout` says how; a `Plan` tier's changes
    /// wait for approval); `Ready` when its Deployment is Available, with
    /// the changes not applied.
    async fn workload(
        &self,
        req: &ResourceRequest,
        desired: &workload::Desired,
        layout: Layout,
    ) -> Result<(Outcome<()>, Vec<Change>), ProviderError> {
        if let Some(gated) = self.gated(req, desired, layout).await? {
            return Ok(gated);
        }
        let mut terminating = Vec::new();
        if let Applied::Terminating = self
            .put::<PersistentVolumeClaim>(req, &desired.pvc, layout)
            .await?
        {
            terminating.push("PersistentVolumeClaim");
        }
        if let Some(cm) = &desired.config_map
            && let Applied::Terminating = self.put::<ConfigMap>(req, cm, layout).await?
        {
            terminating.push("ConfigMap");
        }
        if let Applied::Terminating = self.put::<Service>(req, &desired.service, layout).await? {
            terminating.push("Service");
        }
        // This operator's own, whoever laid the workload out.
        if let Some(policy) = &desired.network_policy
            && let Applied::Terminating =
                self.put::<NetworkPolicy>(req, policy, Layout::Ours).await?
        {
            terminating.push("NetworkPolicy");
        }
        let deployment = match self
            .put::<Deployment>(req, &desired.deployment, layout)
            .await?
        {
            Applied::Current(d) => Some(d),
            Applied::Terminating => {
                terminating.push("Deployment");
                None
            }
        };
        if !terminating.is_empty() {
            return Ok((
                Outcome::InProgress(format!(
                    "waiting for {} {} to finish deleting before recreating it",
                    terminating.join(", "),
                    req.name
                )),
                Vec::new(),
            ));
        }
        let outcome = match deployment {
            Some(d) if available(&d) => Outcome::Ready(()),
            d => Outcome::InProgress(self.not_available(req, d.as_ref()).await),
        };
        Ok((outcome, Vec::new()))
    }

    /// What the CR says while its Deployment is not available: why, when
    /// its pods tell (see `unavailable`).
    async fn not_available(
        &self,
        req: &ResourceRequest,
        deployment: Option<&Deployment>,
    ) -> String {
        let waiting = format!("waiting for Deployment {} to become available", req.name);
        let Some(d) = deployment else {
            return waiting;
        };
        let labels = (d.spec.as_ref())
            .and_then(|s| s.selector.match_labels.as_ref())
            .map(|l| {
                l.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            });
        let pods = match labels {
            // The explanation is a courtesy: without the list, the plain
            // message stands.
            Some(selector) => Api::<Pod>::namespaced(self.client.clone(), &req.namespace)
                .list(&ListParams::default().labels(&selector))
                .await
                .map(|l| l.items)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        match unavailable::why(d, &pods, k8s_openapi::jiff::Timestamp::now()) {
            Some(why) => format!("{waiting}: {why}"),
            None => waiting,
        }
    }
}

/// Who laid the workload out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// This operator: its objects are re-asserted from the tier.
    Ours,
    /// The Go operator: adopted as it is (see `legacy`).
    GoOperator,
}

/// What the objects named like the CR say of its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Observed {
    Laid(Layout),
    /// A PVC with nothing on it: a person says whose it is.
    InTheWay,
    /// Nothing yet: the workload is new.
    Nothing,
}

impl InClusterProvider {
    /// The Go operator's layout when its Deployment (selector
    /// `deployment: <name>`) is there, or, with that gone, its Postgres
    /// credentials Secret beside a PVC of the CR's name (the data it
    /// guards), or a PVC it was adopted from; and whether a PVC with
    /// nothing on it is in the way. A Secret alone is no data to keep:
    /// whoever may write Secrets in the namespace would otherwise choose
    /// the Go layout (no securityContext, NetworkPolicy or Redis password)
    /// for a new CR by making one.
    async fn observed_layout(&self, req: &ResourceRequest) -> Result<Observed, ProviderError> {
        let read = |kind: &str, e: kube::Error| {
            cro_kube::provider_error(format!("reading {kind} {}/{}", req.namespace, req.name), &e)
        };
        let name = req.name.as_str();
        if let Some(d) = self
            .api::<Deployment>(req)
            .get_opt(name)
            .await
            .map_err(|e| read("Deployment", e))?
        {
            return Ok(Observed::Laid(match legacy::is_go_deployment(&d, name) {
                true => Layout::GoOperator,
                false => Layout::Ours,
            }));
        }
        let pvc = self
            .api::<PersistentVolumeClaim>(req)
            .get_opt(name)
            .await
            .map_err(|e| read("PersistentVolumeClaim", e))?;
        let go_secret = req.kind == ResourceKind::Postgres
            && pvc
                .as_ref()
                .is_some_and(|p| legacy::claim(p) != legacy::Claim::Ours)
            && self
                .api::<Secret>(req)
                .get_opt(&legacy::postgres_secret_name(name))
                .await
                .map_err(|e| read("Secret", e))?
                .is_some();
        if go_secret {
            return Ok(Observed::Laid(Layout::GoOperator));
        }
        Ok(match pvc.as_ref().map(legacy::claim) {
            Some(legacy::Claim::Go) => Observed::Laid(Layout::GoOperator),
            Some(legacy::Claim::Unknown) => Observed::InTheWay,
            Some(legacy::Claim::Ours) => Observed::Laid(Layout::Ours),
            None => Observed::Nothing,
        })
    }

    /// How a workload of this operator's layout is isolated: a new one is
    /// (see [`workload::ISOLATED_ANNOTATION`]), one that exists only if its
    /// Deployment says so.
    async fn isolation(
        &self,
        req: &ResourceRequest,
    ) -> Result<Option<&workload::Isolation>, ProviderError> {
        let isolated = self.deployment(req).await?.is_none_or(|d| {
            d.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(workload::ISOLATED_ANNOTATION))
                .is_some_and(|v| v == "true")
        });
        Ok(isolated.then_some(&self.isolation))
    }

    /// How a workload of the Go operator's layout is isolated: one this
    /// operator made (new under `--go-compatible-resources`) as its own
    /// are, unless the tier turns `networkPolicy` off; one the Go operator
    /// made stays open, as it was, also when its Deployment is made again
    /// after a person deleted it (its PVC is there, no policy of ours).
    async fn go_isolation(
        &self,
        req: &ResourceRequest,
        overrides: &strategy::Overrides,
    ) -> Result<Option<&workload::Isolation>, ProviderError> {
        if !overrides.network_policy {
            return Ok(None);
        }
        let isolated = match self.deployment(req).await? {
            Some(d) => (d.metadata.annotations.as_ref())
                .and_then(|a| a.get(workload::ISOLATED_ANNOTATION))
                .is_some_and(|v| v == "true"),
            None => {
                let read = |kind: &str, e: kube::Error| {
                    let what = format!("reading {kind} {}/{}", req.namespace, req.name);
                    cro_kube::provider_error(what, &e)
                };
                let policy = (self.api::<NetworkPolicy>(req).get_opt(&req.name).await)
                    .map_err(|e| read("NetworkPolicy", e))?;
                let pvc = (self
                    .api::<PersistentVolumeClaim>(req)
                    .get_opt(&req.name)
                    .await)
                    .map_err(|e| read("PersistentVolumeClaim", e))?;
                pvc.is_none() || policy.is_some_and(|p| apply::is_ours(&p.metadata, &req.owner))
            }
        };
        Ok(isolated.then_some(&self.isolation))
    }

    /// The user the workload's pods run as (see [`workload::PodUser`]): an
    /// available Deployment's own (its pods start; nothing is read, so a
    /// restart over complete workloads reads no namespace), else its
    /// namespace's, read when the workload is made or does not start (one
    /// made as 999 before, refused by OpenShift, moves into the range).
    async fn pod_user(&self, req: &ResourceRequest) -> Result<workload::PodUser, ProviderError> {
        if let Some(d) = self.deployment(req).await?
            && available(&d)
        {
            return Ok(workload::PodUser::of_deployment(&d));
        }
        self.namespace_user(&req.namespace).await
    }

    /// The user pods of `namespace` run as (see [`workload::PodUser`]).
    async fn namespace_user(&self, namespace: &str) -> Result<workload::PodUser, ProviderError> {
        let ns = Api::<Namespace>::all(self.client.clone())
            .get(namespace)
            .await
            .map_err(|e| {
                let message = format!("reading Namespace {namespace}");
                cro_kube::provider_error(message, &e)
            })?;
        workload::PodUser::of_namespace(namespace, &ns.metadata.annotations.unwrap_or_default())
    }

    /// The layout of the CR's objects (what deleting it removes; a PVC in
    /// the way is left, as any object that is not its own).
    async fn layout(&self, req: &ResourceRequest) -> Result<Layout, ProviderError> {
        Ok(match self.observed_layout(req).await? {
            Observed::Laid(layout) => layout,
            Observed::InTheWay => Layout::Ours,
            Observed::Nothing => self.new_layout(req),
        })
    }

    /// The layout a new workload is made in: the Go operator's under
    /// `--go-compatible-resources`, for the kinds it ran in the cluster
    /// and not for a restore (it knows no `restoreFromSnapshot`).
    fn new_layout(&self, req: &ResourceRequest) -> Layout {
        let go_kind = matches!(req.kind, ResourceKind::Postgres | ResourceKind::Redis);
        match self.go_layout_for_new && go_kind && req.restore_from_snapshot.is_none() {
            true => Layout::GoOperator,
            false => Layout::Ours,
        }
    }

    /// The layout to make or plan the workload in. A PVC alone with nothing
    /// on it is the Go operator's data or a person's volume, and deleting
    /// the CR would delete it: a person says which.
    async fn layout_to_make(&self, req: &ResourceRequest) -> Result<Layout, ProviderError> {
        match self.observed_layout(req).await? {
            Observed::InTheWay => Err(ProviderError::permanent(format!(
                "PersistentVolumeClaim {ns}/{name} exists and was not made for {kind} {name}: the operator neither changes nor deletes it. If it holds this {kind}'s data from the Go operator (whose Deployment is gone), annotate it {key}={value} to take it over; otherwise rename or remove it, or give the {kind} another name",
                ns = req.namespace,
                name = req.name,
                kind = req.owner.kind,
                key = legacy::LAYOUT_ANNOTATION,
                value = legacy::GO_LAYOUT,
            ))),
            Observed::Laid(layout) => Ok(layout),
            Observed::Nothing => Ok(self.new_layout(req)),
        }
    }

    /// How the restore of a new workload from `restoreFromSnapshot`
    /// stands (see `snapshot`): `None` when there is none to wait for.
    async fn restore_into(
        &self,
        req: &ResourceRequest,
        desired: &workload::Desired,
        user: &workload::PodUser,
    ) -> Result<Option<snapshot::Restoring>, ProviderError> {
        let Some(id) = &req.restore_from_snapshot else {
            return Ok(None);
        };
        let image = desired.deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        self.restore(req, id, &desired.pvc, user, image).await
    }

    async fn postgres(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let overrides = strategy::parse(&req.strategy)?;
        let layout = self.layout_to_make(req).await?;
        let mut restoring = None;
        let (desired, creds, host) = match layout {
            Layout::Ours => {
                let creds =
                    credentials::ensure(&self.api::<Secret>(req), req, &overrides.secret_data)
                        .await?;
                let isolation = self.isolation(req).await?;
                let user = self.pod_user(req).await?;
                let image = &self.images.postgres;
                let desired = workload::postgres(req, &overrides, image, isolation, &user)?;
                restoring = self.restore_into(req, &desired, &user).await?;
                (desired, creds, self.host(req))
            }
            Layout::GoOperator => {
                let creds = credentials::adopt_go_postgres(&self.api::<Secret>(req), req).await?;
                let isolation = self.go_isolation(req, &overrides).await?;
                (legacy::postgres(req, isolation), creds, legacy::host(req))
            }
        };
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(req, &desired, layout).await?;
        // A failed restore is said at once; one under way once the
        // database runs (before, its Deployment's state says more).
        let outcome = match (outcome, restoring) {
            (_, Some(failed @ snapshot::Restoring::Failed(_))) => failed.outcome(),
            (Outcome::Ready(()), Some(restoring)) => restoring.outcome(),
            (outcome, _) => outcome,
        };
        let outcome = match outcome {
            Outcome::Ready(()) => Outcome::Ready(ConnectionDetails(BTreeMap::from([
                ("username".into(), creds.username),
                ("password".into(), creds.password),
                ("database".into(), creds.database),
                ("host".into(), host),
                ("port".into(), "5432".into()),
            ]))),
            Outcome::InProgress(r) => Outcome::InProgress(r),
            Outcome::Failed(r) => Outcome::Failed(r),
        };
        Ok(Provisioned {
            pending,
            identifier: restored(req, &outcome),
            ..provisioned("openshift-postgres-template", outcome, version)
        })
    }

    async fn redis(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let overrides = strategy::parse(&req.strategy)?;
        let layout = self.layout_to_make(req).await?;
        let (desired, host, password) = match layout {
            Layout::Ours => {
                let isolation = self.isolation(req).await?;
                let password = match workload::redis_password(&overrides, isolation) {
                    true => Some(
                        credentials::password(
                            &self.api::<Secret>(req),
                            req,
                            "redis",
                            &overrides.secret_data,
                        )
                        .await?,
                    ),
                    false => None,
                };
                let user = self.pod_user(req).await?;
                let image = &self.images.redis;
                let desired = workload::redis(req, &overrides, image, isolation, &user)?;
                // The backup is the data the server first starts with.
                if let Some(restoring) = self.restore_into(req, &desired, &user).await? {
                    let version = workload::image_tag(&desired.deployment);
                    return Ok(provisioned(
                        "openshift-redis-template",
                        restoring.outcome(),
                        version,
                    ));
                }
                (desired, self.host(req), password)
            }
            Layout::GoOperator => {
                credentials::ensure_go_redis_config(&self.api::<ConfigMap>(req)).await?;
                let isolation = self.go_isolation(req, &overrides).await?;
                (legacy::redis(req, isolation), legacy::host(req), None)
            }
        };
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(req, &desired, layout).await?;
        let outcome = match outcome {
            // The Go operator puts the host (not a URL) in `uri`.
            Outcome::Ready(()) => {
                let mut details = ConnectionDetails::of(&[("uri", &host), ("port", "6379")]);
                if let Some(password) = password {
                    details.0.insert("password".into(), password);
                }
                Outcome::Ready(details)
            }
            Outcome::InProgress(r) => Outcome::InProgress(r),
            Outcome::Failed(r) => Outcome::Failed(r),
        };
        Ok(Provisioned {
            pending,
            identifier: restored(req, &outcome),
            ..provisioned("openshift-redis-template", outcome, version)
        })
    }

    /// The Secrets and ConfigMaps a workload of `layout` owns besides its
    /// Deployment, Service and PVC.
    async fn owned_extras(
        &self,
        req: &ResourceRequest,
        layout: Layout,
    ) -> Result<(Vec<String>, Vec<String>), ProviderError> {
        let name = req.name.as_str();
        let postgres = req.kind == ResourceKind::Postgres;
        let store = matches!(req.kind, ResourceKind::BlobStorage | ResourceKind::Smtp);
        Ok(match layout {
            Layout::Ours if postgres || store => {
                (vec![workload::credentials_secret_name(name)], vec![])
            }
            // An isolated Redis's password.
            Layout::Ours => (
                vec![workload::credentials_secret_name(name)],
                vec![workload::config_map_name(name)],
            ),
            Layout::GoOperator if postgres => (vec![legacy::postgres_secret_name(name)], vec![]),
            // The shared redis-config goes with the namespace's last
            // Go-operator Redis.
            Layout::GoOperator => {
                let others = self
                    .api::<Deployment>(req)
                    .list(&Default::default())
                    .await
                    .map_err(|e| {
                        cro_kube::provider_error(
                            format!("listing Deployments in {}", req.namespace),
                            &e,
                        )
                    })?
                    .items
                    .into_iter()
                    .filter(|d| d.metadata.name.as_deref() != Some(name))
                    .any(|d| mounts_config_map(&d, legacy::REDIS_CONFIG_MAP));
                let cms = if others {
                    vec![]
                } else {
                    vec![legacy::REDIS_CONFIG_MAP.to_string()]
                };
                (vec![], cms)
            }
        })
    }
}

impl InClusterProvider {
    /// A BlobStorage or SMTPCredentialSet already `complete` with a
    /// placeholder Secret (the Go operator's, or made under a tier without
    /// a server) and no server yet: a person may have filled the Secret in
    /// with a bucket or relay of their own, which a server of its own would
    /// replace. It keeps the placeholder; a new CR gets the server.
    async fn keeps_placeholder(&self, req: &ResourceRequest) -> Result<bool, ProviderError> {
        Ok(req.options.complete_as_placeholder && self.deployment(req).await?.is_none())
    }

    /// A BlobStorage or SMTPCredentialSet with a placeholder Secret and no
    /// server: its tier gives it none, and none is left from a tier that
    /// did.
    async fn placeholder_only(&self, req: &ResourceRequest) -> Result<bool, ProviderError> {
        let serving = |o: strategy::Overrides| match req.kind {
            ResourceKind::BlobStorage => o.bucket,
            ResourceKind::Smtp => o.mail,
            ResourceKind::Postgres | ResourceKind::Redis => Serving::Own,
        };
        if strategy::parse(&req.strategy).is_ok_and(|o| serving(o) != Serving::Placeholder) {
            return Ok(false);
        }
        // A bucket made under an earlier tier, in the namespace's store.
        if req.kind == ResourceKind::BlobStorage
            && credentials::bucket_home(&self.api::<Secret>(req), req)
                .await?
                .is_some()
        {
            return Ok(false);
        }
        Ok(self.deployment(req).await?.is_none())
    }
}

fn mounts_config_map(d: &Deployment, name: &str) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .is_some_and(|p| {
            p.volumes
                .iter()
                .flatten()
                .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == name))
        })
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

/// A database restored from `restoreFromSnapshot` and ready records its
/// identifier on the CR: the snapshot is then no longer looked up (it may
/// be deleted), as for a cloud database once it exists.
fn restored(req: &ResourceRequest, outcome: &Outcome<ConnectionDetails>) -> Option<String> {
    let ready = matches!(outcome, Outcome::Ready(_));
    (ready && req.restore_from_snapshot.is_some()).then(|| req.identifier.clone())
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

/// A key of an in-cluster tier that only a tier in the operator namespace
/// may set: a relay's login, read from a Secret there.
pub fn operator_only_key(strategy: &serde_json::Value) -> Option<String> {
    relay::operator_only_key(strategy)
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
    let probe = ResourceRequest::offline(kind, strategy.clone());
    let isolated = Some(&workload::Isolation::default());
    let user = &workload::PodUser::Image;
    match kind {
        ResourceKind::Postgres => {
            workload::postgres(&probe, &overrides, DEFAULT_POSTGRES_IMAGE, isolated, user).map(drop)
        }
        ResourceKind::Redis => {
            workload::redis(&probe, &overrides, DEFAULT_REDIS_IMAGE, isolated, user).map(drop)
        }
        ResourceKind::BlobStorage if overrides.bucket == Serving::Placeholder => Ok(()),
        ResourceKind::BlobStorage => {
            let image = DEFAULT_OBJECT_STORE_IMAGE;
            workload::object_store(&probe, &overrides, image, isolated, user).map(drop)
        }
        ResourceKind::Smtp if overrides.mail == Serving::Placeholder => Ok(()),
        ResourceKind::Smtp => {
            let image = DEFAULT_MAIL_SERVER_IMAGE;
            workload::mail_server(&probe, &overrides, image, isolated, user, None).map(drop)
        }
    }
}

#[async_trait::async_trait]
impl Provider for InClusterProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        match req.kind {
            ResourceKind::Postgres => self.postgres(req).await,
            ResourceKind::Redis => self.redis(req).await,
            ResourceKind::BlobStorage => self.blob_storage(req).await,
            ResourceKind::Smtp => self.smtp(req).await,
        }
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        if self.placeholder_only(req).await? {
            return Ok(Deletion::Done);
        }
        if self.in_namespace_store(req).await? {
            return self.delete_from_namespace_store(req).await;
        }
        if let Some(kept) = self.bucket_kept(req).await? {
            return Ok(Deletion::Keep(kept));
        }
        let name = req.name.as_str();
        let layout = self.layout(req).await?;
        let (secrets, config_maps) = self.owned_extras(req, layout).await?;
        // Objects in the CR's namespace that are not its own (a person's
        // Service of the same name) are left alone.
        let (owner, adopted) = (&req.owner, layout == Layout::GoOperator);
        // Deployment first, so the PVC's pod goes and the PVC can follow.
        let mut left = Vec::new();
        if !apply::delete(&self.api::<Deployment>(req), name, owner, adopted).await? {
            left.push(format!("Deployment {name}"));
        }
        if !apply::delete(&self.api::<Service>(req), name, owner, adopted).await? {
            left.push(format!("Service {name}"));
        }
        // Only ever this operator's: the Go operator made none.
        if !apply::delete(&self.api::<NetworkPolicy>(req), name, owner, false).await? {
            left.push(format!("NetworkPolicy {name}"));
        }
        if !apply::delete(
            &self.api::<PersistentVolumeClaim>(req),
            name,
            owner,
            adopted,
        )
        .await?
        {
            left.push(format!("PersistentVolumeClaim {name}"));
        }
        for secret in secrets {
            if !apply::delete(&self.api::<Secret>(req), &secret, owner, adopted).await? {
                left.push(format!("Secret {secret}"));
            }
        }
        for cm in config_maps {
            if !apply::delete(&self.api::<ConfigMap>(req), &cm, owner, adopted).await? {
                left.push(format!("ConfigMap {cm}"));
            }
        }
        Ok(if left.is_empty() {
            Deletion::Done
        } else {
            Deletion::InProgress(format!("waiting for {} to be deleted", left.join(", ")))
        })
    }

    async fn plan(&self, req: &ResourceRequest) -> Result<Vec<Change>, ProviderError> {
        if matches!(req.kind, ResourceKind::BlobStorage | ResourceKind::Smtp)
            && self.keeps_placeholder(req).await?
        {
            return Ok(Vec::new());
        }
        let overrides = strategy::parse(&req.strategy)?;
        if req.kind == ResourceKind::BlobStorage && overrides.bucket == Serving::Namespace {
            let store = self.namespace_store(req).await?;
            let desired = self.namespace_store_workload(&store).await?;
            return self.drift(&store, &desired, Layout::Ours).await;
        }
        let layout = self.layout_to_make(req).await?;
        let (isolation, user) = match (req.kind, layout) {
            (_, Layout::Ours) => (self.isolation(req).await?, self.pod_user(req).await?),
            _ => (
                self.go_isolation(req, &overrides).await?,
                workload::PodUser::Image,
            ),
        };
        let desired = match (req.kind, layout) {
            (ResourceKind::Postgres, Layout::Ours) => {
                workload::postgres(req, &overrides, &self.images.postgres, isolation, &user)?
            }
            (ResourceKind::Redis, Layout::Ours) => {
                workload::redis(req, &overrides, &self.images.redis, isolation, &user)?
            }
            (ResourceKind::BlobStorage, _) if overrides.bucket == Serving::Placeholder => {
                return Ok(Vec::new());
            }
            (ResourceKind::Smtp, _) if overrides.mail == Serving::Placeholder => {
                return Ok(Vec::new());
            }
            (ResourceKind::Smtp, _) => {
                let image = &self.images.mail_server;
                let login = self.relay_login(&overrides).await?;
                workload::mail_server(req, &overrides, image, isolation, &user, login.as_ref())?
            }
            (ResourceKind::BlobStorage, _) => {
                let image = &self.images.object_store;
                workload::object_store(req, &overrides, image, isolation, &user)?
            }
            (ResourceKind::Postgres, Layout::GoOperator) => legacy::postgres(req, isolation),
            (ResourceKind::Redis, Layout::GoOperator) => legacy::redis(req, isolation),
        };
        self.drift(req, &desired, layout).await
    }

    /// The generated passwords stay what the workloads were initialised
    /// with.
    fn rotates_credentials(&self) -> bool {
        false
    }

    async fn snapshot(&self, req: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        self.take_snapshot(req).await
    }

    async fn delete_snapshot(&self, req: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        self.remove_snapshot(req).await
    }
}
