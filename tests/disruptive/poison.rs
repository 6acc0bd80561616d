//! Poison objects: stored objects the Rust types do not expect (an empty or
//! unknown phase, status fields of the wrong type, a spec that does not
//! parse) never block the list or watch of their kind. They are written
//! under a looser schema, as an older CRD or another operator would have
//! stored them, then the real CRDs are restored and the operator started.

use std::time::Duration;

use cloud_resource_operator::api::{self, Phase, Redis};
use k8s_openapi::{
    api::core::v1::Event,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    core::DynamicObject,
    discovery::ApiResource,
};
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, Operator, Phased, TestEnv, apply, create_namespace, ensure_crds, wait_deleted,
    wait_for, wait_phase,
};

/// The Redis CRD with spec and status accepting anything.
fn loose_redis_crd() -> CustomResourceDefinition {
    let mut crd = api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Redis")
        .unwrap_or_else(|| panic!("no Redis CRD"));
    let loose = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }});
    crd.spec.versions[0].schema = Some(
        serde_json::from_value(json!({"openAPIV3Schema": loose})).unwrap_or_else(|e| panic!("{e}")),
    );
    crd
}

fn redis_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<Redis>(&());
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates a Redis from raw JSON, retrying while the API server still
/// validates with the schema it had before the loose CRD was applied.
async fn create_raw(api: &Api<DynamicObject>, object: Value) {
    let obj: DynamicObject = serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}"));
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => return,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("retrying create of {}: {e}", obj.name_any());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating {}: {e}", obj.name_any()),
        }
    }
}

async fn patch_status(api: &Api<DynamicObject>, name: &str, status: Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("writing the status of {name}: {e}"));
}

fn redis(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
           "metadata": {"name": name}, "spec": spec})
}

fn good_spec(name: &str) -> Value {
    json!({"type": "workshop", "tier": "development", "secretRef": {"name": format!("{name}-sec")}})
}

/// A value that must never reach the operator log: it is only in the body
/// of the object whose spec does not parse.
const BODY_MARKER: &str = "poison-body-marker-7f3a";

#[tokio::test]
async fn poison_objects_never_block_their_kind() {
    crate::support::bounded("poison_objects_never_block_their_kind", async move {
    let _serial = crate::SERIAL.lock().await;
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ns = create_namespace(&client, "poison").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    apply(&crds, &loose_redis_crd())
        .await
        .unwrap_or_else(|e| panic!("applying the loose Redis CRD: {e}"));
    let raw = redis_api(&client, &ns);

    // Status as other writers leave it.
    for name in ["empty-phase", "unknown-phase", "wrong-types"] {
        create_raw(&raw, redis(name, good_spec(name))).await;
    }
    patch_status(
        &raw,
        "empty-phase",
        json!({"phase": "", "secretRef": {"name": ""}}),
    )
    .await;
    patch_status(
        &raw,
        "unknown-phase",
        json!({"phase": "creating", "strategy": "openshift"}),
    )
    .await;
    patch_status(
        &raw,
        "wrong-types",
        json!({"phase": 3, "version": 5, "conditions": "none", "secretRef": "x", "observedGeneration": "abc"}),
    )
    .await;
    // A spec that does not parse: `tier` is a number.
    let mut bad = good_spec("bad-spec");
    bad["tier"] = json!(5);
    bad["size"] = json!(BODY_MARKER);
    create_raw(&raw, redis("bad-spec", bad.clone())).await;
    // The same, being deleted with our finalizer and no cloud resource
    // recorded: it must not hang.
    let mut deleting = redis("bad-spec-deleting", bad);
    deleting["metadata"]["finalizers"] =
        json!(["cloud-resources-operator.integreatly.org/finalizers"]);
    create_raw(&raw, deleting).await;
    raw.delete("bad-spec-deleting", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // Back to the real schema: the stored objects stay as they are.
    ensure_crds(&client).await;
    let op = Operator::start(&ns).await;
    let redises: Api<Redis> = Api::namespaced(client.clone(), &ns);
    crate::support::create_json::<Redis>(&client, &ns, redis("fresh", good_spec("fresh"))).await;

    for name in ["empty-phase", "unknown-phase", "wrong-types", "fresh"] {
        let r = wait_phase(&redises, name, Phase::Complete).await;
        let status = r.status.unwrap_or_default();
        assert!(
            status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            "{name}: {status:?}"
        );
        assert_eq!(
            status.secret_ref.map(|s| s.name),
            Some(format!("{name}-sec")),
            "{name}"
        );
    }
    // Rewritten with the right types.
    let rewritten = raw
        .get("wrong-types")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rewritten.data["status"]["version"].is_string(),
        "{:?}",
        rewritten.data["status"]
    );
    assert!(
        rewritten.data["status"]["conditions"].is_array(),
        "{:?}",
        rewritten.data["status"]
    );

    let bad = wait_for(
        &raw,
        "bad-spec",
        "phase failed",
        DEFAULT_TIMEOUT,
        |o: Option<&DynamicObject>| o.is_some_and(|o| o.data["status"]["phase"] == "failed"),
    )
    .await;
    let message = bad.data["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("spec cannot be read") && message.contains("kubectl edit"),
        "{message}"
    );
    wait_deleted(&raw, "bad-spec-deleting", DEFAULT_TIMEOUT).await;

    // Reported once, as one Event series, with the error metric.
    let events: Vec<Event> = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().fields("involvedObject.name=bad-spec"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .items;
    let invalid: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("InvalidSpec"))
        .collect();
    assert_eq!(invalid.len(), 1, "{events:#?}");
    let metrics = op.http_get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("cro_reconcile_errors_total")
                && l.contains("kind=\"Redis\"")
                && l.contains("error=\"invalid_object\"")),
        "{metrics}"
    );
    let log = op.logs();
    assert!(
        !log.contains("failed to perform initial object list"),
        "{log}"
    );
    assert!(
        !log.contains(BODY_MARKER),
        "the operator logged an object body:\n{log}"
    );
    assert!(log.contains("spec cannot be read"), "{log}");

    // Fixing the spec heals the object without a restart.
    raw.patch(
        "bad-spec",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"tier": "development", "size": null}})),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let healed = wait_phase(&redises, "bad-spec", Phase::Complete).await;
    assert!(
        healed.message().contains("successfully"),
        "{}",
        healed.message()
    );

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    wait_deleted(&namespaces, &ns, DEFAULT_TIMEOUT).await;
    op.stop().await;
}).await;
}
