//! Watch-backed caches. Each kind of object the operator reads on every
//! reconcile (configuration ConfigMaps, its own output Secrets) is watched
//! once, and that one watch both triggers the controllers and answers the
//! reconciles' reads: a restart over N complete CRs costs a list and a watch
//! per kind, not N GETs.
//!
//! Sharing one watch between several controllers needs kube's
//! `unstable-runtime` feature (`Controller::owns_shared_stream`, pinned by
//! the lock file); without it each of the four resource controllers would
//! list and hold every Secret again.

use std::{
    collections::HashMap,
    fmt::Debug,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cro_provider_api::MANAGED_BY_LABEL;
use futures::{StreamExt, channel::mpsc};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store, store::Writer},
        watcher,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use tracing::{debug, warn};

/// Events a slow subscriber may lag behind before the watch waits for it.
const SUBSCRIBER_BUFFER: usize = 1024;

/// How long a read waits for the first list before it fails (the usual
/// cause is RBAC that does not allow listing the kind).
const READY_LIMIT: Duration = Duration::from_secs(30);

/// The largest object (as JSON) an owned-object watch holds whole: far
/// more than anything the operator writes (connection details, a
/// Deployment and its configuration). Anyone who may create Secrets or
/// ConfigMaps can give them the label those watches select; a larger object is held as a stub (see [`stub`]), and reads of
/// it go to the API server, so the cache's memory stays bounded by what the
/// operator writes, not by what others label.
pub const OWNED_OBJECT_LIMIT: usize = 64 * 1024;

/// Marks a stub: the object's size, in bytes as JSON.
pub const STUB_ANNOTATION: &str = "cro.integreatly.org/cached-as-stub";

/// Owner references a stub keeps (enough to wake the CR it belongs to).
const STUB_OWNER_REFERENCES: usize = 4;

/// How long this process's own write stands in for the watch's copy. The
/// watch shows a write within moments; the limit only bounds the harm of
/// a write remembered after the watch already showed it deleted.
const WRITTEN_LIMIT: Duration = Duration::from_secs(60);

/// What a watch-backed cache holds: a kind the API serves, kept as
/// deserialized (stubs are made of `Default` and sized as JSON).
pub trait Cached:
    Resource<DynamicType = ()>
    + Clone
    + Debug
    + Default
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()>
        + Clone
        + Debug
        + Default
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// One watch of `K` (in one namespace, or all), shared by its subscribers
/// and by reads. Objects are held without their managed fields.
pub struct Shared<K: Resource<DynamicType = ()> + Clone + 'static> {
    namespace: Option<String>,
    reader: Store<K>,
    watch: Mutex<Option<Unstarted<K>>>,
    /// Subscribers told of deletions (kube's shared stream passes on only
    /// objects that exist).
    deleted: Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>,
    /// This process's last write of each object (see [`OwnWrite`]).
    own: Arc<Mutex<HashMap<ObjectRef<K>, OwnWrite<K>>>>,
    /// Objects larger than this (as JSON) are held as stubs.
    limit: Option<usize>,
}

/// This process's last write of an object. Until the watch shows it,
/// reads answer with what the write answered (a reconcile that follows its
/// own write reads it from here, not from the API server, and never an
/// older copy); the watch's echo of it wakes no subscriber (the write's
/// own reconcile goes on from it). Kept until the object is deleted, so
/// a late echo is still known.
struct OwnWrite<K> {
    /// The version the write made; for a deletion, the last version this
    /// process knew of the object (if any).
    version: Option<String>,
    at: Instant,
    /// The object as written (`None`: deleted), until the watch shows it.
    pending: Option<Option<Arc<K>>>,
}

impl<K: Resource> OwnWrite<K> {
    /// The watch shows `obj`: a version at least the written one ends the
    /// wait, and for a deletion only a later one (the object made again:
    /// an event of the version deleted is the past); one that does not
    /// compare as a number, any version.
    fn shown(&mut self, obj: &K) {
        let deletion = matches!(self.pending, Some(None));
        let written = self.version.as_deref().and_then(version_number);
        let seen = obj
            .meta()
            .resource_version
            .as_deref()
            .and_then(version_number);
        if written
            .zip(seen)
            .is_none_or(|(w, s)| s > w || (s == w && !deletion))
        {
            self.pending = None;
        }
    }

