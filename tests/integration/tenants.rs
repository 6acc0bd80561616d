//! The tenant as attacker (issue #25, docs/security.md): a team that may
//! only edit the operator's CRs in its own namespace, acting through its
//! own ServiceAccount token, tries to reach what is another team's. Each
//! attack is refused with a clear message, and no AWS write reaches the
//! victim's resources (the emulator's request log) nor any API request
//! leaves the tenant's namespace (the API server's audit log). Also what a
//! platform team decides for its tenants: which namespaces may use a tier,
//! and whether a namespace's own `cloud-resource-config` is read.

use cloud_resource_operator::api::{BlobStorage, Phase};
use kube::Api;
use serde_json::json;

use crate::support::{
    Phased, TestEnv, apply_config_map, create_json, create_namespace, wait_phase, with_operator,
    with_operator_launched,
};

/// Creates the namespace `name` (a test namespace) and returns its
/// tenant's client: a ServiceAccount token that may edit the operator's
/// CRs there only.
async fn tenants_namespace(admin: &kube::Client, name: &str) -> kube::Client {
    use k8s_openapi::api::core::v1::Namespace;
    let namespace: Namespace = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"cro.integreatly.org/test": "true"}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Namespace>::all(admin.clone())
        .create(&Default::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    crate::support::tenant_client(admin, name).await
}

/// The namespace whose Go-style identifiers collide with `victim`'s:
/// `victim` without its last character, where `<that character>db` is
/// `<victim>/db`'s identifier.
fn colliding(victim: &str) -> String {
    victim[..victim.len() - 1].to_string()
}

async fn blob(client: &kube::Client, ns: &str, name: &str, deployment_type: &str, tier: &str) {
    let _: BlobStorage = create_json(
        client,
        ns,
        json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
               "spec": {"type": deployment_type, "tier": tier, "secretRef": {"name": format!("{name}-sec")}}}),
    )
    .await;
}

#[tokio::test]
async fn a_tier_admits_only_the_namespaces_it_names_or_selects() {
    with_operator("tieracl", |client, ns, _op| async move {
        let tiers = |admitted: &str| {
            json!({"blobstorage": json!({
                "development": {"strategy": {}, "allowedNamespaces": [admitted]},
                "selected": {"strategy": {}, "allowedNamespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
                "closed": {"strategy": {}, "allowedNamespaces": ["someone-else"]},
            })
            .to_string()})
        };
        apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", tiers("someone-else")).await;
        let tenant = crate::support::tenant_client(&client, &ns).await;
        blob(&tenant, &ns, "refused", "workshop", "development").await;
        blob(&tenant, &ns, "selected", "workshop", "selected").await;
        let blobs = Api::<BlobStorage>::namespaced(tenant.clone(), &ns);
        let refused = wait_phase(&blobs, "refused", Phase::Failed).await;
        let message = refused.message();
        assert!(
            message.contains(&format!("is not open to namespace {ns}")) && message.contains("allowedNamespaces [\"someone-else\"]"),
            "{message}"
        );
        wait_phase(&blobs, "selected", Phase::Complete).await;
        // The platform admits the namespace: the CR heals without a restart.
        apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", tiers(&ns)).await;
        wait_phase(&blobs, "refused", Phase::Complete).await;

        // Switched to a tier the namespace may not use, then deleted: not
        // deleted under that tier (its role may be another account's); the
        // finalizer stays until the CR names an admitting tier again.
        let to = |tier: &str| kube::api::Patch::Merge(json!({"spec": {"tier": tier}}));
        let params = kube::api::PatchParams::default();
        blobs.patch("selected", &params, &to("closed")).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&blobs, "selected", Phase::Failed).await;
        blobs.delete("selected", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let held = crate::support::wait_for(&blobs, "selected", "the deletion refused under tier closed", crate::support::DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| {
            o.is_some_and(|b| b.message().contains("it is not deleted under that tier"))
        })
        .await;
        assert!(held.message().contains("set spec.tier back"), "{}", held.message());
        blobs.patch("selected", &params, &to("selected")).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&blobs, "selected", crate::support::DEFAULT_TIMEOUT).await;
    })
    .await;
}

/// The tenant of `ns` maps `workshop` to AWS in its own namespace's
/// `cloud-resource-config`; its BlobStorage is made in the cluster anyway.
async fn a_tenants_mapping_is_not_read(client: &kube::Client, ns: &str) {
    let tenant = crate::support::tenant_client(client, ns).await;
    let mapping =
        json!({"blobstorage": "aws", "postgres": "aws", "redis": "aws", "smtpcredentials": "aws"});
    apply_config_map(
        &tenant,
        ns,
        "cloud-resource-config",
        json!({"workshop": mapping.to_string()}),
    )
    .await;
    blob(&tenant, ns, "mine", "workshop", "development").await;
    let blobs = Api::<BlobStorage>::namespaced(tenant.clone(), ns);
    // The provider is chosen before it works (under the shipped tiers, a
    // store kwok never starts keeps it in progress).
    let chosen = |o: Option<&BlobStorage>| {
        o.and_then(|o| o.status.as_ref()?.strategy.clone())
            .is_some()
    };
    let done = crate::support::wait_for(
        &blobs,
        "mine",
        "a provider chosen",
        crate::support::DEFAULT_TIMEOUT,
        chosen,
    )
    .await;
    let provider = done.status.and_then(|s| s.strategy);
    assert_eq!(
        provider.as_deref(),
        Some("openshift"),
        "the tenant's mapping was read"
    );
}

async fn delete_namespaces(admin: kube::Client, names: &[String]) {
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin);
    for ns in names {
        if let Err(e) = namespaces.delete(ns, &Default::default()).await {
            eprintln!("warning: deleting {ns}: {e}");
        }
    }
}

