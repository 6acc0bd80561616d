//! In-cluster snapshots. A PostgresSnapshot or RedisSnapshot of an
//! in-cluster database is a dump (`pg_dump --format=custom`, or the RDB
//! that `redis-cli --rdb` fetches, both consistent) that a Job running the
//! database's own image writes to a PVC of its own, named by the snapshot's
//! identifier. The Job keeps the dump only once it reads back
//! (`pg_restore --list`, `redis-check-rdb`), so `complete` means a readable
//! backup. The PVC has no owner: it outlives the database, and the snapshot
//! CR too under `skipDelete`; deleting the CR otherwise deletes it.
//!
//! `restoreFromSnapshot` fills a new database from it: Redis before its
//! server first starts (the RDB becomes its data), Postgres once it runs
//! (`pg_restore` in one transaction). Either Job is only made while the
//! database's Deployment does not exist yet, and leaves data it finds in
//! place: a restore never writes over a database that already served.

use std::collections::BTreeMap;

use cro_provider_api::{
    Deletion, MANAGED_BY, MANAGED_BY_LABEL, Outcome, Owner, ProviderError, ResourceKind,
    ResourceRequest, SnapshotRequest, Snapshotted, shorten,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    batch::v1::Job,
    core::v1::{PersistentVolumeClaim, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy},
};
use serde_json::{Value, json};

use crate::{InClusterProvider, workload};

/// On a backup's PVC and Job: the snapshot identifier it holds.
pub const SNAPSHOT_LABEL: &str = "cro.integreatly.org/snapshot";

/// Where a Job mounts the backup.
const BACKUP: &str = "/backup";

/// A Job that does not succeed in three tries has failed for a reason a
/// person must read.
const TRIES: i32 = 3;

/// A dump of a large database takes long; one that hangs is stopped.
const DEADLINE_SECONDS: i64 = 6 * 3600;

/// The name of the PVC and Job of the snapshot `id`: a DNS label (the
/// identifier is one already unless it is the Go operator's).
pub fn object_name(id: &str) -> String {
    let label = !id.is_empty()
        && id.len() <= 63
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-')
        && !id.ends_with('-');
    match label {
        true => id.to_string(),
        false => shorten(id, 63),
    }
}

/// The Job that restores into the database `name`.
pub fn restore_job_name(name: &str) -> String {
    object_name(&format!("{}-restore", shorten(name, 50)))
}

/// The file a backup keeps, and how it is taken and checked.
fn dump_file(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::Redis => "dump.rdb",
        _ => "postgres.dump",
    }
}

fn backup_script(kind: ResourceKind) -> String {
    let file = format!("{BACKUP}/{}", dump_file(kind));
    let (take, check) = match kind {
        ResourceKind::Redis => (
            format!("redis-cli -h \"$DATABASE_HOST\" -p 6379 --rdb {file}.partial"),
            format!("redis-check-rdb {file}.partial"),
        ),
        _ => (
            format!("pg_dump -h \"$DATABASE_HOST\" --format=custom --file={file}.partial"),
            format!("pg_restore --list {file}.partial >/dev/null"),
        ),
    };
    format!(
        "set -e\n{take}\n{check}\nmv {file}.partial {file}\necho \"backup {file} taken and read back\"\n"
    )
}

/// Fills a new Redis's data volume with the backup before its server
/// first starts: `appendonly.aof` (an AOF may begin with an RDB; Redis 7
/// turns the file into its first base) for the default `appendonly yes`,
/// `dump.rdb` for a tier that turns it off. A volume that holds data
/// already is left as it is.
fn redis_restore_script() -> String {
    let file = format!("{BACKUP}/{}", dump_file(ResourceKind::Redis));
    format!(
        "set -e\nif [ -e /data/appendonlydir ] || [ -e /data/appendonly.aof ] || [ -e /data/dump.rdb ]; then echo 'the volume holds data already: left as it is, not restored over'; exit 0; fi\ncp {file} /data/dump.rdb.partial\ncp /data/dump.rdb.partial /data/appendonly.aof\nmv /data/dump.rdb.partial /data/dump.rdb\necho 'restored'\n"
    )
}