    /// What reads answer for the object while the write is not shown:
    /// `Some(Some(None))` for a deletion, `Some(None)` past
    /// [`WRITTEN_LIMIT`] (the caller reads the API server, never a copy
    /// older than the write); `None` once shown.
    fn standing_in(&self) -> Option<Option<Option<Arc<K>>>> {
        let pending = self.pending.clone()?;
        Some((self.at.elapsed() < WRITTEN_LIMIT).then_some(pending))
    }
}

/// A resourceVersion as a number (KEP-5504, Kubernetes 1.35: decimal
/// digits without a leading zero, later is larger); `None` for anything
/// else, which is never compared.
pub fn version_number(version: &str) -> Option<u64> {
    if version.starts_with('0') || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    version.parse().ok()
}

/// Every object a shared watch sees, deleted ones included, but the
/// echoes of this process's own writes.
pub type Subscription<K> = futures::stream::BoxStream<'static, Arc<K>>;

/// A watch before it runs: where its events go, and what it watches.
type Unstarted<K> = (Writer<K>, Api<K>, watcher::Config);

impl<K: Cached> Shared<K> {
    /// `namespace` is the namespace `api` is scoped to (`None`: all).
    pub fn new(api: Api<K>, namespace: Option<String>, config: watcher::Config) -> Self {
        let (reader, writer) = reflector::store_shared(SUBSCRIBER_BUFFER);
        Shared {
            namespace,
            reader,
            watch: Mutex::new(Some((writer, api, config))),
            deleted: Mutex::default(),
            own: Arc::default(),
            limit: None,
        }
    }

    /// Holds objects larger than `limit` bytes (as JSON) as stubs.
    pub fn bounded(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// A stream of every object the watch sees; `None` once the watch runs
    /// (subscribe before `run`).
    pub fn subscribe(&self) -> Option<Subscription<K>> {
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let changed = watch
            .as_ref()
            .and_then(|(writer, _, _)| writer.subscribe())?;
        let own = self.own.clone();
        let changed = changed.filter(move |obj: &Arc<K>| {
            let own = own.lock().unwrap_or_else(|e| e.into_inner());
            let echo = own
                .get(&ObjectRef::from_obj(obj.as_ref()))
                .and_then(|w| w.version.as_ref())
                .is_some_and(|v| obj.meta().resource_version.as_ref() == Some(v));
            futures::future::ready(!echo)
        });
        let (tx, deleted) = mpsc::unbounded();
        self.deleted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        Some(futures::stream::select(changed, deleted).boxed())
    }

    /// Runs the watch (relisting after errors and 410 Gone) until dropped.
    /// Only the first call runs it.
    pub async fn run(&self) {
        let taken = self.watch.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some((writer, api, config)) = taken else {
            return;
        };
        let limit = self.limit;
        // What the store held when a relist began (see `relisted`).
        let relisting: Mutex<Option<Vec<Arc<K>>>> = Mutex::default();
        let relisting = &relisting;
        crate::watch::watch(api, config)
            .default_backoff()
            .modify(move |obj| {
                strip_unread(obj);
                if let Some(limit) = limit {
                    stub_if_larger(obj, limit);
                }
            })
            .reflect_shared(writer)
            .for_each(|event| async move {
                match event {
                    Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                        if let Some(w) = self.own_map().get_mut(&ObjectRef::from_obj(&obj)) {
                            w.shown(&obj);
                        }
                    }
                    Ok(watcher::Event::Init) => {
                        *relisting.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(self.reader.state());
                    }
                    Ok(watcher::Event::Delete(obj)) => self.tell_deleted(Arc::new(obj)),
                    Ok(watcher::Event::InitDone) => {
                        let before = relisting.lock().unwrap_or_else(|e| e.into_inner()).take();
                        self.relisted(before.unwrap_or_default());
                    }
                    Err(e) => warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying"),
                }
            })
            .await;
    }

