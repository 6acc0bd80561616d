//! On OpenShift the Go operator reads three things from the cluster's
//! `Infrastructure/cluster` (pkg/resources/config.go, tags.go): the cluster
//! ID (`status.infrastructureName`), the default AWS region
//! (`status.platformStatus.aws.region`) and user tags for every resource
//! (`status.platformStatus.aws.resourceTags`, which win over its own). This
//! installs that object — with an infrastructure name starting with a
//! digit, which AWS refuses at the start of RDS identifiers — and runs the
//! operator with neither `--cluster-id` nor a region.

use std::collections::BTreeMap;

use cloud_resource_operator::api::{BlobStorage, Phase, Postgres};
use cro_provider_api::{IdentifierRules, cloud_identifier};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    core::DynamicObject,
    discovery::ApiResource,
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, TestEnv, create_json, create_namespace, ensure_crds,
    wait_deleted, wait_phase,
};

const INFRA_NAME: &str = "4tu9x-qwert";
const REGION: &str = "us-west-2";

fn infrastructure_api(client: &Client) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "infrastructures"),
    )
}

/// A stand-in for OpenShift's Infrastructure CRD: cluster-scoped, with a
/// status subresource, fields as OpenShift's.
async fn install_infrastructure(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "infrastructures.config.openshift.io"},
        "spec": {"group": "config.openshift.io", "scope": "Cluster",
            "names": {"plural": "infrastructures", "singular": "infrastructure", "kind": "Infrastructure", "listKind": "InfrastructureList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crate::support::apply(&crds, &crd)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::timeout(
        DEFAULT_TIMEOUT,
        await_condition(
            crds,
            "infrastructures.config.openshift.io",
            conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap_or_else(|e| panic!("{e}"));
    let infra = infrastructure_api(client);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"}, "spec": {}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while let Err(e) = infra.create(&PostParams::default(), &obj).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "creating Infrastructure/cluster: {e}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let status = json!({"status": {"infrastructureName": INFRA_NAME, "platform": "AWS",
    "platformStatus": {"type": "AWS", "aws": {"region": REGION, "resourceTags": [
        {"key": "cost-center", "value": "42"},
        {"key": "integreatly.org/resource-type", "value": "from-infrastructure"}
    ]}}}});
    infra
        .patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

async fn uninstall_infrastructure(client: &Client) {
    let _ = infrastructure_api(client)
        .delete("cluster", &DeleteParams::default())
        .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds
        .delete(
            "infrastructures.config.openshift.io",
            &DeleteParams::default(),
        )
        .await;
    wait_deleted(
        &crds,
        "infrastructures.config.openshift.io",
        DEFAULT_TIMEOUT,
    )
    .await;
}

/// The cluster's VPC as the OpenShift installer leaves it in `REGION`
/// (once per test environment): subnets in two zones tagged
/// `kubernetes.io/cluster/<infrastructure name>`.
async fn installer_vpc(ec2: &aws_sdk_ec2::Client) {
    let tag = format!("kubernetes.io/cluster/{INFRA_NAME}");
    let filter = aws_sdk_ec2::types::Filter::builder()
        .name(format!("tag:{tag}"))
        .values("owned")
        .build();
    let found = ec2.describe_subnets().filters(filter).send().await;
    if !found
        .unwrap_or_else(|e| panic!("{e:?}"))
        .subnets()
        .is_empty()
    {
        return;
    }
    let vpc = ec2.create_vpc().cidr_block("10.110.0.0/16").send().await;
    let vpc = vpc.unwrap_or_else(|e| panic!("{e:?}"));
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default();
    for (i, zone) in ["us-west-2a", "us-west-2b"].iter().enumerate() {
        let tags = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::Subnet)
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key(&tag)
                    .value("owned")
                    .build(),
            )
            .build();
        ec2.create_subnet()
            .vpc_id(vpc)
            .cidr_block(format!("10.110.{}.0/20", 16 * i))
            .availability_zone(*zone)
            .tag_specifications(tags)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

#[tokio::test]
async fn cluster_id_region_and_tags_come_from_the_infrastructure() {
    crate::support::bounded(
        "cluster_id_region_and_tags_come_from_the_infrastructure",
        async move {
            let _serial = crate::SERIAL.lock().await;
            let client = TestEnv::load().client().await;
            ensure_crds(&client).await;
            install_infrastructure(&client).await;
            let result = tokio::spawn(scenario(client.clone())).await;
            uninstall_infrastructure(&client).await;
            if let Err(e) = result {
                std::panic::resume_unwind(e.into_panic());
            }
        },
    )
    .await;
}

async fn scenario(client: Client) {
    let ns = create_namespace(&client, "openshift").await;
    let op = Operator::launch(Launch {
        cluster_id: None,
        env_remove: vec!["AWS_REGION".into(), "AWS_DEFAULT_REGION".into()],
        ..Launch::new(&ns)
    })
    .await;
    let managed = |kind: &str, name: &str| {
        json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
               "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
    };
    // The OpenShift installer tags the cluster's subnets with the
    // infrastructure name: that is where databases are placed.
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(TestEnv::load().aws_endpoint_url)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "testing", "testing", None, None, "t",
        ))
        .load()
        .await;
    installer_vpc(&aws_sdk_ec2::Client::new(&config)).await;
    create_json::<Postgres>(&client, &ns, managed("Postgres", "db")).await;
    create_json::<BlobStorage>(&client, &ns, managed("BlobStorage", "blob")).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
    wait_phase(&pgs, "db", Phase::Complete).await;
    wait_phase(&blobs, "blob", Phase::Complete).await;

    // RDS needs a letter first: the Go identifier gets a `c`; S3 keeps it.
    let go_db = cloud_identifier(INFRA_NAME, &ns, "db");
    let db_id = IdentifierRules::RdsInstance.conform(&go_db);
    assert!(
        go_db.starts_with('4') && db_id.starts_with('c'),
        "{go_db} -> {db_id}"
    );
    let bucket = cloud_identifier(INFRA_NAME, &ns, "blob");
    let rds = aws_sdk_rds::Client::new(&config);
    let db = rds
        .describe_db_instances()
        .db_instance_identifier(&db_id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("no RDS instance {db_id} in {REGION}: {e:?}"));
    let tags: BTreeMap<String, String> = db
        .db_instances()
        .first()
        .map(|d| {
            d.tag_list()
                .iter()
                .map(|t| {
                    (
                        t.key().unwrap_or_default().to_string(),
                        t.value().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        tags.get("integreatly.org/clusterID").map(String::as_str),
        Some(INFRA_NAME),
        "{tags:?}"
    );
    assert_eq!(
        tags.get("cost-center").map(String::as_str),
        Some("42"),
        "{tags:?}"
    );
    assert_eq!(
        tags.get("red-hat-managed").map(String::as_str),
        Some("true"),
        "the Go operator's tag on OpenShift: {tags:?}"
    );
    assert_eq!(
        tags.get("integreatly.org/resource-type")
            .map(String::as_str),
        Some("from-infrastructure"),
        "the Infrastructure's tags win: {tags:?}"
    );
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let location = s3
        .get_bucket_location()
        .bucket(&bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("no bucket {bucket}: {e:?}"));
    assert_eq!(
        location.location_constraint().map(|l| l.as_str()),
        Some(REGION)
    );

    pgs.delete("db", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    blobs
        .delete("blob", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
    wait_deleted(&blobs, "blob", DEFAULT_TIMEOUT).await;
    op.stop().await;
    an_unreadable_infrastructure_stops_the_operator(&client, &ns).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
}

/// On OpenShift, an operator whose RBAC does not let it read the
/// Infrastructure (#24 item 9) stops with a message, rather than taking
/// the kube-system cluster ID and renaming every resource the Go operator
/// made: the Go operator fails there too (GetClusterID, pkg/resources/cluster.go).
async fn an_unreadable_infrastructure_stops_the_operator(client: &Client, ns: &str) {
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "no-rbac"}}))
            .unwrap_or_else(|e| panic!("{e}"));
    Api::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = crate::support::service_account_kubeconfig(client, ns, "no-rbac").await;
    let mut op = Operator::launch(Launch {
        cluster_id: None,
        kubeconfig: Some(kubeconfig),
        log_name: format!("operator-{ns}-no-rbac.log"),
        ..Launch::new(ns)
    })
    .await;
    let status = op.wait_exit(DEFAULT_TIMEOUT).await;
    let log = op.logs();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("may not get infrastructures.config.openshift.io")
            && log.contains("--cluster-id"),
        "{log}"
    );
}