/// Restores into a new Postgres once it answers, in one transaction; a
/// database that holds tables already is left as it is.
fn postgres_restore_script() -> String {
    let file = format!("{BACKUP}/{}", dump_file(ResourceKind::Postgres));
    format!(
        "set -e\nuntil pg_isready -h \"$DATABASE_HOST\" -q; do sleep 2; done\ntables=$(psql -h \"$DATABASE_HOST\" -tAc \"SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r','p','v','m','S','f') AND n.nspname NOT IN ('pg_catalog','information_schema') AND n.nspname NOT LIKE 'pg_toast%'\")\nif [ \"$tables\" != 0 ]; then echo 'the database holds tables already: left as it is, not restored over'; exit 0; fi\npg_restore --no-owner --no-privileges --file=- {file} | psql -h \"$DATABASE_HOST\" -q -v ON_ERROR_STOP=1 --single-transaction >/dev/null\necho 'restored'\n"
    )
}

/// Whose layout a database's objects are in, for the Jobs that read it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Ours,
    /// The Go operator's (`legacy`): its login in
    /// `<name>-postgres-credentials` (`user`, `password`, `database`), a
    /// Redis without a password.
    Go,
}

/// The environment a Job reaches the database `name` with: its host and
/// the login from its credentials Secret.
fn database_env(kind: ResourceKind, name: &str, host: &str, layout: Layout) -> Value {
    let (secret, user) = match layout {
        Layout::Ours => (workload::credentials_secret_name(name), "username"),
        Layout::Go => (crate::legacy::postgres_secret_name(name), "user"),
    };
    let from = |var: &str, key: &str, optional: bool| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": optional}}});
    let host = json!({"name": "DATABASE_HOST", "value": host});
    match (kind, layout) {
        // Only an isolated Redis of this operator's has a password.
        (ResourceKind::Redis, Layout::Ours) => {
            json!([host, from("REDISCLI_AUTH", "password", true)])
        }
        (ResourceKind::Redis, Layout::Go) => json!([host]),
        _ => json!([
            host,
            from("PGUSER", user, false),
            from("PGPASSWORD", "password", false),
            from("PGDATABASE", "database", false),
        ]),
    }
}

/// What a Job is for, beyond its script.
struct JobSpec<'a> {
    name: String,
    namespace: &'a str,
    app: &'static str,
    instance: &'a str,
    snapshot: &'a str,
    owner: &'a Owner,
    image: &'a str,
    script: String,
    env: Value,
    user: &'a workload::PodUser,
    /// The backup's PVC, and the database's own data PVC when the Job
    /// writes to it (a Redis restore).
    backup: String,
    data: Option<&'a str>,
}

fn labels(app: &str, instance: &str, snapshot: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.into(), MANAGED_BY.into()),
        ("app.kubernetes.io/name".into(), app.into()),
        ("app.kubernetes.io/instance".into(), instance.into()),
        (SNAPSHOT_LABEL.into(), snapshot.into()),
    ])
}

/// One pod, run as the database's pods are (Pod Security "restricted"),
/// without a service account token; its log's end is its termination
/// message, which a failure names.
fn job(spec: JobSpec<'_>) -> Value {
    let labels = labels(spec.app, spec.instance, spec.snapshot);
    let mut mounts = vec![json!({"name": "backup", "mountPath": BACKUP})];
    let mut volumes =
        vec![json!({"name": "backup", "persistentVolumeClaim": {"claimName": spec.backup}})];
    if let Some(data) = spec.data {
        mounts.push(json!({"name": "data", "mountPath": "/data"}));
        volumes.push(json!({"name": "data", "persistentVolumeClaim": {"claimName": data}}));
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": labels,
            "ownerReferences": [spec.owner.controller_reference()],
        },
        "spec": {
            "backoffLimit": TRIES - 1,
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "securityContext": spec.user.security_context(),
                    "containers": [{
                        "name": spec.app,
                        "image": spec.image,
                        // The database's image is on its node already; an
                        // untagged name (the Go operator's) would
                        // otherwise be pulled every time.
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", spec.script],
                        "env": spec.env,
                        "volumeMounts": mounts,
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                    }],
                    "volumes": volumes,
                }
            }
        }
    })
}