/// With one watched namespace and the defaults (an OLM SingleNamespace
/// install, the chart's `watchNamespaces: [team]`) the tenant's own
/// `cloud-resource-config` and strategies are not read: a tier it writes
/// cannot give its Postgres's pod the node. And no tier, not even the
/// platform's own, may: the CR is refused naming the field.
#[tokio::test]
async fn with_one_watched_namespace_a_tenants_own_configuration_is_not_read_by_default() {
    use k8s_openapi::api::apps::v1::Deployment;
    let admin = TestEnv::load().client().await;
    let ops = create_namespace(&admin, "nsconf-ops").await;
    crate::migration::install_shipped_configuration(&admin, &ops).await;
    let operator_namespace = ops.clone();
    let adjust = move |l: &mut crate::support::Launch| {
        l.operator_namespace = Some(operator_namespace);
    };
    let ops_for_test = ops.clone();
    with_operator_launched("nsconf", adjust, |client, ns, op| async move {
        a_tenants_mapping_is_not_read(&client, &ns).await;
        assert!(op.logs().contains("namespace-level cloud-resource-config not read"), "the choice is not logged");
        let tenant = crate::support::tenant_client(&client, &ns).await;
        let node = json!({"template": {"spec": {"hostNetwork": true, "hostPID": true,
            "containers": [{"name": "postgres", "securityContext": {"privileged": true, "runAsUser": 0}}]}}});
        let tiers = json!({"postgres": json!({"development": {"strategy": {"deploymentSpec": node}}}).to_string()});
        apply_config_map(&tenant, &ns, "cloud-resources-openshift-strategies", tiers.clone()).await;
        let _: cloud_resource_operator::api::Postgres = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "pg"}, "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "pg-sec"}}})).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let made = crate::support::wait_for(&deployments, "pg", "the Postgres's Deployment", crate::support::DEFAULT_TIMEOUT, |d: Option<&Deployment>| d.is_some()).await;
        let pod = made.spec.and_then(|s| s.template.spec).unwrap_or_else(|| panic!("no pod spec"));
        assert_ne!(pod.host_network, Some(true), "the tenant's tier put the pod on the host network");
        assert_ne!(pod.host_pid, Some(true), "the tenant's tier gave the pod the host's PIDs");
        for c in &pod.containers {
            let security = c.security_context.clone().unwrap_or_default();
            assert_ne!(security.privileged, Some(true), "the tenant's tier made {} privileged", c.name);
            assert_ne!(security.run_as_user, Some(0), "the tenant's tier made {} root", c.name);
        }
        // A Secret named as the Go operator named its Postgres credentials
        // does not choose the Go layout (no securityContext, no NetworkPolicy).
        let go_named: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({"metadata": {"name": "legacy-postgres-credentials"},
            "stringData": {"user": "u", "password": "p", "database": "d"}})).unwrap_or_else(|e| panic!("{e}"));
        Api::namespaced(tenant.clone(), &ns).create(&Default::default(), &go_named).await.unwrap_or_else(|e| panic!("{e}"));
        let _: cloud_resource_operator::api::Postgres = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "legacy"}, "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "legacy-sec"}}})).await;
        let made = crate::support::wait_for(&deployments, "legacy", "the second Postgres's Deployment", crate::support::DEFAULT_TIMEOUT, |d: Option<&Deployment>| d.is_some()).await;
        let pod = made.spec.and_then(|s| s.template.spec).unwrap_or_default();
        let non_root = pod.security_context.and_then(|c| c.run_as_non_root);
        assert_eq!(non_root, Some(true), "a tenant's Secret chose the Go layout");
        let policies = Api::<k8s_openapi::api::networking::v1::NetworkPolicy>::namespaced(client.clone(), &ns);
        crate::support::wait_for(&policies, "legacy", "the second Postgres's NetworkPolicy", crate::support::DEFAULT_TIMEOUT, |p: Option<&k8s_openapi::api::networking::v1::NetworkPolicy>| p.is_some()).await;

        // The same tier in the operator namespace: refused, naming the field.
        apply_config_map(&client, &ops_for_test, "cloud-resources-openshift-strategies", tiers).await;
        let pgs = Api::<cloud_resource_operator::api::Postgres>::namespaced(tenant.clone(), &ns);
        let refused = wait_phase(&pgs, "pg", Phase::Failed).await;
        let message = refused.message();
        assert!(message.contains("strategy.deploymentSpec.template.spec.hostNetwork") && message.contains("from the tier's strategy.deploymentSpec"), "{message}");
        let pod = deployments.get("pg").await.unwrap_or_else(|e| panic!("{e}")).spec.and_then(|s| s.template.spec).unwrap_or_default();
        assert_ne!(pod.host_network, Some(true), "the refused tier reached the Deployment");
    })
    .await;
    delete_namespaces(admin, &[ops]).await;
}

/// Watching several namespaces, with the defaults a platform engineer
/// installs: a tenant's own `cloud-resource-config` is not read.
#[tokio::test]
async fn watching_several_namespaces_a_tenants_own_cloud_resource_config_is_not_read_by_default() {
    let admin = TestEnv::load().client().await;
    let other = create_namespace(&admin, "nsconf-other").await;
    let (watched, operator_namespace) =
        (other.clone(), create_namespace(&admin, "nsconf-ops").await);
    let ops = operator_namespace.clone();
    let adjust = move |l: &mut crate::support::Launch| {
        l.operator_namespace = Some(operator_namespace);
        // Appended to the launch's own --watch-namespaces: two namespaces.
        l.extra_args.push(format!("--watch-namespaces={watched}"));
    };
    with_operator_launched("nsconfmany", adjust, |client, ns, op| async move {
        a_tenants_mapping_is_not_read(&client, &ns).await;
        assert!(
            op.logs()
                .contains("namespace-level cloud-resource-config not read"),
            "the choice is not logged"
        );
    })
    .await;
    delete_namespaces(admin, &[other, ops]).await;
}

/// A Service a person made, named like a new Postgres: the Postgres fails
/// naming it, and neither creating nor deleting the Postgres changes it.
#[tokio::test]
async fn an_object_the_operator_did_not_make_is_never_overwritten_or_deleted() {
    use k8s_openapi::api::core::v1::Service;
    with_operator("notours", |client, ns, _op| async move {
        let services = Api::<Service>::namespaced(client.clone(), &ns);
        let theirs: Service = create_json(
            &client,
            &ns,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                   "spec": {"ports": [{"port": 8080}], "selector": {"app": "web"}}}),
        )
        .await;
        let (tenant, pgs) = tenants_web_postgres(&client, &ns, "workshop").await;
        let failed = wait_phase(&pgs, "web", Phase::Failed).await;
        assert!(failed.message().contains(&format!("Service {ns}/web exists and was not made for Postgres web")), "{}", failed.message());
        let unchanged = |s: &Service| (s.metadata.resource_version.clone(), s.spec.clone());
        let live = services.get("web").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(unchanged(&live), unchanged(&theirs), "the person's Service was changed");
        pgs.delete("web", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&pgs, "web", crate::support::DEFAULT_TIMEOUT).await;
        let live = services.get("web").await.unwrap_or_else(|e| panic!("the person's Service was deleted: {e}"));
        assert_eq!(unchanged(&live), unchanged(&theirs));

        // A PVC with nothing on it, as the Go operator left its volumes but
        // also as anyone makes one: never taken (a deleted CR would take it
        // along) until a person says it is the Go operator's.
        use k8s_openapi::api::core::v1::PersistentVolumeClaim;
        let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        let volume: PersistentVolumeClaim = create_json(&client, &ns, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "vol"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
        let _: cloud_resource_operator::api::Redis = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "vol"},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "vol-cache"}}}))
        .await;
        let caches = Api::<cloud_resource_operator::api::Redis>::namespaced(tenant.clone(), &ns);
        let failed = wait_phase(&caches, "vol", Phase::Failed).await.message();
        assert!(
            failed.contains(&format!("PersistentVolumeClaim {ns}/vol exists and was not made for Redis vol"))
                && failed.contains("annotate it cro.integreatly.org/layout=go-operator"),
            "{failed}"
        );
        caches.delete("vol", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&caches, "vol", crate::support::DEFAULT_TIMEOUT).await;
        let live = claims.get("vol").await.unwrap_or_else(|e| panic!("the person's PVC was deleted: {e}"));
        // The test environment binds claims (volumeName, bind annotations);
        // nothing of the operator's may be on it.
        let set = |c: &PersistentVolumeClaim| {
            let m = &c.metadata;
            let layout = m.annotations.as_ref().and_then(|a| a.get("cro.integreatly.org/layout")).cloned();
            let requests = c.spec.as_ref().and_then(|s| s.resources.clone());
            (m.labels.clone(), m.owner_references.clone(), layout, requests)
        };
        assert_eq!(set(&live), set(&volume), "the person's PVC was changed");
    })
    .await;
}

