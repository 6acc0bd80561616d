//! What the provider is asked for a CR: its identifiers, owner, tags and
//! options (pure, from the CR and the operator's settings).

use std::{collections::BTreeMap, time::Duration};

use cro_provider_api::{
    Options, Owner, ResourceRequest, TagKeys, cloud_identifier, timestamped_identifier,
};
use kube::{Resource, ResourceExt};

use crate::{
    api::{
        ADOPT_ANNOTATION, APPROVE_PLAN_ANNOTATION, PRODUCT_NAME_LABEL, Phase,
        RESOURCE_IDENTIFIER_ANNOTATION,
    },
    config,
    controllers::kinds::ResourceCr,
    reconcile::{Context, Error, Settings},
};

/// Label whose value becomes the unprefixed `add-on-name` tag of RDS
/// instances and replication groups (the Go operator's
/// buildRDSTagCreateStrategy and its ElastiCache twin).
const ADDON_NAME_LABEL: &str = "addonName";

/// A non-empty annotation of `cr`.
pub(super) fn annotation<K: Resource>(cr: &K, key: &str) -> Option<String> {
    cr.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The cloud identifier `cr` recorded (annotation `resourceIdentifier`).
pub fn recorded_identifier<K: Resource>(cr: &K) -> Option<String> {
    annotation(cr, RESOURCE_IDENTIFIER_ANNOTATION)
}

/// The neutral description of `cr` handed to providers.
pub fn owner<K: Resource<DynamicType = ()>>(cr: &K) -> Owner {
    Owner {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: cr.meta().name.clone().unwrap_or_default(),
        uid: cr.meta().uid.clone().unwrap_or_default(),
    }
}

/// The tag that marks a cloud resource this cluster made.
fn owner_tag(settings: &Settings) -> (String, String) {
    (
        TagKeys::new(&settings.tag_key_prefix).owner,
        settings.cluster_id.clone(),
    )
}

/// The tag binding a cloud resource to the CR's namespace, written when
/// the resource is made (see `ResourceRequest::namespace_tag`).
pub fn namespace_tag(settings: &Settings, namespace: &str) -> (String, String) {
    (
        TagKeys::new(&settings.tag_key_prefix).namespace,
        namespace.to_string(),
    )
}

/// Tags for cloud resources (DESIGN §4).
pub fn tags<K: Resource<DynamicType = ()>>(
    settings: &Settings,
    cr: &K,
    deployment_type: &str,
) -> BTreeMap<String, String> {
    let p = &settings.tag_key_prefix;
    let mut tags = settings.extra_tags.clone();
    tags.extend([owner_tag(settings)]);
    tags.insert(format!("{p}resource-type"), deployment_type.to_string());
    tags.insert(
        TagKeys::new(p).name,
        cr.meta().name.clone().unwrap_or_default(),
    );
    if let Some(product) = cr
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(PRODUCT_NAME_LABEL))
    {
        tags.insert(format!("{p}product-name"), product.clone());
    }
    let addon = (cr.meta().labels.as_ref())
        .and_then(|l| l.get(ADDON_NAME_LABEL))
        .filter(|a| !a.is_empty());
    if let Some(addon) = addon
        && ["Postgres", "Redis"].contains(&K::kind(&()).as_ref())
    {
        tags.insert("add-on-name".into(), addon.clone());
    }
    // The Go operator's MergeTags(infraTags, defaultTags): the
    // Infrastructure's tags win (pkg/resources/tags.go).
    tags.extend(settings.infrastructure_tags.clone());
    tags
}

pub(super) fn secret_namespace<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<String, Error> {
    let ns = cr.namespace().unwrap_or_default();
    let wanted = cr
        .spec()
        .secret_ref
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| ns.clone());
    if wanted != ns && !ctx.settings.allow_cross_namespace_secrets {
        return Err(Error::Invalid(format!(
            "spec.secretRef.namespace {wanted:?} is not this {}'s namespace {ns:?}, and writing Secrets into other namespaces is disabled; remove spec.secretRef.namespace, or start the operator with --allow-cross-namespace-secrets",
            K::kind(&())
        )));
    }
    Ok(wanted)
}