    /// Tells the subscribers of deletions that `obj` is gone.
    fn tell_deleted(&self, obj: Arc<K>) {
        let at = ObjectRef::from_obj(obj.as_ref());
        self.own_map().remove(&at);
        let subscribers = self.deleted.lock().unwrap_or_else(|e| e.into_inner());
        for tx in subscribers.iter() {
            let _ = tx.unbounded_send(obj.clone());
        }
    }

    /// After a relist (the first list, or one after 410 Gone when the
    /// watch's resourceVersion was compacted away): the objects held
    /// `before` it that it no longer shows were deleted while no watch ran,
    /// and no Delete event will ever say so.
    fn relisted(&self, before: Vec<Arc<K>>) {
        if before.is_empty() {
            return;
        }
        let now: std::collections::HashSet<ObjectRef<K>> = (self.reader.state().iter())
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect();
        for gone in before {
            if !now.contains(&ObjectRef::from_obj(gone.as_ref())) {
                debug!(kind = %K::kind(&()), name = %gone.name_any(), "deleted while the watch was away; seen by the relist");
                self.tell_deleted(gone);
            }
        }
    }

    /// Whether the watch has listed within `limit` (it never may, e.g.
    /// without RBAC to list the kind).
    async fn listed(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.reader.wait_until_ready())
            .await
            .is_ok()
    }

    /// Resolves once the watch has listed, or after `limit`, warning then.
    pub async fn ready(&self, limit: Duration) {
        if !self.listed(limit).await {
            warn!(
                kind = %K::kind(&()),
                namespace = self.namespace.as_deref().unwrap_or("(all)"),
                "the watch has not listed after {limit:?}; starting anyway, and reads of these objects go to the API server"
            );
        }
    }

    /// Whether this watch sees objects in `namespace`.
    pub fn covers(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == namespace)
    }

    /// The object `namespace/name` as last seen (`Some(None)`: the watch
    /// has not seen it), `None` when only the API server can tell (see
    /// [`Shared::held`]); waits for the first list.
    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Option<Arc<K>>>, NotListed> {
        if !self.listed(READY_LIMIT).await {
            let scope = self.namespace.as_deref();
            return Err(NotListed {
                kind: K::kind(&()).to_string(),
                scope: scope.map_or("in all namespaces".into(), |ns| {
                    format!("in namespace {ns}")
                }),
            });
        }
        Ok(self.held(namespace, name))
    }

    /// The object as this process's write not shown yet left it (`None`:
    /// deleted), else as the watch holds it; `None` when the write is too
    /// old to stand in (read the API server).
    fn held(&self, namespace: &str, name: &str) -> Option<Option<Arc<K>>> {
        let key = ObjectRef::new(name).within(namespace);
        let pending = self.own_map().get(&key).and_then(OwnWrite::standing_in);
        pending.unwrap_or_else(|| Some(self.reader.get(&key)))
    }

    fn own_map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, OwnWrite<K>>> {
        self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `obj` as this process's write answered it (see
    /// [`OwnWrite`]).
    pub fn wrote(&self, mut obj: K) {
        strip_unread(&mut obj);
        let key = ObjectRef::from_obj(&obj);
        let write = OwnWrite {
            version: obj.meta().resource_version.clone(),
            at: Instant::now(),
            pending: Some(Some(Arc::new(obj))),
        };
        self.own_map().insert(key, write);
    }

    /// Remembers that this process deleted `namespace/name`: reads answer
    /// that it is gone until the watch shows the deletion. Only where
    /// something of it is held (the watch's copy, or a write not shown
    /// yet): else nothing reads stale, and no Delete event would ever end
    /// the record (one was deleted already, or never seen).
    pub fn deleted(&self, namespace: &str, name: &str) {
        let key = ObjectRef::new(name).within(namespace);
        let seen = self.reader.get(&key);
        let mut own = self.own_map();
        let pending = own.get(&key).filter(|w| w.pending.is_some());
        let version = match (pending, &seen) {
            (Some(w), _) => w.version.clone(),
            (None, Some(obj)) => obj.meta().resource_version.clone(),
            (None, None) => {
                own.remove(&key);
                return;
            }
        };
        let write = OwnWrite {
            version,
            at: Instant::now(),
            pending: Some(None),
        };
        own.insert(key, write);
    }
}