/// The RDS master credentials live in `<name>-aws-rds-credentials`: a
/// Secret of that name that another workload owns is neither read (its
/// values would become the database's password), overwritten nor deleted.
#[tokio::test]
async fn a_credentials_secret_the_operator_did_not_make_is_left_alone() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    with_operator("notours", |client, ns, _op| async move {
        let owner: ConfigMap = create_json(
            &client,
            &ns,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other-app"}}),
        )
        .await;
        let uid = owner.metadata.uid.clone().unwrap_or_default();
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let theirs: Secret = create_json(
            &client,
            &ns,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "web-aws-rds-credentials", "labels": {"app": "other"},
                                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "other-app", "uid": uid}]},
                   "stringData": {"user": "other", "password": "theirs-not-yours"}}),
        )
        .await;
        let (_, pgs) = tenants_web_postgres(&client, &ns, "managed").await;
        let failed = wait_phase(&pgs, "web", Phase::Failed).await;
        assert!(
            failed.message().contains(&format!("Secret {ns}/web-aws-rds-credentials exists and was not made for Postgres {ns}/web")),
            "{}",
            failed.message()
        );
        let version = |s: &Secret| s.metadata.resource_version.clone();
        let live = secrets.get("web-aws-rds-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(version(&live), version(&theirs), "their Secret was changed");
        pgs.delete("web", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&pgs, "web", crate::support::DEFAULT_TIMEOUT).await;
        let live = secrets
            .get("web-aws-rds-credentials")
            .await
            .unwrap_or_else(|e| panic!("their Secret was deleted: {e}"));
        assert_eq!(version(&live), version(&theirs));
    })
    .await;
}

/// The Go operator's identifiers drop '-': `<ns>/db` and `<ns minus its
/// last letter>/<that letter>db` share one. A tenant who picks such a
/// namespace and name never reaches the other's database or SES user:
/// claiming the shared identifier in the annotation fails naming the other
/// namespace; without it their CRs get resources of their own, under
/// separate identifiers; deleting them leaves the other's resources and
/// keys, and nothing of the other's is written.
#[tokio::test]
async fn a_colliding_identifier_in_another_namespace_reaches_nothing() {
    use cloud_resource_operator::api::{Postgres, SMTPCredentialSet};
    use cro_provider_api::{IdentifierRules, cloud_identifier, separate_identifier};
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};

    // The attacker's namespace collides with the victim's (the operator's
    // test namespace), and is watched too.
    let adjust = |l: &mut crate::support::Launch| {
        let attacker = colliding(&l.namespace);
        l.extra_args.push(format!("--watch-namespaces={attacker}"));
    };
    with_operator_launched("tcoll", adjust, |client, ns, _op| async move {
        let attacker = colliding(&ns);
        let last = &ns[ns.len() - 1..];
        // The second team acts through its own token, with edit rights on
        // the operator's CRs in its namespace only.
        let tenant = tenants_namespace(&client, &attacker).await;
        let cr = |kind: &str, name: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}});
        let (pg_name, mail_name) = (format!("{last}db"), format!("{last}mail"));
        let id = cloud_identifier("testcluster", &ns, "db");
        assert_eq!(id, cloud_identifier("testcluster", &attacker, &pg_name));
        let ses_user = |id: &str| IdentifierRules::IamUser.conform(&format!("{id}-ses"));
        let user = ses_user(&cloud_identifier("testcluster", &ns, "mail"));

        let _: Postgres = create_json(&client, &ns, cr("Postgres", "db")).await;
        let _: SMTPCredentialSet = create_json(&client, &ns, cr("SMTPCredentialSet", "mail")).await;
        wait_phase(&Api::<Postgres>::namespaced(client.clone(), &ns), "db", Phase::Complete).await;
        wait_phase(&Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns), "mail", Phase::Complete).await;
        let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
        let keys = |user: String| {
            let iam = iam.clone();
            async move {
                let listed = iam.list_access_keys().user_name(&user).send().await.unwrap_or_else(|e| panic!("{user}: {e:?}"));
                listed.access_key_metadata().iter().filter_map(|k| k.access_key_id().map(str::to_string)).collect::<Vec<_>>()
            }
        };
        let victim_keys = keys(user.clone()).await;
        let since = crate::support::aws_requests().len();

        // Claimed in the annotation: refused, naming whose it is.
        let pgs = Api::<Postgres>::namespaced(tenant.clone(), &attacker);
        let mut claiming = cr("Postgres", &pg_name);
        claiming["metadata"]["annotations"] = json!({"resourceIdentifier": id, "integreatly.org/rotate-credentials": "now"});
        let _: Postgres = create_json(&tenant, &attacker, claiming).await;
        let failed = wait_phase(&pgs, &pg_name, Phase::Failed).await.message();
        // Whose it is stays unsaid: the victim's namespace is not named.
        assert!(failed.contains("was made for a CR of another namespace") && !failed.contains(ns.as_str()), "{failed}");

        // Without the annotation, and for the SES user: resources of their own.
        let unclaim = json!({"metadata": {"annotations": {"resourceIdentifier": null}}});
        pgs.patch(&pg_name, &PatchParams::default(), &Patch::Merge(&unclaim)).await.unwrap_or_else(|e| panic!("{e}"));
        let smtps = Api::<SMTPCredentialSet>::namespaced(tenant.clone(), &attacker);
        let _: SMTPCredentialSet = create_json(&tenant, &attacker, cr("SMTPCredentialSet", &mail_name)).await;
        let own_pg = wait_phase(&pgs, &pg_name, Phase::Complete).await;
        let own_mail = wait_phase(&smtps, &mail_name, Phase::Complete).await;
        let recorded = |annotations: Option<&std::collections::BTreeMap<String, String>>| annotations.and_then(|a| a.get("resourceIdentifier")).cloned();
        let own_id = separate_identifier("testcluster", &attacker, &pg_name);
        assert_eq!(recorded(own_pg.metadata.annotations.as_ref()).as_deref(), Some(own_id.as_str()));
        let own_mail_id = separate_identifier("testcluster", &attacker, &mail_name);
        assert_eq!(recorded(own_mail.metadata.annotations.as_ref()).as_deref(), Some(own_mail_id.as_str()));
        assert_eq!(keys(ses_user(&own_mail_id)).await.len(), 1, "the second tenant's own SES user has its key");

        pgs.delete(&pg_name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        smtps.delete(&mail_name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&pgs, &pg_name, crate::support::DEFAULT_TIMEOUT).await;
        crate::support::wait_deleted(&smtps, &mail_name, crate::support::DEFAULT_TIMEOUT).await;

        // Nothing of the victim's was written (parameters naming exactly its
        // instance or user): no password, key, user or instance change.
        let (quoted_id, quoted_user) = (format!("\"{id}\""), format!("\"{user}\""));
        let writes: Vec<String> = crate::support::aws_requests()
            .into_iter()
            .skip(since)
            .filter(|r| { let p = r["params"].to_string(); p.contains(&quoted_id) || p.contains(&quoted_user) })
            .filter_map(|r| r["action"].as_str().map(str::to_string))
            .filter(|a| ["Create", "Modify", "Delete", "Put", "Tag", "Add", "Update"].iter().any(|w| a.starts_with(w)))
            .collect();
        assert_eq!(writes, Vec::<String>::new(), "AWS writes against the victim's resources");
        assert_eq!(keys(user.clone()).await, victim_keys);
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let db = rds.describe_db_instances().db_instance_identifier(&id).send().await.unwrap_or_else(|e| panic!("the victim's instance {id}: {e:?}"));
        assert_eq!(db.db_instances().first().and_then(|d| d.db_instance_status()), Some("available"));
        let _ = Api::<Namespace>::all(client.clone()).delete(&attacker, &Default::default()).await;
    })
    .await;
}