/// The backup's volume: as large as the database's and of its class
/// (a dump is smaller than the files it comes from).
fn backup_pvc(req: &SnapshotRequest, app: &str, data: Option<&PersistentVolumeClaim>) -> Value {
    let spec = data.and_then(|d| d.spec.as_ref());
    let size = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map_or_else(|| "1Gi".to_string(), |q| q.0.clone());
    let mut pvc_spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    });
    if let Some(class) = spec.and_then(|s| s.storage_class_name.as_ref()) {
        pvc_spec["storageClassName"] = json!(class);
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": object_name(&req.identifier),
            "namespace": req.namespace,
            "labels": labels(app, &req.resource_name, &object_name(&req.identifier)),
            "annotations": {"cro.integreatly.org/snapshot-of": format!("{}/{}", req.kind.cr_kind(), req.resource_name)},
        },
        "spec": pvc_spec,
    })
}

/// A restore not done yet.
#[derive(Debug, PartialEq, Eq)]
pub enum Restoring {
    InProgress(String),
    /// Why, and what a person does.
    Failed(String),
}

impl Restoring {
    /// What the CR says while it lasts.
    pub fn outcome<T>(self) -> Outcome<T> {
        match self {
            Restoring::InProgress(why) => Outcome::InProgress(why),
            Restoring::Failed(why) => Outcome::Failed(why),
        }
    }
}

/// Where a Job stands.
#[derive(Debug, PartialEq, Eq)]
pub enum JobState {
    Running,
    Succeeded,
    /// Why, in the words of its last pod's log.
    Failed(String),
}

fn job_state(job: &Job, pods: &[Pod]) -> JobState {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.clone());
    let holds = |kind: &str| {
        conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    if holds("Complete") {
        return JobState::Succeeded;
    }
    if !holds("Failed") {
        return JobState::Running;
    }
    let mut last: Vec<&Pod> = pods.iter().collect();
    last.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let said = last
        .last()
        .and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first())
        .and_then(|s| s.state.as_ref()?.terminated.as_ref()?.message.clone())
        .unwrap_or_default();
    let said: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = said[said.len().saturating_sub(3)..].join(" / ");
    let why = (job.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Failed"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    JobState::Failed(match tail.is_empty() {
        true => why,
        false => format!("{why}: {}", tail.chars().take(400).collect::<String>()),
    })
}

fn read_error(what: &str, namespace: &str, name: &str, e: &kube::Error) -> ProviderError {
    cro_kube::provider_error(format!("{what} {namespace}/{name}"), e)
}

/// The object `name` in `namespace`, if it exists.
async fn look<K>(api: &Api<K>, namespace: &str, name: &str) -> Result<Option<K>, ProviderError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    (api.get_opt(name).await)
        .map_err(|e| read_error(&format!("reading {}", K::kind(&())), namespace, name, &e))
}

