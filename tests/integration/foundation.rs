//! The foundation every later test stands on: the CRDs on a real
//! apiserver, the Go operator's CR format accepted, invalid CRs rejected
//! with the field named, pods made Ready by kwok, and the AWS emulator
//! answering the real SDK.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    core::Status,
};
use serde_json::json;

use crate::support::{self, DEFAULT_TIMEOUT, TestEnv, with_namespace};

/// The YAML objects of one directory (e.g. `config/samples`), by file.
pub fn objects_in(dir: &str) -> Vec<(String, DynamicObject)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.map(|e| e.path()).unwrap_or_else(|e| panic!("{e}")))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let obj: DynamicObject =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.push((path.display().to_string(), obj));
    }
    out
}

fn samples() -> Vec<(String, DynamicObject)> {
    let mut all = objects_in("config/samples");
    all.extend(objects_in("config/samples/aws"));
    all
}

pub fn api_for(client: &kube::Client, ns: &str, obj: &DynamicObject) -> Api<DynamicObject> {
    let types = obj
        .types
        .as_ref()
        .unwrap_or_else(|| panic!("{} has no apiVersion/kind", obj.name_any()));
    let gvk = GroupVersionKind::try_from(types).unwrap_or_else(|e| panic!("{e}"));
    let plural = cloud_resource_operator::api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == gvk.kind)
        .unwrap_or_else(|| panic!("no CRD for kind {}", gvk.kind))
        .spec
        .names
        .plural;
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

#[tokio::test]
async fn every_sample_cr_is_accepted_and_stored_unpruned() {
    with_namespace("samples", |client, ns| async move {
        support::ensure_crds(&client).await;
        let samples = samples();
        let kinds: std::collections::BTreeSet<_> = samples
            .iter()
            .filter_map(|(_, o)| o.types.as_ref().map(|t| t.kind.clone()))
            .collect();
        assert_eq!(
            kinds.len(),
            6,
            "expected a sample of each of the six kinds, found {kinds:?}"
        );
        for (path, sample) in samples {
            let api = api_for(&client, &ns, &sample);
            let stored = api
                .create(&PostParams::default(), &sample)
                .await
                .unwrap_or_else(|e| panic!("{path} rejected: {e}"));
            // A field unknown to the schema would be pruned: the stored
            // spec must be exactly what the Go-format sample says.
            assert_eq!(
                stored.data["spec"], sample.data["spec"],
                "{path}: spec changed on the way in"
            );
        }
    })
    .await;
}

async fn rejection(api: &Api<DynamicObject>, obj: serde_json::Value) -> Status {
    let obj: DynamicObject = serde_json::from_value(obj).unwrap_or_else(|e| panic!("{e}"));
    match api.create(&PostParams::default(), &obj).await {
        Err(kube::Error::Api(status)) => *status,
        Ok(_) => panic!(
            "{} was accepted, expected a validation error",
            obj.name_any()
        ),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[tokio::test]
async fn invalid_crs_are_rejected_naming_the_field() {
    with_namespace("invalid", |client, ns| async move {
        support::ensure_crds(&client).await;
        let postgres = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "x"}});
        let gvk_obj: DynamicObject = serde_json::from_value(postgres.clone()).unwrap_or_else(|e| panic!("{e}"));
        let api = api_for(&client, &ns, &gvk_obj);
        let spec = |s: serde_json::Value| {
            let mut o = postgres.clone();
            o["spec"] = s;
            o
        };

        let no_secret_ref = rejection(&api, spec(json!({"type": "workshop", "tier": "development"}))).await;
        assert_eq!(no_secret_ref.code, 422);
        assert!(no_secret_ref.message.contains("spec.secretRef"), "{}", no_secret_ref.message);

        let bad_duration = rejection(
            &api,
            spec(json!({"type": "workshop", "tier": "development", "secretRef": {"name": "s"}, "snapshotFrequency": "1 day"})),
        )
        .await;
        assert!(bad_duration.message.contains("spec.snapshotFrequency"), "{}", bad_duration.message);

        let empty_tier =
            rejection(&api, spec(json!({"type": "workshop", "tier": "", "secretRef": {"name": "s"}}))).await;
        assert!(empty_tier.message.contains("spec.tier"), "{}", empty_tier.message);

        let bad_secret_name = rejection(
            &api,
            spec(json!({"type": "workshop", "tier": "development", "secretRef": {"name": "Not_A_Name"}})),
        )
        .await;
        assert!(bad_secret_name.message.contains("spec.secretRef.name"), "{}", bad_secret_name.message);

        let snapshot: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot", "metadata": {"name": "s"}, "spec": {}}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let snapshots = api_for(&client, &ns, &snapshot);
        let no_resource = rejection(&snapshots, serde_json::to_value(&snapshot).unwrap_or_default()).await;
        assert!(no_resource.message.contains("spec.resourceName"), "{}", no_resource.message);
    })
    .await;
}