/// A tier bounds what its CRs may ask for: snapshot frequency and
/// retention, and size. A CR asking for more fails naming the limit and
/// the tier, and completes once it asks for what the tier allows.
#[tokio::test]
async fn a_tier_bounds_snapshot_frequency_retention_and_size() {
    use cloud_resource_operator::api::Redis;
    use kube::api::{Patch, PatchParams};
    with_operator("limits", |client, ns, _op| async move {
        let tiers = json!({"redis": json!({"limited": {
            "minSnapshotFrequency": "1d", "maxSnapshotRetention": "7d", "allowedSizes": ["small"]}}).to_string()});
        apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", tiers).await;
        let tenant = crate::support::tenant_client(&client, &ns).await;
        let redis = Api::<Redis>::namespaced(tenant.clone(), &ns);
        let _: Redis = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"},
            "spec": {"type": "workshop", "tier": "limited", "secretRef": {"name": "cache-sec"}, "snapshotFrequency": "1h", "snapshotRetention": "1d"}}))
        .await;
        let set = |spec: serde_json::Value| {
            let redis = redis.clone();
            async move {
                redis.patch("cache", &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await.unwrap_or_else(|e| panic!("{e}"));
            }
        };
        let failed_with = |needle: String| {
            let redis = redis.clone();
            async move {
                let failed = wait_for_message(&redis, &needle).await;
                assert!(failed.contains("tier \"limited\" of ConfigMap cloud-resources-openshift-strategies key \"redis\""), "{failed}");
            }
        };
        failed_with("spec.snapshotFrequency 1h is more often than the tier allows (minSnapshotFrequency 1d)".into()).await;
        set(json!({"snapshotFrequency": "1d", "snapshotRetention": "30d"})).await;
        failed_with("spec.snapshotRetention 30d is longer than the tier allows (maxSnapshotRetention 7d)".into()).await;
        set(json!({"snapshotRetention": "7d", "size": "huge"})).await;
        failed_with("spec.size huge is not one the tier allows (allowedSizes: small)".into()).await;
        set(json!({"size": "small"})).await;
        wait_phase(&redis, "cache", Phase::Complete).await;
    })
    .await;
}