impl InClusterProvider {
    /// Takes (or follows) the backup of `req`'s database.
    pub(crate) async fn take_snapshot(
        &self,
        req: &SnapshotRequest,
    ) -> Result<Snapshotted, ProviderError> {
        let ns = req.namespace.as_str();
        let name = object_name(&req.identifier);
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns);
        let pvc = look(&pvcs, ns, &name).await?;
        match &pvc {
            Some(p) if !holds_backup(p, &name) => {
                return Ok(failed(format!(
                    "PersistentVolumeClaim {ns}/{name} exists and was not made for this snapshot's backup: the operator neither changes nor deletes it; rename or remove it"
                )));
            }
            // Taken before; its Job may be gone (deleted by hand).
            Some(p) if annotated(p, TAKEN_ANNOTATION) => return Ok(ready(req)),
            _ => {}
        }
        let jobs = Api::<Job>::namespaced(self.client.clone(), ns);
        let job = match look(&jobs, ns, &name).await? {
            Some(job) if !controlled_by(&job, &req.owner) => {
                return Ok(Snapshotted {
                    outcome: Outcome::InProgress(someone_elses(ns, &name)),
                });
            }
            Some(job) => job,
            None => match self.backup_job(req, &name).await? {
                Some(job) => job,
                None => {
                    return Ok(failed(format!(
                        "{} {ns}/{} has no Deployment: there is no database to back up. Delete this snapshot; take another once the database runs",
                        req.kind.cr_kind(),
                        req.resource_name
                    )));
                }
            },
        };
        Ok(match self.job_state(ns, &job).await? {
            JobState::Running => Snapshotted {
                outcome: Outcome::InProgress(format!(
                    "Job {ns}/{name} is writing the backup to PersistentVolumeClaim {name}"
                )),
            },
            JobState::Succeeded => {
                // Said on the PVC, which outlives the Job.
                let patch = json!({"metadata": {"annotations": {TAKEN_ANNOTATION: "true"}}});
                (pvcs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await)
                    .map_err(|e| read_error("annotating PersistentVolumeClaim", ns, &name, &e))?;
                ready(req)
            }
            JobState::Failed(why) => failed(format!(
                "Job {ns}/{name} did not take the backup: {why}. Delete this snapshot and take another once the cause is fixed"
            )),
        })
    }

    /// Makes the backup's PVC and the Job that fills it, running the
    /// database's own image (its client matches its server); `None` when
    /// the database has no Deployment.
    async fn backup_job(
        &self,
        req: &SnapshotRequest,
        name: &str,
    ) -> Result<Option<Job>, ProviderError> {
        let ns = req.namespace.as_str();
        let parent = req.resource_name.as_str();
        let deployments = Api::<Deployment>::namespaced(self.client.clone(), ns);
        let Some(deployment) = look(&deployments, ns, parent).await? else {
            return Ok(None);
        };
        // The Go operator's pods run as their image's user or as OpenShift
        // assigns; the Job as the namespace's range says, else as ours.
        let (layout, user) = match crate::legacy::is_go_deployment(&deployment, parent) {
            true => (Layout::Go, self.namespace_user(ns).await?),
            false => (Layout::Ours, workload::PodUser::of_deployment(&deployment)),
        };
        let image = (deployment.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns);
        let data = look(&pvcs, ns, parent).await?;
        let app = match req.kind {
            ResourceKind::Redis => "redis-snapshot",
            _ => "postgres-snapshot",
        };
        create(&pvcs, &backup_pvc(req, app, data.as_ref())).await?;
        let host = self.service_host(parent, ns);
        let job = job(JobSpec {
            name: name.to_string(),
            namespace: ns,
            app,
            instance: parent,
            snapshot: name,
            owner: &req.owner,
            image: &image,
            script: backup_script(req.kind),
            env: database_env(req.kind, parent, &host, layout),
            user: &user,
            backup: name.to_string(),
            data: None,
        });
        let jobs = Api::<Job>::namespaced(self.client.clone(), ns);
        Ok(Some(create(&jobs, &job).await?))
    }

    async fn job_state(&self, ns: &str, job: &Job) -> Result<JobState, ProviderError> {
        let name = job.metadata.name.clone().unwrap_or_default();
        let pods = match job.status.as_ref().and_then(|s| s.failed).unwrap_or(0) {
            0 => Vec::new(),
            _ => {
                Api::<Pod>::namespaced(self.client.clone(), ns)
                    .list(
                        &ListParams::default()
                            .labels(&format!("batch.kubernetes.io/job-name={name}")),
                    )
                    .await
                    .map_err(|e| read_error("listing the pods of Job", ns, &name, &e))?
                    .items
            }
        };
        Ok(job_state(job, &pods))
    }

    /// Deletes the backup's Job and PVC; done once the PVC is gone.
    pub(crate) async fn remove_snapshot(
        &self,
        req: &SnapshotRequest,
    ) -> Result<Deletion, ProviderError> {
        let ns = req.namespace.as_str();
        let name = object_name(&req.identifier);
        let jobs = Api::<Job>::namespaced(self.client.clone(), ns);
        if let Some(job) = look(&jobs, ns, &name)
            .await?
            .filter(|j| controlled_by(j, &req.owner))
            && job.metadata.deletion_timestamp.is_none()
        {
            delete(&jobs, &name, &background()).await?;
        }
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns);
        let Some(pvc) = look(&pvcs, ns, &name).await? else {
            return Ok(Deletion::Done);
        };
        if !holds_backup(&pvc, &name) {
            // Someone else's volume of that name: not ours to delete.
            return Ok(Deletion::Done);
        }
        if pvc.metadata.deletion_timestamp.is_none() {
            delete(&pvcs, &name, &background()).await?;
        }
        Ok(Deletion::InProgress(format!(
            "waiting for PersistentVolumeClaim {ns}/{name}, the backup, to be deleted"
        )))
    }

    /// The restore of a new database from the backup `id`: `None` once
    /// there is nothing (more) to wait for, else how it stands.
    /// A Job is only made while the Deployment does not exist; a Redis is
    /// restored before its Deployment is made, a Postgres once it runs.
    pub(crate) async fn restore(
        &self,
        req: &ResourceRequest,
        id: &str,
        data_pvc: &Value,
        user: &workload::PodUser,
        image: &str,
    ) -> Result<Option<Restoring>, ProviderError> {
        let ns = req.namespace.as_str();
        let name = restore_job_name(&req.name);
        let jobs = Api::<Job>::namespaced(self.client.clone(), ns);
        let job = match look(&jobs, ns, &name).await? {
            Some(job) if !controlled_by(&job, &req.owner) => {
                return Ok(Some(Restoring::InProgress(someone_elses(ns, &name))));
            }
            Some(job) => job,
            None if self.deployment(req).await?.is_some() => return Ok(None),
            None => self.start_restore(req, id, data_pvc, user, image).await?,
        };
        Ok(match self.job_state(ns, &job).await? {
            JobState::Running => Some(Restoring::InProgress(format!(
                "Job {ns}/{name} is restoring snapshot {id} (spec.restoreFromSnapshot)"
            ))),
            JobState::Succeeded => {
                delete(&jobs, &name, &background()).await?;
                None
            }
            JobState::Failed(why) => Some(Restoring::Failed(format!(
                "Job {ns}/{name} did not restore snapshot {id}: {why}. Delete this {} and create it again once the cause is fixed",
                req.kind.cr_kind()
            ))),
        })
    }

    /// Makes the Job that restores backup `id` into `req`'s new database
    /// (and for a Redis, the volume it fills first).
    async fn start_restore(
        &self,
        req: &ResourceRequest,
        id: &str,
        data_pvc: &Value,
        user: &workload::PodUser,
        image: &str,
    ) -> Result<Job, ProviderError> {
        let ns = req.namespace.as_str();
        let backup = object_name(id);
        let name = restore_job_name(&req.name);
        let jobs = Api::<Job>::namespaced(self.client.clone(), ns);
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns);
        let found = look(&pvcs, ns, &backup).await?;
        if !found.is_some_and(|p| holds_backup(&p, &backup)) {
            return Err(ProviderError::permanent(format!(
                "spec.restoreFromSnapshot: snapshot {id} has no in-cluster backup in namespace {ns} (PersistentVolumeClaim {backup} is missing); restore from a snapshot of an in-cluster {kind}, or remove spec.restoreFromSnapshot",
                kind = req.kind.cr_kind(),
            )));
        }
        let (app, data) = match req.kind {
            ResourceKind::Redis => {
                // The data volume exists before the Job fills it.
                let claims = self.api::<PersistentVolumeClaim>(req);
                crate::apply::ensure(&claims, data_pvc, &req.owner, &self.corrections).await?;
                ("redis-restore", Some(req.name.as_str()))
            }
            _ => ("postgres-restore", None),
        };
        let script = match req.kind {
            ResourceKind::Redis => redis_restore_script(),
            _ => postgres_restore_script(),
        };
        let job = job(JobSpec {
            name: name.clone(),
            namespace: ns,
            app,
            instance: &req.name,
            snapshot: &backup,
            owner: &req.owner,
            image,
            script,
            env: database_env(req.kind, &req.name, &self.host(req), Layout::Ours),
            user,
            backup: backup.clone(),
            data,
        });
        create(&jobs, &job).await
    }
}