/// A watch that has not listed its objects within [`READY_LIMIT`].
#[derive(Debug, thiserror::Error)]
#[error(
    "the watch of {kind} {scope} has not listed them after {READY_LIMIT:?}; check that the operator's ServiceAccount may list and watch them"
)]
pub struct NotListed {
    kind: String,
    scope: String,
}

/// Watches of one kind over the watched scopes: the one that covers a
/// namespace answers reads in it.
pub struct Scoped<K: Resource<DynamicType = ()> + Clone + 'static>(pub Vec<Arc<Shared<K>>>);

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for Scoped<K> {
    fn clone(&self) -> Self {
        Scoped(self.0.clone())
    }
}

impl<K> Scoped<K>
where
    K: Cached + Resource<Scope = NamespaceResourceScope>,
{
    /// One watch per scope (`None`: all namespaces).
    pub fn new(client: &Client, scopes: &[Option<String>], config: &watcher::Config) -> Self {
        Self::with_limit(client, scopes, config, None)
    }

    /// As [`Scoped::new`], objects larger than `limit` held as stubs.
    pub fn bounded(
        client: &Client,
        scopes: &[Option<String>],
        config: &watcher::Config,
        limit: usize,
    ) -> Self {
        Self::with_limit(client, scopes, config, Some(limit))
    }

    fn with_limit(
        client: &Client,
        scopes: &[Option<String>],
        config: &watcher::Config,
        limit: Option<usize>,
    ) -> Self {
        let watches = scopes
            .iter()
            .map(|scope| {
                let api = match scope {
                    Some(ns) => Api::namespaced(client.clone(), ns),
                    None => Api::all(client.clone()),
                };
                let shared = Shared::new(api, scope.clone(), config.clone());
                Arc::new(match limit {
                    Some(limit) => shared.bounded(limit),
                    None => shared,
                })
            })
            .collect();
        Scoped(watches)
    }

    /// `Ok(None)` when no watch covers `namespace`, it holds the object as
    /// a stub, or this process's write of it is too old to stand in (read
    /// it directly); `Ok(Some(None))` when the covering watch has no such
    /// object.
    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Option<Arc<K>>>, NotListed> {
        match self.0.iter().find(|s| s.covers(namespace)) {
            Some(shared) => match shared.get(namespace, name).await? {
                Some(Some(obj)) if is_stub(obj.as_ref()) => Ok(None),
                held => Ok(held),
            },
            None => Ok(None),
        }
    }

    /// Remembers this process's write of `obj` in the watch that covers
    /// its namespace (see [`Shared::wrote`]).
    pub fn wrote(&self, obj: K) {
        let namespace = obj.meta().namespace.clone().unwrap_or_default();
        if let Some(shared) = self.0.iter().find(|s| s.covers(&namespace)) {
            shared.wrote(obj);
        }
    }

    /// The object as last seen (or as this process's write left it),
    /// without waiting for the first list; `None` when no watch holds it
    /// whole (read the API server).
    pub fn peek(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let shared = self.0.iter().find(|s| s.covers(namespace))?;
        let obj = shared.held(namespace, name)??;
        (!is_stub(obj.as_ref())).then_some(obj)
    }

    /// Remembers this process's deletion of `namespace/name` in the watch
    /// that covers it (see [`Shared::deleted`]).
    pub fn deleted(&self, namespace: &str, name: &str) {
        if let Some(shared) = self.0.iter().find(|s| s.covers(namespace)) {
            shared.deleted(namespace, name);
        }
    }

    /// The watch of `namespace` (`None`: all namespaces).
    pub fn scope(&self, namespace: Option<&str>) -> Option<&Arc<Shared<K>>> {
        self.0.iter().find(|s| s.namespace.as_deref() == namespace)
    }

    /// Runs every watch until dropped.
    pub async fn run(&self) {
        futures::future::join_all(self.0.iter().map(|s| s.run())).await;
    }

    /// Resolves once every watch has listed (or `limit` has passed).
    pub async fn ready(&self, limit: Duration) {
        futures::future::join_all(self.0.iter().map(|s| s.ready(limit))).await;
    }
}