/// A tenant asks for more manual snapshots than its tier allows: the ones
/// beyond `maxManualSnapshots` are `failed` naming the limit, and one is
/// taken once an earlier one is deleted (each is a manual RDS snapshot, of
/// which the account has a quota other teams share).
#[tokio::test]
async fn a_tier_bounds_the_manual_snapshots_of_a_namespace() {
    use cloud_resource_operator::api::{Postgres, PostgresSnapshot};
    with_operator("snapbound", |client, ns, _op| async move {
        let tiers = json!({"development": {"maxManualSnapshots": 1, "deleteStrategy": {"SkipFinalSnapshot": true}}});
        crate::aws::aws_strategies_for(&client, &ns, "postgres", tiers).await;
        let tenant = crate::support::tenant_client(&client, &ns).await;
        crate::aws::create_postgres(&tenant, &ns, "db", json!({})).await;
        let db = wait_phase(&Api::<Postgres>::namespaced(tenant.clone(), &ns), "db", Phase::Complete).await;
        let uid = db.metadata.uid.clone().unwrap_or_default();
        let snaps = Api::<PostgresSnapshot>::namespaced(tenant.clone(), &ns);
        for name in ["first", "second"] {
            // The second wears a schedule's labels (anyone may write them):
            // it is still a manual snapshot.
            let labels = match name {
                "second" => json!({"integreatly.org/scheduled-for-uid": uid, "integreatly.org/snapshot-period": "0"}),
                _ => json!({}),
            };
            let _: PostgresSnapshot = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
                "metadata": {"name": name, "labels": labels}, "spec": {"resourceName": "db"}}))
            .await;
            // In creation order: the first is the one admitted.
            if name == "first" {
                wait_phase(&snaps, "first", Phase::Complete).await;
            }
        }
        let held = wait_phase(&snaps, "second", Phase::Failed).await.message();
        assert!(
            held.contains("holds 1 manual PostgresSnapshots made before this one, the most tier \"development\" allows (maxManualSnapshots 1 in ConfigMap cloud-resources-aws-strategies)"),
            "{held}"
        );
        snaps.delete("first", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&snaps, "first", crate::support::DEFAULT_TIMEOUT).await;
        let nudge = kube::api::Patch::Merge(json!({"metadata": {"annotations": {"nudge": "1"}}}));
        snaps.patch("second", &kube::api::PatchParams::default(), &nudge).await.unwrap_or_else(|e| panic!("{e}"));
        let second = wait_phase(&snaps, "second", Phase::Complete).await;
        let kept = second.status.and_then(|s| s.snapshot_id).unwrap_or_default();

        // Deleting a CR whose snapshot stays in the cloud (skipDelete)
        // frees no room: the kept snapshot still counts.
        let skip = kube::api::Patch::Merge(json!({"spec": {"skipDelete": true}}));
        snaps.patch("second", &kube::api::PatchParams::default(), &skip).await.unwrap_or_else(|e| panic!("{e}"));
        snaps.delete("second", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&snaps, "second", crate::support::DEFAULT_TIMEOUT).await;
        let rds = crate::aws::rds().await;
        let listed = rds.describe_db_snapshots().db_snapshot_identifier(&kept).send().await;
        assert_eq!(listed.map(|l| l.db_snapshots().len()).unwrap_or_default(), 1, "{kept} was deleted");
        let _: PostgresSnapshot = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
            "metadata": {"name": "third"}, "spec": {"resourceName": "db"}}))
        .await;
        let held = wait_phase(&snaps, "third", Phase::Failed).await.message();
        assert!(held.contains("holds 1 manual PostgresSnapshots made before this one (1 of them kept in the cloud after their CR was deleted"), "{held}");
    })
    .await;
}

/// The tenant of `ns`, and its Postgres `web` of type `deployment_type`
/// (secretRef `web-db`) created through its own token.
async fn tenants_web_postgres(
    client: &kube::Client,
    ns: &str,
    deployment_type: &str,
) -> (kube::Client, Api<cloud_resource_operator::api::Postgres>) {
    let tenant = crate::support::tenant_client(client, ns).await;
    let _: cloud_resource_operator::api::Postgres = create_json(
        &tenant,
        ns,
        json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "web"},
               "spec": {"type": deployment_type, "tier": "development", "secretRef": {"name": "web-db"}}}),
    )
    .await;
    let pgs = Api::namespaced(tenant.clone(), ns);
    (tenant, pgs)
}

/// Waits for a failed CR whose message contains `needle`; its message.
async fn wait_for_message(api: &Api<cloud_resource_operator::api::Redis>, needle: &str) -> String {
    let wanted = needle.to_string();
    let found = crate::support::wait_for(
        api,
        "cache",
        "the limit's message",
        crate::support::DEFAULT_TIMEOUT,
        move |o: Option<&cloud_resource_operator::api::Redis>| {
            o.is_some_and(|o| o.phase() == Some(Phase::Failed) && o.message().contains(&wanted))
        },
    )
    .await;
    found.message()
}