#[tokio::test]
async fn snapshot_resource_name_cannot_change() {
    with_namespace("snapimmutable", |client, ns| async move {
        support::ensure_crds(&client).await;
        let snap: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "RedisSnapshot",
            "metadata": {"name": "snap"}, "spec": {"resourceName": "cache-a"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let api = api_for(&client, &ns, &snap);
        let mut created = api
            .create(&PostParams::default(), &snap)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        created.data["spec"]["resourceName"] = json!("cache-b");
        match api.replace("snap", &PostParams::default(), &created).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.message.contains("resourceName cannot change"),
                    "{}",
                    status.message
                )
            }
            other => panic!("changing resourceName was not rejected: {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_deployment_becomes_available_through_kwok() {
    with_namespace("kwok", |client, ns| async move {
        let api: Api<Deployment> = Api::namespaced(client, &ns);
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "tiny"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "tiny"}},
                "template": {
                    "metadata": {"labels": {"app": "tiny"}},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        api.create(&PostParams::default(), &deployment).await.unwrap_or_else(|e| panic!("{e}"));
        let available = |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
        };
        let d = support::wait_for(&api, "tiny", "Deployment Available", DEFAULT_TIMEOUT, available).await;
        assert_eq!(d.status.and_then(|s| s.ready_replicas), Some(1));
    })
    .await;
}