/// The annotation `kubectl apply` fills with a copy of the whole object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no reconcile reads from a cached object: `managedFields` and
/// kubectl's last-applied copy, together often more than the rest of it.
/// Memory is what thousands of cached objects cost.
pub fn strip_unread<K: Resource>(obj: &mut K) {
    obj.managed_fields_mut().clear();
    obj.annotations_mut().remove(LAST_APPLIED);
}

/// Replaces `obj` by a stub when it is larger than `limit` bytes as JSON:
/// its name, namespace, UID, versions, deletion, this operator's labels
/// and a few owner references (what wakes and finds its CR), marked with
/// [`STUB_ANNOTATION`].
fn stub_if_larger<K: Resource + Default + Serialize>(obj: &mut K, limit: usize) {
    let size = serde_json::to_vec(&*obj).map_or(0, |v| v.len());
    if size <= limit {
        return;
    }
    let meta = obj.meta();
    let ours = [MANAGED_BY_LABEL, cro_provider_api::OWNER_UID_LABEL];
    let labels = meta.labels.as_ref().map(|l| {
        l.iter()
            .filter(|(k, _)| ours.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    let owner_references = meta
        .owner_references
        .as_ref()
        .map(|o| o.iter().take(STUB_OWNER_REFERENCES).cloned().collect());
    let stub_meta = ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        generation: meta.generation,
        creation_timestamp: meta.creation_timestamp.clone(),
        deletion_timestamp: meta.deletion_timestamp.clone(),
        labels,
        owner_references,
        annotations: Some([(STUB_ANNOTATION.to_string(), size.to_string())].into()),
        ..ObjectMeta::default()
    };
    let mut stub = K::default();
    *stub.meta_mut() = stub_meta;
    *obj = stub;
}

/// Whether the cache holds `obj` as a stub (see [`OWNED_OBJECT_LIMIT`]).
pub fn is_stub<K: Resource>(obj: &K) -> bool {
    obj.annotations().contains_key(STUB_ANNOTATION)
}

/// The scopes the operator watches: each watched namespace, or all.
pub fn scopes(watch_namespaces: &[String]) -> Vec<Option<String>> {
    if watch_namespaces.is_empty() {
        vec![None]
    } else {
        watch_namespaces.iter().cloned().map(Some).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cro_provider_api::MANAGED_BY;
    use k8s_openapi::{ByteString, api::core::v1::Secret};

    fn secret(bytes: usize) -> Secret {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "s", "namespace": "app", "uid": "u1", "resourceVersion": "7",
                "labels": {MANAGED_BY_LABEL: MANAGED_BY, "team": "a"},
                "annotations": {"note": "x"},
                "ownerReferences": [{"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "name": "db", "uid": "p1"}]
            }
        }))
        .map(|mut s: Secret| {
            s.data = Some([("k".to_string(), ByteString(vec![b'a'; bytes]))].into());
            s
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_object_larger_than_the_limit_is_held_as_a_stub() {
        let mut small = secret(1_000);
        stub_if_larger(&mut small, OWNED_OBJECT_LIMIT);
        assert_eq!(small, secret(1_000));
        assert!(!is_stub(&small));

        let mut large = secret(900 * 1024);
        stub_if_larger(&mut large, OWNED_OBJECT_LIMIT);
        assert!(is_stub(&large));
        assert_eq!(large.data, None);
        let meta = &large.metadata;
        assert_eq!(
            (
                meta.name.as_deref(),
                meta.namespace.as_deref(),
                meta.resource_version.as_deref()
            ),
            (Some("s"), Some("app"), Some("7"))
        );
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(labels.keys().collect::<Vec<_>>(), [MANAGED_BY_LABEL]);
        assert_eq!(meta.owner_references.as_ref().map(Vec::len), Some(1));
        assert!(serde_json::to_vec(&large).map_or(0, |v| v.len()) < 1_024);
    }

    fn at_version(version: &str) -> Secret {
        let mut s = secret(10);
        s.metadata.resource_version = Some(version.into());
        s
    }

    fn write_of(version: &str, at: Instant) -> OwnWrite<Secret> {
        OwnWrite {
            version: Some(version.into()),
            at,
            pending: Some(Some(Arc::new(at_version(version)))),
        }
    }

    /// The version a read answers with, `None` for "read the API server".
    fn answer(w: &OwnWrite<Secret>) -> Option<Option<Option<String>>> {
        let version = |s: Option<Arc<Secret>>| s.and_then(|s| s.metadata.resource_version.clone());
        w.standing_in().map(|p| p.map(version))
    }

    #[test]
    fn an_own_write_stands_in_until_the_watch_shows_it_or_a_later_version() {
        let mut w = write_of("9", Instant::now());
        assert_eq!(answer(&w), Some(Some(Some("9".into()))));
        // An event of the version before the write, delivered late.
        w.shown(&at_version("8"));
        assert_eq!(
            answer(&w),
            Some(Some(Some("9".into()))),
            "never an older copy"
        );
        w.shown(&at_version("10"));
        assert_eq!(answer(&w), None, "the watch holds what came after");
        // Versions that are not numbers: any event ends the wait.
        let mut odd = write_of("x9", Instant::now());
        odd.shown(&at_version("8"));
        assert_eq!(answer(&odd), None);
    }

    #[test]
    fn an_own_deletion_reads_as_gone_and_an_old_write_sends_reads_to_the_api_server() {
        let deleted = OwnWrite::<Secret> {
            version: None,
            at: Instant::now(),
            pending: Some(None),
        };
        assert_eq!(
            answer(&deleted),
            Some(Some(None)),
            "gone, whatever the watch holds"
        );
        let mut deleted = OwnWrite::<Secret> {
            version: Some("9".into()),
            ..deleted
        };
        deleted.shown(&at_version("9"));
        assert_eq!(
            answer(&deleted),
            Some(Some(None)),
            "a late event of the version deleted"
        );
        deleted.shown(&at_version("10"));
        assert_eq!(answer(&deleted), None, "made again since");
        let long_ago = Instant::now().checked_sub(WRITTEN_LIMIT + Duration::from_secs(1));
        let old = write_of("9", long_ago.unwrap_or_else(Instant::now));
        assert_eq!(
            answer(&old),
            Some(None),
            "too old to stand in: ask the API server"
        );
    }

    /// A cache of Secrets in `app` whose watch never runs (its reader stays
    /// empty), on a client no test request reaches.
    fn unwatched() -> Shared<Secret> {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "no API server in this test",
            ))
        });
        let client = kube::Client::new(service, "app");
        Shared::new(
            Api::namespaced(client, "app"),
            None,
            watcher::Config::default(),
        )
    }

    #[tokio::test]
    async fn a_deletion_is_recorded_only_where_something_of_it_is_held() {
        let cache = unwatched();
        let key = ObjectRef::new("s").within("app");
        cache.deleted("app", "s");
        assert!(
            cache.own_map().get(&key).is_none(),
            "nothing held: nothing to hide"
        );
        assert_eq!(cache.held("app", "s").map(|o| o.is_some()), Some(false));
        cache.wrote(at_version("9"));
        assert_eq!(
            cache.held("app", "s").map(|o| o.is_some()),
            Some(true),
            "our write"
        );
        cache.deleted("app", "s");
        assert_eq!(
            cache.held("app", "s").map(|o| o.is_some()),
            Some(false),
            "then our deletion"
        );
        assert!(
            cache
                .own_map()
                .get(&key)
                .is_some_and(|w| w.pending == Some(None))
        );
    }
}