/// Another team's database and bucket claimed through the
/// `resourceIdentifier` annotation: for their password (with
/// `integreatly.org/rotate-credentials`), for a key of their IAM user, and
/// quietly through `skipCreate`, a snapshot and a clone of it. Every CR
/// fails naming the annotation, deleting them deletes nothing of the
/// victim's, and reading the victim's Secret directly is forbidden.
#[tokio::test]
async fn claiming_another_teams_resources_in_the_annotation_reaches_nothing() {
    use cloud_resource_operator::api::{Postgres, PostgresSnapshot};
    use cro_provider_api::cloud_identifier;
    use k8s_openapi::api::core::v1::{Namespace, Secret};

    let attacker_of = |victim: &str| format!("{victim}-x");
    let adjust = move |l: &mut crate::support::Launch| {
        let attacker = attacker_of(&l.namespace);
        l.extra_args.push(format!("--watch-namespaces={attacker}"));
    };
    with_operator_launched("tclaim", adjust, |client, ns, _op| async move {
        let attacker = attacker_of(&ns);
        let tenant = tenants_namespace(&client, &attacker).await;
        let cr = |kind: &str, name: &str, annotations: serde_json::Value, spec: serde_json::Value| {
            let mut spec_with = json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
            if let Some(m) = spec_with.as_object_mut() {
                m.extend(spec.as_object().cloned().unwrap_or_default());
            }
            json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name, "annotations": annotations}, "spec": spec_with})
        };

        // The victim's database and bucket.
        let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", json!({}), json!({}))).await;
        blob(&client, &ns, "files", "managed", "development").await;
        wait_phase(&Api::<Postgres>::namespaced(client.clone(), &ns), "db", Phase::Complete).await;
        wait_phase(&Api::<BlobStorage>::namespaced(client.clone(), &ns), "files", Phase::Complete).await;
        let (db, bucket) = (cloud_identifier("testcluster", &ns, "db"), cloud_identifier("testcluster", &ns, "files"));
        let passwords = crate::support::passwords_set(&db).len();
        let since = crate::support::aws_requests().len();

        let claim = |id: &str| json!({"resourceIdentifier": id, "integreatly.org/rotate-credentials": "now"});
        let _: Postgres = create_json(&tenant, &attacker, cr("Postgres", "thief", claim(&db), json!({}))).await;
        let _: BlobStorage = create_json(&tenant, &attacker, cr("BlobStorage", "loot", claim(&bucket), json!({}))).await;
        let _: Postgres = create_json(&tenant, &attacker, cr("Postgres", "quiet", json!({"resourceIdentifier": db}), json!({"skipCreate": true}))).await;
        let _: PostgresSnapshot = create_json(&tenant, &attacker, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
            "metadata": {"name": "grab"}, "spec": {"resourceName": "quiet"}})).await;
        let _: Postgres = create_json(&tenant, &attacker, cr("Postgres", "copy", json!({}), json!({"restoreFromSnapshot": "grab"}))).await;

        let pgs = Api::<Postgres>::namespaced(tenant.clone(), &attacker);
        let names_annotation = |id: &str| format!("annotation resourceIdentifier \"{id}\"");
        let failed = wait_phase(&pgs, "thief", Phase::Failed).await.message();
        assert!(failed.contains(&names_annotation(&db)), "{failed}");
        // Paused, it does nothing at all, and its snapshot waits for it.
        wait_phase(&pgs, "quiet", Phase::Paused).await;
        let snaps = Api::<PostgresSnapshot>::namespaced(tenant.clone(), &attacker);
        let waiting = |o: Option<&PostgresSnapshot>| o.is_some_and(|o| o.phase() == Some(Phase::InProgress) && o.message().contains("\"quiet\" to be complete"));
        crate::support::wait_for(&snaps, "grab", "the snapshot waiting for quiet", crate::support::DEFAULT_TIMEOUT, waiting).await;
        // Unpaused, it fails on the annotation, so it never completes and
        // the snapshot is never taken; the clone never has one to copy.
        let unpause = json!({"spec": {"skipCreate": false}});
        pgs.patch("quiet", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&unpause)).await.unwrap_or_else(|e| panic!("{e}"));
        let failed = wait_phase(&pgs, "quiet", Phase::Failed).await.message();
        assert!(failed.contains(&names_annotation(&db)), "{failed}");
        let blobs = Api::<BlobStorage>::namespaced(tenant.clone(), &attacker);
        let failed = wait_phase(&blobs, "loot", Phase::Failed).await.message();
        assert!(failed.contains(&names_annotation(&bucket)), "{failed}");
        let grab = snaps.get("grab").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(grab.phase(), Some(Phase::InProgress), "{}", grab.message());
        let copy = pgs.get("copy").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(copy.phase() != Some(Phase::Complete) && copy.message().contains("grab"), "{:?}: {}", copy.phase(), copy.message());

        // Straight at the victim's Secret: the tenant's RBAC says no.
        let stolen = Api::<Secret>::namespaced(tenant.clone(), &ns).get("db-sec").await;
        assert!(matches!(&stolen, Err(kube::Error::Api(e)) if e.code == 403), "{stolen:?}");

        for name in ["thief", "quiet", "copy"] {
            pgs.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        blobs.delete("loot", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        snaps.delete("grab", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        for name in ["thief", "quiet", "copy"] {
            crate::support::wait_deleted(&pgs, name, crate::support::DEFAULT_TIMEOUT).await;
        }
        crate::support::wait_deleted(&blobs, "loot", crate::support::DEFAULT_TIMEOUT).await;
        crate::support::wait_deleted(&snaps, "grab", crate::support::DEFAULT_TIMEOUT).await;

        // No AWS write named the victim's instance or IAM user (S3's REST
        // calls are not in the log: the bucket is checked below).
        let (quoted_db, quoted_bucket) = (format!("\"{db}\""), format!("\"{bucket}\""));
        let writes: Vec<String> = crate::support::aws_requests()
            .into_iter()
            .skip(since)
            .filter(|r| { let p = r["params"].to_string(); p.contains(&quoted_db) || p.contains(&quoted_bucket) })
            .filter_map(|r| r["action"].as_str().map(str::to_string))
            .filter(|a| !a.starts_with("Describe") && !a.starts_with("List") && !a.starts_with("Get") && !a.starts_with("Head"))
            .collect();
        assert_eq!(writes, Vec::<String>::new(), "AWS writes against the victim's resources");
        assert_eq!(crate::support::passwords_set(&db).len(), passwords, "the victim's password was reset");
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let live = rds.describe_db_instances().db_instance_identifier(&db).send().await.unwrap_or_else(|e| panic!("the victim's instance {db}: {e:?}"));
        let live = live.db_instances().first().cloned().unwrap_or_else(|| panic!("no instance {db}"));
        assert_eq!((live.db_instance_status(), live.deletion_protection()), (Some("available"), Some(true)));
        let s3 = aws_sdk_s3::Client::new(&TestEnv::load().aws_config().await);
        s3.head_bucket().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("the victim's bucket {bucket}: {e:?}"));
        wait_phase(&Api::<Postgres>::namespaced(client.clone(), &ns), "db", Phase::Complete).await;

        // The API server saw the tenant act in its own namespace only, and
        // refused the one request outside it.
        let user = format!("system:serviceaccount:{attacker}:tenant");
        let outside: Vec<_> = crate::support::audited_requests_of(&user).into_iter().filter(|r| r.namespace != attacker).collect();
        assert!(!outside.is_empty() && outside.iter().all(|r| r.code == 403), "{outside:?}");
        let _ = Api::<Namespace>::all(client.clone()).delete(&attacker, &Default::default()).await;
    })
    .await;
}