/// Test traffic never leaves this machine (issue #44): a kwok pod's IP is
/// in the environment's fake range, which this machine never routes out
/// (`ip route get` answers unreachable, or the real node's bridge), and a
/// connection to it, directly or through its Service's ClusterIP once
/// kube-proxy translates that, or to a ClusterIP no Service holds, fails
/// at once here instead of going to whatever answers on the real network.
#[tokio::test]
async fn a_fake_pods_address_is_unreachable_here_never_routed_out() {
    use k8s_openapi::api::core::v1::{Pod, Service};
    use std::{net::Ipv4Addr, process::Command, time::Duration};

    let fake: Vec<String> = std::env::var("CRO_TESTENV_FAKE_CIDR")
        .unwrap_or_else(|_| panic!("CRO_TESTENV_FAKE_CIDR is not set: start the environment with tests/testenv/testenv.sh up"))
        .split('/')
        .map(str::to_string)
        .collect();
    let (base, bits): (Ipv4Addr, u32) = (
        fake[0].parse().unwrap_or_else(|e| panic!("{e}")),
        fake[1].parse().unwrap_or_else(|e| panic!("{e}")),
    );
    let in_fake = move |ip: Ipv4Addr| (u32::from(ip) ^ u32::from(base)) >> (32 - bits) == 0;
    let default = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["-4", "route", "show", "default"])
            .output()
            .unwrap_or_else(|e| panic!("ip: {e}"))
            .stdout,
    )
    .to_string();
    let default_dev = default
        .split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .map(str::to_string);

    with_namespace("fakenet", |client, ns| async move {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "docker.io/library/postgres:17"}]}}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        deployments.create(&PostParams::default(), &deployment).await.unwrap_or_else(|e| panic!("{e}"));
        let service: Service = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let service = Api::<Service>::namespaced(client.clone(), &ns).create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("{e}"));
        let cluster_ip = service.spec.and_then(|s| s.cluster_ip).unwrap_or_default();

        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let started = tokio::time::Instant::now();
        let ip = loop {
            let listed = pods.list(&Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            if let Some(ip) = listed.items.iter().find_map(|p| p.status.as_ref()?.pod_ip.clone()) {
                break ip;
            }
            assert!(started.elapsed() < DEFAULT_TIMEOUT, "no pod IP within {DEFAULT_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let ip: Ipv4Addr = ip.parse().unwrap_or_else(|e| panic!("pod IP {ip}: {e}"));
        assert!(in_fake(ip), "the kwok pod's IP {ip} is in the fake range {}/{bits}", fake[0]);

        // Unreachable, or the real node's bridge: never a gateway, never
        // the default route's device.
        let route = Command::new("ip").args(["-4", "route", "get", &ip.to_string()]).output().unwrap_or_else(|e| panic!("ip: {e}"));
        let said = format!("{}{}", String::from_utf8_lossy(&route.stdout), String::from_utf8_lossy(&route.stderr));
        let out_default = default_dev.as_ref().is_some_and(|dev| said.contains(&format!("dev {dev} ")));
        assert!(!route.status.success() || !(said.contains(" via ") || out_default), "ip route get {ip} would send it out: {said}");

        // With the real node, kube-proxy translates the ClusterIP to the
        // pod's address: wait for its rule, so that the Service is dialled
        // through it (not merely refused as untranslated).
        if std::env::var("CRO_TESTENV_REAL_NODE").is_ok() {
            let rule = format!("--to-destination {ip}:5432");
            let started = tokio::time::Instant::now();
            while !String::from_utf8_lossy(&Command::new("iptables-save").args(["-t", "nat"]).output().unwrap_or_else(|e| panic!("iptables-save: {e}")).stdout).contains(&rule) {
                assert!(started.elapsed() < DEFAULT_TIMEOUT, "kube-proxy wrote no rule {rule} within {DEFAULT_TIMEOUT:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        // The Service range's last address but one: the API server hands
        // out ClusterIPs from the bottom, so no Service holds it.
        let services: Vec<String> = std::env::var("CRO_TESTENV_SERVICE_CIDR")
            .unwrap_or_else(|_| panic!("CRO_TESTENV_SERVICE_CIDR is not set: start the environment with tests/testenv/testenv.sh up"))
            .split('/')
            .map(str::to_string)
            .collect();
        let (service_base, service_bits): (Ipv4Addr, u32) = (
            services[0].parse().unwrap_or_else(|e| panic!("{e}")),
            services[1].parse().unwrap_or_else(|e| panic!("{e}")),
        );
        let unheld = Ipv4Addr::from(u32::from(service_base) | ((1u32 << (32 - service_bits)) - 2)).to_string();
        // Refused here, at once ("No route to host"): a timeout would mean
        // the packet went somewhere.
        for (what, addr) in [("the pod", ip.to_string()), ("its Service", cluster_ip.clone()), ("a ClusterIP no Service holds", unheld.clone())] {
            let dial = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect((addr.as_str(), 5432))).await;
            match dial {
                Err(_) => panic!("connecting to {what} ({addr}:5432) was not refused locally: no answer within 5 s"),
                Ok(Ok(_)) => panic!("connected to {what} ({addr}:5432), which does not exist"),
                Ok(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::HostUnreachable, "{what} ({addr}): {e}"),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn s3_bucket_round_trip_against_the_emulator() {
    crate::support::bounded("s3_bucket_round_trip_against_the_emulator", async move {
        let env = TestEnv::load();
        let s3 = env.s3().await;
        let bucket = format!("cro-foundation-{}", std::process::id());
        s3.create_bucket()
            .bucket(&bucket)
            .create_bucket_configuration(
                aws_sdk_s3::types::CreateBucketConfiguration::builder()
                    .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(
                        env.aws_region.as_str(),
                    ))
                    .build(),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("create_bucket {bucket}: {e:?}"));
        s3.head_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap_or_else(|e| panic!("head_bucket: {e:?}"));
        s3.delete_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap_or_else(|e| panic!("delete_bucket: {e:?}"));
        let gone = s3.head_bucket().bucket(&bucket).send().await;
        assert!(
            gone.as_ref()
                .is_err_and(|e| e.as_service_error().is_some_and(|s| s.is_not_found())),
            "bucket still there after delete: {gone:?}"
        );
    })
    .await;
}

/// A reconcile may read a cached version from before the previous one
/// removed the finalizer, after the API server deleted the object: its
/// removal is done, not an error (which warned about a deleted CR).
#[tokio::test]
async fn removing_the_finalizer_of_an_object_already_gone_is_done() {
    use cloud_resource_operator::{
        api::BlobStorage,
        reconcile::finalizer::{self, FINALIZER},
    };
    with_namespace("finalizergone", |client, ns| async move {
        support::ensure_crds(&client).await;
        let api = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let blob: BlobStorage = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
            "metadata": {"name": "gone", "finalizers": [FINALIZER]},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "gone-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        api.create(&PostParams::default(), &blob)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        api.delete("gone", &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // The version a cache would hold: deleting, our finalizer on it.
        let stale = api.get("gone").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(stale.metadata.deletion_timestamp.is_some());
        finalizer::remove(&api, &stale)
            .await
            .unwrap_or_else(|e| panic!("the first removal: {e}"));
        support::wait_deleted(&api, "gone", DEFAULT_TIMEOUT).await;
        finalizer::remove(&api, &stale)
            .await
            .unwrap_or_else(|e| panic!("removing it again from the stale copy: {e}"));
    })
    .await;
}