/// On a backup's PVC once its Job succeeded.
const TAKEN_ANNOTATION: &str = "cro.integreatly.org/backup-taken";

fn labelled(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, name: &str) -> bool {
    let labels = meta.labels.as_ref();
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY)
        && labels
            .and_then(|l| l.get(SNAPSHOT_LABEL))
            .is_some_and(|v| v == name)
}

/// Whether `job` is the one made for `owner` (the snapshot, or the
/// database restored): a Job of that name that is not (an earlier CR's,
/// its garbage collection pending, or anyone else's) is neither followed
/// nor deleted.
fn controlled_by(job: &Job, owner: &Owner) -> bool {
    (job.metadata.owner_references.iter().flatten()).any(|r| r.uid == owner.uid)
}

/// What a CR says while a Job not made for it holds its Job's name.
fn someone_elses(ns: &str, name: &str) -> String {
    format!(
        "Job {ns}/{name} exists and was not made for this CR (an earlier CR's, waiting for garbage collection, or someone else's): waiting for it to go; the operator neither follows nor deletes it, so delete it if it stays"
    )
}

fn holds_backup(pvc: &PersistentVolumeClaim, name: &str) -> bool {
    labelled(&pvc.metadata, name)
}

fn annotated(pvc: &PersistentVolumeClaim, key: &str) -> bool {
    (pvc.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(key))
}