/// The snapshot hole (issue #43): a tenant whose Postgres shares the Go
/// naming's identifier with another namespace's (`<ns minus its last
/// letter>/<that letter>db` against `<ns>/db`) writes the other's
/// identifier into its annotation and removes it, over and over, while
/// creating PostgresSnapshots and a clone of one. Every snapshot is of the
/// tenant's own instance: none of the victim's exists, and no snapshot or
/// restore request names it.
#[tokio::test]
async fn a_tenant_flipping_its_annotation_never_snapshots_another_namespaces_database() {
    use cloud_resource_operator::api::{Postgres, PostgresSnapshot};
    use cro_provider_api::{cloud_identifier, separate_identifier};
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};

    let adjust = |l: &mut crate::support::Launch| {
        let attacker = colliding(&l.namespace);
        l.extra_args.push(format!("--watch-namespaces={attacker}"));
    };
    with_operator_launched("tsnap", adjust, |client, ns, _op| async move {
        let attacker = colliding(&ns);
        let last = &ns[ns.len() - 1..];
        let tenant = tenants_namespace(&client, &attacker).await;
        let postgres = |name: &str, spec: serde_json::Value| {
            let mut base = json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
            if let Some(m) = base.as_object_mut() {
                m.extend(spec.as_object().cloned().unwrap_or_default());
            }
            json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": name}, "spec": base})
        };
        let snapshot = |name: &str, of: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
            "metadata": {"name": name}, "spec": {"resourceName": of}});
        let pg_name = format!("{last}db");
        let victim = cloud_identifier("testcluster", &ns, "db");
        assert_eq!(victim, cloud_identifier("testcluster", &attacker, &pg_name), "the names collide");
        let own = separate_identifier("testcluster", &attacker, &pg_name);

        let _: Postgres = create_json(&client, &ns, postgres("db", json!({}))).await;
        wait_phase(&Api::<Postgres>::namespaced(client.clone(), &ns), "db", Phase::Complete).await;
        let pgs = Api::<Postgres>::namespaced(tenant.clone(), &attacker);
        let _: Postgres = create_json(&tenant, &attacker, postgres(&pg_name, json!({}))).await;
        wait_phase(&pgs, &pg_name, Phase::Complete).await;
        let since = crate::support::aws_requests().len();

        // The attack: each round claims the victim's identifier, asks for a
        // snapshot, then removes the annotation; a clone of the first.
        let annotate = |value: serde_json::Value| {
            let (pgs, pg_name) = (pgs.clone(), pg_name.clone());
            async move {
                let patch = json!({"metadata": {"annotations": {"resourceIdentifier": value}}});
                pgs.patch(&pg_name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_or_else(|e| panic!("{e}"));
            }
        };
        let rounds = 6;
        for i in 0..rounds {
            annotate(json!(victim)).await;
            let _: PostgresSnapshot = create_json(&tenant, &attacker, snapshot(&format!("grab-{i}"), &pg_name)).await;
            annotate(serde_json::Value::Null).await;
            annotate(serde_json::Value::Null).await;
        }
        let _: Postgres = create_json(&tenant, &attacker, postgres("copy", json!({"restoreFromSnapshot": "grab-0"}))).await;

        // The tenant's database records its own identifier again, and every
        // snapshot completes as a snapshot of it.
        let recorded = |o: Option<&Postgres>| o.and_then(|o| o.metadata.annotations.as_ref()?.get("resourceIdentifier").cloned());
        let own_recorded = own.clone();
        crate::support::wait_for(&pgs, &pg_name, "its own identifier recorded", crate::support::DEFAULT_TIMEOUT,
            move |o: Option<&Postgres>| recorded(o).as_deref() == Some(own_recorded.as_str())).await;
        let snaps = Api::<PostgresSnapshot>::namespaced(tenant.clone(), &attacker);
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        for i in 0..rounds {
            let name = format!("grab-{i}");
            let done = crate::support::wait_for(&snaps, &name, "phase complete", std::time::Duration::from_secs(180),
                |o: Option<&PostgresSnapshot>| o.and_then(crate::support::Phased::phase) == Some(Phase::Complete)).await;
            let id = done.status.and_then(|s| s.snapshot_id).unwrap_or_default();
            let taken = rds.describe_db_snapshots().db_snapshot_identifier(&id).send().await.unwrap_or_else(|e| panic!("{name}: {id}: {e:?}"));
            let source = taken.db_snapshots().first().and_then(|s| s.db_instance_identifier()).map(str::to_string);
            assert_eq!(source.as_deref(), Some(own.as_str()), "{name} ({id}) is a snapshot of the tenant's own instance");
        }
        let copies = wait_phase(&pgs, "copy", Phase::Complete).await;
        let copy_id = recorded(Some(&copies)).unwrap_or_default();

        // None of the victim's exists, and nothing asked for one.
        let victims = rds.describe_db_snapshots().db_instance_identifier(&victim).snapshot_type("manual").send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let victims: Vec<_> = victims.db_snapshots().iter().filter_map(|s| s.db_snapshot_identifier()).collect();
        assert_eq!(victims, Vec::<&str>::new(), "snapshots of the victim's instance {victim}");
        let quoted = format!("\"{victim}\"");
        let asked: Vec<String> = crate::support::aws_requests()
            .into_iter()
            .skip(since)
            .filter(|r| r["params"].to_string().contains(&quoted))
            .filter_map(|r| r["action"].as_str().map(str::to_string))
            .filter(|a| !a.starts_with("Describe") && !a.starts_with("List"))
            .collect();
        assert_eq!(asked, Vec::<String>::new(), "AWS writes naming the victim's instance");
        assert_ne!(copy_id, victim, "the clone is an instance of its own");

        for name in [pg_name.as_str(), "copy"] {
            pgs.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..rounds {
            snaps.delete(&format!("grab-{i}"), &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for name in [pg_name.as_str(), "copy"] {
            crate::support::wait_deleted(&pgs, name, std::time::Duration::from_secs(180)).await;
        }
        for i in 0..rounds {
            crate::support::wait_deleted(&snaps, &format!("grab-{i}"), crate::support::DEFAULT_TIMEOUT).await;
        }
        let _ = Api::<Namespace>::all(client.clone()).delete(&attacker, &Default::default()).await;
    })
    .await;
}

/// A snapshot found under the identifier a PostgresSnapshot recorded counts
/// only when its tags say it was taken for that CR: one put there by
/// someone else (tagged for another namespace, or for another snapshot CR
/// of the same namespace) fails the CR, is never reported complete, and is
/// neither used nor deleted, not even when the CR is deleted as its
/// message advises (an Event says what was kept).
#[tokio::test]
async fn a_snapshot_found_under_the_recorded_identifier_must_be_the_crs_own() {
    use cloud_resource_operator::api::{Postgres, PostgresSnapshot};
    use kube::api::{Patch, PatchParams};

    with_operator_launched("tfound", |_| {}, |client, ns, _op| async move {
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "db-sec"}, "skipCreate": true}})).await;
        for name in ["snap", "snap2"] {
            let _: PostgresSnapshot = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
                "metadata": {"name": name}, "spec": {"resourceName": "db"}})).await;
        }
        let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        // The identifiers are recorded while the database is paused.
        let recorded = |name: &'static str| {
            let snaps = snaps.clone();
            async move {
                let o = crate::support::wait_for(&snaps, name, "a recorded snapshotID", crate::support::DEFAULT_TIMEOUT,
                    |o: Option<&PostgresSnapshot>| o.and_then(|o| o.status.as_ref()?.snapshot_id.as_ref()).is_some_and(|id| !id.is_empty())).await;
                (o.status.and_then(|s| s.snapshot_id).unwrap_or_default(), o.metadata.uid.unwrap_or_default())
            }
        };
        let ((id, uid), (id2, _)) = (recorded("snap").await, recorded("snap2").await);
        assert!(id.len() > 40, "a hash of the CR's UID follows the Go naming: {id} ({uid})");

        // Someone else's snapshot under that identifier, of another instance.
        let rds = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let other = format!("other-{}", &id[..10]);
        rds.create_db_instance().db_instance_identifier(&other).engine("postgres").db_instance_class("db.t3.micro")
            .allocated_storage(20).master_username("x").master_user_password("password1234")
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let tag = |k: &str, v: &str| aws_sdk_rds::types::Tag::builder().key(k).value(v).build();
        rds.create_db_snapshot().db_instance_identifier(&other).db_snapshot_identifier(&id)
            .tags(tag("integreatly.org/clusterID", "testcluster")).tags(tag("integreatly.org/resource-namespace", "elsewhere"))
            .tags(tag("integreatly.org/resource-name", "snap"))
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));
        // Another snapshot CR's of this namespace under snap2's identifier.
        rds.create_db_snapshot().db_instance_identifier(&other).db_snapshot_identifier(&id2)
            .tags(tag("integreatly.org/clusterID", "testcluster")).tags(tag("integreatly.org/resource-namespace", &ns))
            .tags(tag("integreatly.org/resource-name", "snap3"))
            .send().await.unwrap_or_else(|e| panic!("{e:?}"));

        let unpause = json!({"spec": {"skipCreate": false}});
        Api::<Postgres>::namespaced(client.clone(), &ns).patch("db", &PatchParams::default(), &Patch::Merge(&unpause)).await.unwrap_or_else(|e| panic!("{e}"));
        let failed = wait_phase(&snaps, "snap", Phase::Failed).await.message();
        assert!(failed.contains(&format!("snapshot {id} exists but was not taken for this resource")) && !failed.contains("elsewhere"), "{failed}");
        let failed2 = wait_phase(&snaps, "snap2", Phase::Failed).await.message();
        assert!(failed2.contains(&format!("snapshot {id2} exists but was not taken for this resource")), "{failed2}");

        for (name, id) in [("snap", &id), ("snap2", &id2)] {
            snaps.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            crate::support::wait_deleted(&snaps, name, crate::support::DEFAULT_TIMEOUT).await;
            let kept = rds.describe_db_snapshots().db_snapshot_identifier(id).send().await;
            assert!(kept.is_ok_and(|o| o.db_snapshots().len() == 1), "the other's snapshot {id} is kept when {name} is deleted");
            let events = crate::support::events_in(&client, &ns).await;
            let said = events.iter().any(|e| e.reason.as_deref() == Some("Retained")
                && e.involved_object.name.as_deref() == Some(name)
                && e.message.as_deref().is_some_and(|m| m.contains(id.as_str()) && m.contains("left as it is")));
            assert!(said, "a Retained Event on {name} names {id}");
            let _ = rds.delete_db_snapshot().db_snapshot_identifier(id).send().await;
        }
        let _ = rds.delete_db_instance().db_instance_identifier(&other).skip_final_snapshot(true).send().await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        pgs.delete("db", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_deleted(&pgs, "db", std::time::Duration::from_secs(180)).await;
    })
    .await;
}