/// How old a batched observation of a complete resource may be (never
/// older than the recheck interval). Resources whose rechecks fall within
/// it share one: at most one listing a minute per service, account and
/// region, so at most one call per resource and hour whatever their number
/// (≤ 60 listings of ⌈N/100⌉ pages for N resources).
const BATCHED_OBSERVATION_AGE: Duration = Duration::from_secs(60);

/// What the provider is asked for `cr` under `tier`.
pub fn request<K: ResourceCr>(cr: &K, settings: &Settings, tier: config::Tier) -> ResourceRequest {
    let ns = cr.namespace().unwrap_or_default();
    let name = cr.name_any();
    let spec = cr.spec();
    let recorded = recorded_identifier(cr);
    let namespace_tag = namespace_tag(settings, &ns);
    ResourceRequest {
        kind: K::KIND,
        // The provider acts on the recorded one only if it is this CR's own.
        identifier: cloud_identifier(&settings.cluster_id, &ns, &name),
        recorded_identifier: recorded,
        // Resolved from the snapshot CR by `provision`.
        restore_from_snapshot: None,
        final_snapshot_identifier: final_snapshot_identifier(cr, settings),
        namespace: ns,
        name,
        owner: owner(cr),
        tier: spec.tier.clone(),
        strategy: tier.strategy,
        network: tier.network,
        tags: tags(settings, cr, &spec.r#type),
        owner_tag: owner_tag(settings),
        namespace_tag,
        tag_keys: TagKeys::new(&settings.tag_key_prefix),
        options: Options {
            apply_immediately: spec.apply_immediately,
            maintenance_window: spec.maintenance_window,
            change_policy: tier.change_policy,
            approved_plan: annotation(cr, APPROVE_PLAN_ANNOTATION),
            approved_adoption: annotation(cr, ADOPT_ANNOTATION),
            size: spec.size.clone(),
            observed_within: (cr.status().and_then(|s| s.phase) == Some(Phase::Complete))
                .then(|| settings.recheck_interval.min(BATCHED_OBSERVATION_AGE)),
            recheck_interval: settings.recheck_interval,
            // Decided by `provision` (from what this process has seen).
            defer_unbatched: false,
            // Decided by `provision` (from status and the clock).
            rotate_credentials: None,
            rotation_grace: Duration::from_secs(tier.rotation_grace),
            complete_as_placeholder: cr.status().is_some_and(|s| {
                s.phase == Some(Phase::Complete) && s.version.as_deref().unwrap_or("").is_empty()
            }),
        },
    }
}

/// Once deletion started: `<clusterID>-<namespace>-<name>-<unix time>`
/// shortened, as the Go operator names final snapshots
/// (`BuildTimestampedInfraNameFromObject`, pkg/resources/config.go), with
/// the deletion's time rather than the clock's, so retries of one deletion
/// agree and another deletion of the same name never collides.
fn final_snapshot_identifier<K: ResourceCr>(cr: &K, settings: &Settings) -> Option<String> {
    let deleted = cr.meta().deletion_timestamp.as_ref()?;
    Some(timestamped_identifier(
        &settings.cluster_id,
        &cr.namespace().unwrap_or_default(),
        &cr.name_any(),
        &deleted.0.as_second().to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Postgres, ResourceTypeStatus};

    fn settings() -> Settings {
        Settings {
            operator_namespace: "cro".into(),
            watch_namespaces: Vec::new(),
            concurrency: 1,
            cluster_id: "prod-cluster".into(),
            tag_key_prefix: "integreatly.org/".into(),
            extra_tags: BTreeMap::from([("team".into(), "db".into())]),
            infrastructure_tags: BTreeMap::from([("team".into(), "infra".into())]),
            allow_cross_namespace_secrets: false,
            recheck_interval: Duration::from_secs(300),
            cloud_metrics_interval: Duration::from_secs(300),
            shard: Default::default(),
            namespace_config: false,
        }
    }

    fn postgres(annotations: serde_json::Value, status: Option<ResourceTypeStatus>) -> Postgres {
        let mut cr: Postgres = serde_json::from_value(serde_json::json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "orders", "namespace": "shop", "uid": "u-1",
                         "labels": {"productName": "orders-app"}, "annotations": annotations},
            "spec": {"type": "managed", "tier": "production",
                     "secretRef": {"name": "orders-db"}, "applyImmediately": true}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        cr.status = status;
        cr
    }

    /// The Go operator's `add-on-name` tag, from label `addonName`, on
    /// databases only (buildRDSTagCreateStrategy, provider_redis.go).
    #[test]
    fn an_addon_name_label_tags_databases() {
        let mut pg = postgres(serde_json::json!({}), None);
        pg.metadata
            .labels
            .get_or_insert_default()
            .insert("addonName".into(), "rhoam".into());
        let tagged = tags(&settings(), &pg, "managed");
        assert_eq!(tagged.get("add-on-name").map(String::as_str), Some("rhoam"));
        let mut blob: crate::api::BlobStorage = serde_json::from_value(serde_json::json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
            "metadata": {"name": "files", "namespace": "shop", "labels": {"addonName": "rhoam"}},
            "spec": {"type": "managed", "tier": "production", "secretRef": {"name": "s"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        blob.metadata.uid = Some("u-2".into());
        assert_eq!(tags(&settings(), &blob, "managed").get("add-on-name"), None);
    }

    #[test]
    fn a_request_carries_the_crs_identifier_owner_and_tags() {
        let req = request(
            &postgres(serde_json::json!({}), None),
            &settings(),
            config::Tier::default(),
        );
        assert_eq!(
            req.identifier,
            cloud_identifier("prod-cluster", "shop", "orders")
        );
        assert_eq!(req.recorded_identifier, None);
        assert_eq!(
            (req.owner.kind.as_str(), req.owner.uid.as_str()),
            ("Postgres", "u-1")
        );
        let tag = |k: &str| req.tags.get(&format!("integreatly.org/{k}")).cloned();
        assert_eq!(tag("clusterID").as_deref(), Some("prod-cluster"));
        assert_eq!(tag("resource-type").as_deref(), Some("managed"));
        assert_eq!(tag("resource-name").as_deref(), Some("orders"));
        assert_eq!(tag("product-name").as_deref(), Some("orders-app"));
        assert_eq!(req.tags.get("add-on-name"), None, "no addonName label");
        // The Infrastructure's tags win over the operator's, as in Go.
        assert_eq!(req.tags.get("team").map(String::as_str), Some("infra"));
        let namespace = (
            "integreatly.org/resource-namespace".to_string(),
            "shop".to_string(),
        );
        assert_eq!(req.namespace_tag, namespace);
        assert!(req.options.apply_immediately);
        assert_eq!(req.final_snapshot_identifier, None, "not deleting");
    }

    #[test]
    fn only_a_complete_cr_may_be_observed_from_a_batch() {
        let (settings, tier) = (settings(), config::Tier::default());
        let annotations = serde_json::json!({
            RESOURCE_IDENTIFIER_ANNOTATION: " recorded-id ",
            APPROVE_PLAN_ANNOTATION: "",
        });
        let fresh = request(
            &postgres(annotations.clone(), None),
            &settings,
            tier.clone(),
        );
        assert_eq!(fresh.options.observed_within, None);
        // Annotations are trimmed; an empty one is unset.
        assert_eq!(fresh.recorded_identifier.as_deref(), Some("recorded-id"));
        assert_eq!(fresh.options.approved_plan, None);
        let complete = ResourceTypeStatus {
            phase: Some(Phase::Complete),
            ..Default::default()
        };
        let rechecked = request(&postgres(annotations, Some(complete)), &settings, tier);
        assert_eq!(
            rechecked.options.observed_within,
            Some(BATCHED_OBSERVATION_AGE)
        );
    }

    #[test]
    fn a_final_snapshot_is_named_after_the_deletion_time() {
        let mut cr = postgres(serde_json::json!({}), None);
        let at = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        cr.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
        let name = final_snapshot_identifier(&cr, &settings());
        let want = timestamped_identifier("prod-cluster", "shop", "orders", "1800000000");
        assert_eq!(name, Some(want));
    }
}