fn ready(req: &SnapshotRequest) -> Snapshotted {
    Snapshotted {
        outcome: Outcome::Ready(req.identifier.clone()),
    }
}

fn failed(message: String) -> Snapshotted {
    Snapshotted {
        outcome: Outcome::Failed(message),
    }
}

/// Creates `object`, or reads it when an earlier try made it (its answer
/// lost): a look answers "already exists".
async fn create<K>(api: &Api<K>, object: &Value) -> Result<K, ProviderError>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let kind = K::kind(&());
    let typed: K = serde_json::from_value(object.clone()).map_err(|e| {
        ProviderError::permanent(format!("building {kind} {ns}/{name}: {e} (a bug)"))
    })?;
    match api.create(&PostParams::default(), &typed).await {
        Ok(made) => Ok(made),
        Err(kube::Error::Api(s)) if s.code == 409 => look(api, ns, name).await?.ok_or_else(|| {
            ProviderError::transient(format!("{kind} {ns}/{name} exists and is gone again"))
        }),
        Err(e) => Err(read_error(&format!("creating {kind}"), ns, name, &e)),
    }
}

/// A deletion whose dependents (a Job's pods) follow.
fn background() -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    }
}

async fn delete<K>(api: &Api<K>, name: &str, params: &DeleteParams) -> Result<(), ProviderError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(cro_kube::provider_error(
            format!("deleting {} {name}", K::kind(&())),
            &e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_identifier_names_its_objects_as_it_is() {
        let id = "c1-ns-snap-2026-12-01-0130-abcdefgh";
        assert_eq!(object_name(id), id);
        let long = format!("{}-x", "a".repeat(70));
        let named = object_name(&long);
        assert!(
            named.len() <= 63 && named.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{named}"
        );
        assert_ne!(object_name(&format!("{}-y", "a".repeat(70))), named);
        assert!(restore_job_name(&"d".repeat(200)).len() <= 63);
    }

    #[test]
    fn a_backup_is_kept_only_once_it_reads_back() {
        let pg = backup_script(ResourceKind::Postgres);
        let check = pg.find("pg_restore --list").expect("checked");
        assert!(check < pg.find("mv ").expect("moved into place"), "{pg}");
        let redis = backup_script(ResourceKind::Redis);
        let check = redis.find("redis-check-rdb").expect("checked");
        assert!(
            check < redis.find("mv ").expect("moved into place"),
            "{redis}"
        );
        assert!(pg.starts_with("set -e") && redis.starts_with("set -e"));
    }

    #[test]
    fn a_restore_never_writes_over_data() {
        let redis = redis_restore_script();
        let guard = redis.find("exit 0").expect("a guard");
        assert!(guard < redis.find("cp ").expect("a copy"), "{redis}");
        let pg = postgres_restore_script();
        assert!(pg.find("exit 0").expect("a guard") < pg.find("pg_restore").expect("a restore"));
        assert!(pg.contains("--single-transaction") && pg.contains("ON_ERROR_STOP=1"));
    }

    #[test]
    fn a_job_runs_restricted_without_a_token_and_says_why_it_failed() {
        let owner = Owner {
            api_version: "integreatly.org/v1alpha1".into(),
            kind: "PostgresSnapshot".into(),
            name: "s".into(),
            uid: "u".into(),
        };
        let job = job(JobSpec {
            name: "n".into(),
            namespace: "ns",
            app: "postgres-snapshot",
            instance: "db",
            snapshot: "n",
            owner: &owner,
            image: "postgres:17",
            script: backup_script(ResourceKind::Postgres),
            env: database_env(ResourceKind::Postgres, "db", "db.ns.svc", Layout::Ours),
            user: &workload::PodUser::Image,
            backup: "n".into(),
            data: None,
        });
        let typed: Job = serde_json::from_value(job.clone()).expect("a Job");
        let pod = typed.spec.and_then(|s| s.template.spec).expect("a pod");
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(
            pod.security_context.and_then(|s| s.run_as_non_root),
            Some(true)
        );
        let c = &pod.containers[0];
        assert_eq!(
            c.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        let env = serde_json::to_string(&c.env).unwrap_or_default();
        assert!(
            env.contains("db-credentials") && !env.contains("\"value\":\"pass"),
            "{env}"
        );
    }

    #[test]
    fn only_the_job_made_for_the_cr_is_followed() {
        let owner = |uid: &str| Owner {
            api_version: "integreatly.org/v1alpha1".into(),
            kind: "PostgresSnapshot".into(),
            name: "s".into(),
            uid: uid.into(),
        };
        let made = |meta: Value| -> Job {
            serde_json::from_value(json!({"metadata": meta})).expect("a Job")
        };
        let ours =
            made(json!({"name": "j", "ownerReferences": [owner("u1").controller_reference()]}));
        assert!(controlled_by(&ours, &owner("u1")));
        // An earlier CR of the same name, or a Job someone labelled alike.
        assert!(!controlled_by(&ours, &owner("u2")));
        let labelled_alike =
            made(json!({"name": "j", "labels": labels("postgres-snapshot", "db", "j")}));
        assert!(!controlled_by(&labelled_alike, &owner("u1")));
    }

    #[test]
    fn a_failed_job_is_named_with_the_end_of_its_log() {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "j"},
            "status": {"failed": 3, "conditions": [{"type": "Failed", "status": "True", "message": "Job has reached the specified backoff limit"}]}
        }))
        .expect("a Job");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "j-1", "creationTimestamp": "2026-12-01T00:00:00Z"},
            "status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "message": "one\ntwo\npg_dump: error: connection refused\n"}}}]}
        }))
        .expect("a Pod");
        let JobState::Failed(why) = job_state(&job, &[pod]) else {
            panic!("failed");
        };
        assert!(
            why.starts_with("Job has reached the specified backoff limit: ")
                && why.ends_with("connection refused"),
            "{why}"
        );
        let running: Job =
            serde_json::from_value(json!({"metadata": {"name": "j"}, "status": {"active": 1}}))
                .expect("a Job");
        assert_eq!(job_state(&running, &[]), JobState::Running);
    }
}