/// A tenant gives 100 Secrets of 0.9 MiB the label the operator's watch
/// selects (`app.kubernetes.io/managed-by=cloud-resource-operator`, which
/// anyone may set): the operator holds them as stubs, and its resident
/// memory grows by less than 40 MiB (held whole, they would take 90 MiB).
#[tokio::test]
async fn a_tenants_large_labelled_secrets_do_not_grow_the_operator() {
    use k8s_openapi::api::core::v1::Secret;
    with_operator("bigsecrets", |client, ns, op| async move {
        let tenant = crate::support::tenant_client(&client, &ns).await;
        blob(&tenant, &ns, "marker", "workshop", "development").await;
        let blobs = Api::<BlobStorage>::namespaced(tenant.clone(), &ns);
        wait_phase(&blobs, "marker", Phase::Complete).await;
        let before = op.rss_kib().unwrap_or_else(|| panic!("no VmRSS"));

        let secrets = Api::<Secret>::namespaced(tenant.clone(), &ns);
        let payload: String = (0..900 * 1024).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        for i in 0..100 {
            let _: Secret = create_json(
                &tenant,
                &ns,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("big-{i}"),
                       "labels": {"app.kubernetes.io/managed-by": "cloud-resource-operator"}},
                       "stringData": {"blob": payload}}),
            )
            .await;
        }
        // The watch delivers events in order: once it shows this edit of
        // the marker's Secret (the operator reconciles the marker for it),
        // it has shown the 100 before.
        let needle = format!("related object updated: Secret.v1./marker-sec.{ns}");
        let seen = op.logs().matches(&needle).count();
        let patch = json!({"metadata": {"labels": {"edited-by": "tenant"}}});
        secrets
            .patch("marker-sec", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + crate::support::DEFAULT_TIMEOUT;
        while op.logs().matches(&needle).count() <= seen {
            assert!(tokio::time::Instant::now() < deadline, "the operator never saw the edit of marker-sec");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let after = op.rss_kib().unwrap_or_else(|| panic!("no VmRSS"));
        let grown_mib = after.saturating_sub(before) as f64 / 1024.0;
        eprintln!("operator RSS {before} KiB before, {after} KiB after 100 labelled 0.9 MiB Secrets (+{grown_mib:.1} MiB)");
        assert!(grown_mib < 40.0, "the operator's memory grew by {grown_mib:.1} MiB");
        // The marker is still served: its Secret is the operator's to read.
        assert_eq!(blobs.get("marker").await.unwrap_or_else(|e| panic!("{e}")).phase(), Some(Phase::Complete));
    })
    .await;
}

/// A tenant turns its in-cluster Postgres's Service into an ExternalName
/// (a tenant may edit Services): the operator puts the ClusterIP Service
/// back, so the Secret's host leads to the database it promised, and the
/// operator's connection check dials nothing the tenant chose.
#[tokio::test]
async fn a_service_turned_into_an_alias_by_a_tenant_is_put_back() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Patch, PatchParams};
    with_operator("alias", |client, ns, _op| async move {
        let tenant = crate::support::tenant_client(&client, &ns).await;
        let _: cloud_resource_operator::api::Postgres = create_json(&tenant, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "db"}, "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}})).await;
        let pgs = Api::<cloud_resource_operator::api::Postgres>::namespaced(tenant.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        let services = Api::<Service>::namespaced(tenant.clone(), &ns);
        let alias = json!({"spec": {"type": "ExternalName", "externalName": "db.example.invalid", "clusterIP": null, "clusterIPs": null}});
        services.patch("db", &PatchParams::default(), &Patch::Merge(&alias)).await.unwrap_or_else(|e| panic!("the tenant's edit: {e}"));
        let kind = |s: Option<&Service>| s.and_then(|s| s.spec.as_ref()).and_then(|s| s.type_.clone());
        let back = crate::support::wait_for(&services, "db", "the ClusterIP Service back", crate::support::DEFAULT_TIMEOUT, move |s: Option<&Service>| {
            kind(s).as_deref() == Some("ClusterIP")
        })
        .await;
        // The tenant's externalName may stay behind: the API server keeps
        // it on a ClusterIP Service, and DNS serves a ClusterIP Service's
        // cluster IP whatever it says (only type ExternalName is an alias).
        let spec = back.spec.unwrap_or_default();
        assert!(spec.cluster_ip.is_some_and(|ip| !ip.is_empty() && ip != "None"), "no cluster IP");
        wait_phase(&pgs, "db", Phase::Complete).await;
    })
    .await;
}
