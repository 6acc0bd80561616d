//! `cloud-resource-operator plan`: what the operator would change, for
//! every CR, before anything changes. It reads the CRs and ConfigMaps from
//! the cluster (or ConfigMaps from files standing in for the cluster's: the
//! plan of an edit before it is applied) and asks each provider's `plan`,
//! which makes read-only calls only. Nothing is written anywhere.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use cro_provider_api::{Change, ChangePolicy, Provider};
use futures::{StreamExt, stream};
use kube::{Api, Client, ResourceExt, api::ListParams};
use serde::Serialize;

use crate::{
    api::{BlobStorage, Postgres, Redis, SMTPCredentialSet},
    cli::validate,
    config::{self, ConfigReader, DeletionPolicy, Located},
    controllers::{
        kinds::ResourceCr,
        resource::{provider_name, request},
    },
    reconcile::Settings,
};

/// Providers asked at once: enough to plan thousands of CRs in minutes,
/// few enough to stay far below the clouds' read rate limits.
const CONCURRENCY: usize = 4;

/// One field of one CR that would change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub field: String,
    pub current: String,
    pub desired: String,
    pub when: String,
    pub restarts: bool,
}

/// A CR that could not be planned, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub error: String,
}

/// A CR whose deletion would leave what it provisioned (deletion policy
/// `retain`), and what chose that.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Retained {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `annotation` or `tier`.
    pub by: String,
}

/// The whole plan.
#[derive(Debug, Default, Serialize)]
pub struct Plan {
    pub changes: Vec<Line>,
    pub errors: Vec<Failure>,
    /// CRs that deleting would not delete the cloud resource of: an
    /// approver sees which databases a deletion keeps.
    pub retained: Vec<Retained>,
}

impl Plan {
    /// 1 when something could not be planned, 2 when something would
    /// change, 0 when nothing would.
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            1
        } else if !self.changes.is_empty() {
            2
        } else {
            0
        }
    }

    /// `<Kind> <namespace>/<name> <field>: <current> -> <desired> (<when>)`,
    /// with control characters escaped (see [`cro_runtime::printable`]).
    pub fn text(&self) -> String {
        let lines: String = (self.changes.iter())
            .map(|l| {
                let restarts = if l.restarts { ", restarts" } else { "" };
                let line = format!(
                    "{} {}/{} {}: {} -> {} ({}{restarts})",
                    l.kind, l.namespace, l.name, l.field, l.current, l.desired, l.when
                );
                cro_runtime::printable::one_line(&line) + "\n"
            })
            .collect();
        lines
    }

    /// What went wrong, one line per CR, which CRs a deletion keeps, and
    /// a count.
    pub fn summary(&self) -> String {
        let mut out: String = self
            .errors
            .iter()
            .map(|f| {
                let line = format!("error: {} {}/{}: {}", f.kind, f.namespace, f.name, f.error);
                cro_runtime::printable::one_line(&line) + "\n"
            })
            .collect();
        for r in &self.retained {
            let line = format!(
                "retain: deleting {} {}/{} leaves its cloud resource, data and Secrets (deletion policy retain, by its {})",
                r.kind, r.namespace, r.name, r.by
            );
            out.push_str(&(cro_runtime::printable::one_line(&line) + "\n"));
        }
        let resources: std::collections::BTreeSet<_> = self
            .changes
            .iter()
            .map(|l| (&l.kind, &l.namespace, &l.name))
            .collect();
        out.push_str(&format!(
            "{} change(s) to {} resource(s); {} resource(s) could not be planned\n",
            self.changes.len(),
            resources.len(),
            self.errors.len()
        ));
        cro_runtime::printable::printable(&out)
    }
}

/// The ConfigMaps in `paths` (YAML, one or many documents per file); one
/// without a namespace stands for the operator namespace's.
pub fn config_overrides(
    paths: &[PathBuf],
    operator_namespace: &str,
) -> Result<Vec<Located>, PlanError> {
    let (docs, mut findings) = validate::load(paths);
    if !findings.is_empty() {
        return Err(PlanError::Unreadable(findings.remove(0)));
    }
    let mut out = Vec::new();
    for doc in &docs {
        if doc.kind() != Some("ConfigMap") {
            return Err(PlanError::NotConfigMap {
                file: doc.file.clone(),
                index: doc.index,
                kind: doc.kind().unwrap_or("no kind").to_string(),
            });
        }
        let mut cm = doc.config_map();
        if cm.namespace.is_empty() {
            cm.namespace = operator_namespace.to_string();
        }
        out.push(cm);
    }
    Ok(out)
}

/// Why the plan of the `--config` files or of one CR cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Unreadable(validate::Finding),
    #[error("{} document {index}: plan --config reads ConfigMaps only, found {kind}", file.display())]
    NotConfigMap {
        file: PathBuf,
        index: usize,
        kind: String,
    },
    #[error("{0}")]
    Provider(#[from] crate::reconcile::Error),
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("provider {0:?} is not available")]
    Unavailable(String),
    #[error("{0}")]
    DeletionPolicy(#[from] config::deletion_policy::UnknownPolicy),
    #[error("{error} (tier {tier:?} in ConfigMap {config_map})")]
    Plan {
        error: Box<cro_provider_api::ProviderError>,
        tier: String,
        config_map: String,
    },
}

/// Where the CRs to plan are and how they are provisioned.
pub struct Scope<'a> {
    pub client: &'a Client,
    pub config: &'a ConfigReader,
    pub settings: &'a Settings,
    pub providers: &'a BTreeMap<&'static str, Arc<dyn Provider>>,
    /// Only these namespaces; empty is all.
    pub namespaces: &'a [String],
}

/// Plans every Postgres, Redis, BlobStorage and SMTPCredentialSet.
pub async fn plan(scope: &Scope<'_>) -> Result<Plan, kube::Error> {
    let mut plan = Plan::default();
    plan_kind::<Postgres>(scope, &mut plan).await?;
    plan_kind::<Redis>(scope, &mut plan).await?;
    plan_kind::<BlobStorage>(scope, &mut plan).await?;
    plan_kind::<SMTPCredentialSet>(scope, &mut plan).await?;
    Ok(plan)
}

async fn list<K: ResourceCr>(scope: &Scope<'_>) -> Result<Vec<K>, kube::Error> {
    if scope.namespaces.is_empty() {
        return Ok(Api::<K>::all(scope.client.clone())
            .list(&ListParams::default())
            .await?
            .items);
    }
    let mut out = Vec::new();
    for ns in scope.namespaces {
        let api = Api::<K>::namespaced(scope.client.clone(), ns);
        out.extend(api.list(&ListParams::default()).await?.items);
    }
    Ok(out)
}

async fn plan_kind<K: ResourceCr>(scope: &Scope<'_>, plan: &mut Plan) -> Result<(), kube::Error> {
    let mut crs = list::<K>(scope).await?;
    // Being deleted, or not provisioned by this operator: nothing to change.
    crs.retain(|cr| cr.meta().deletion_timestamp.is_none() && !cr.spec().skip_create);
    crs.sort_by_key(|cr| (cr.namespace(), cr.name_any()));
    let results: Vec<_> = stream::iter(crs)
        .map(|cr| async move {
            let changes = plan_one(&cr, scope).await;
            (cr, changes)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let kind = K::kind(&()).to_string();
    for (cr, result) in results {
        let (namespace, name) = (cr.namespace().unwrap_or_default(), cr.name_any());
        match result {
            Ok((changes, policy, retained_by)) => {
                if let Some(by) = retained_by {
                    plan.retained.push(Retained {
                        kind: kind.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                        by: by.to_string(),
                    });
                }
                plan.changes.extend(changes.into_iter().map(|c| Line {
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    when: when(&c, policy),
                    field: c.field,
                    current: c.current,
                    desired: c.desired,
                    restarts: c.restarts,
                }))
            }
            Err(error) => plan.errors.push(Failure {
                kind: kind.clone(),
                namespace,
                name,
                error: error.to_string(),
            }),
        }
    }
    Ok(())
}

/// What chose a CR's `retain` deletion policy, if it has one.
fn retained_by(
    annotations: &BTreeMap<String, String>,
    tier_default: DeletionPolicy,
) -> Result<Option<&'static str>, config::deletion_policy::UnknownPolicy> {
    let policy = DeletionPolicy::of(annotations, tier_default)?;
    let by = match annotations.contains_key(config::deletion_policy::ANNOTATION) {
        true => "annotation",
        false => "tier",
    };
    Ok((policy == DeletionPolicy::Retain).then_some(by))
}

/// The CR's changes, as the operator would resolve its provider and tier,
/// and what chose a `retain` deletion policy.
async fn plan_one<K: ResourceCr>(
    cr: &K,
    scope: &Scope<'_>,
) -> Result<(Vec<Change>, ChangePolicy, Option<&'static str>), PlanError> {
    let config = scope.config;
    let provider = provider_name(cr, config).await?;
    let tier = config::tier_strategy(config, &provider, K::KIND, &cr.spec().tier).await?;
    let policy = tier.change_policy;
    let retained = retained_by(cr.annotations(), tier.deletion_policy)?;
    let Some(p) = scope.providers.get(provider.as_str()) else {
        return Err(PlanError::Unavailable(provider));
    };
    let changes =
        (p.plan(&request(cr, scope.settings, tier)).await).map_err(|error| PlanError::Plan {
            error: Box::new(error),
            tier: cr.spec().tier.clone(),
            config_map: config::strategies_config_map(&provider),
        })?;
    Ok((changes, policy, retained))
}

/// When a change applies; under a `Plan` tier, only once approved.
fn when(c: &Change, policy: ChangePolicy) -> String {
    use cro_provider_api::Timing;
    match (policy, &c.timing) {
        (ChangePolicy::Online, Timing::Online) => Timing::Now.describe(),
        (ChangePolicy::Plan, Timing::Never(_))
        | (ChangePolicy::Automatic | ChangePolicy::Online, _) => c.timing.describe(),
        (ChangePolicy::Plan, _) => {
            "once integreatly.org/approve-plan is set to the plan's hash".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, field: &str) -> Line {
        Line {
            kind: "Postgres".into(),
            namespace: "app".into(),
            name: name.into(),
            field: field.into(),
            current: "db.t3.small".into(),
            desired: "db.t3.medium".into(),
            when: "maintenanceWindow".into(),
            restarts: true,
        }
    }

    #[test]
    fn exit_code_and_lines_follow_the_contract() {
        let mut plan = Plan::default();
        assert_eq!(plan.exit_code(), 0);
        plan.changes.push(line("db", "DBInstanceClass"));
        plan.changes.push(line("db", "AllocatedStorage"));
        assert_eq!(plan.exit_code(), 2);
        assert_eq!(
            plan.text().lines().next(),
            Some(
                "Postgres app/db DBInstanceClass: db.t3.small -> db.t3.medium (maintenanceWindow, restarts)"
            )
        );
        assert!(plan.summary().contains("2 change(s) to 1 resource(s)"));
        plan.errors.push(Failure {
            kind: "Redis".into(),
            namespace: "app".into(),
            name: "cache".into(),
            error: "no tier".into(),
        });
        assert_eq!(plan.exit_code(), 1);
        assert!(
            plan.summary()
                .starts_with("error: Redis app/cache: no tier")
        );
    }

    #[test]
    fn the_summary_names_what_a_deletion_keeps_and_what_chose_it() {
        let annotated = |v: &str| {
            BTreeMap::from([(
                config::deletion_policy::ANNOTATION.to_string(),
                v.to_string(),
            )])
        };
        let none = BTreeMap::new();
        assert_eq!(retained_by(&none, DeletionPolicy::Delete), Ok(None));
        assert_eq!(retained_by(&none, DeletionPolicy::Retain), Ok(Some("tier")));
        let by_annotation = retained_by(&annotated("retain"), DeletionPolicy::Delete);
        assert_eq!(by_annotation, Ok(Some("annotation")));
        let delete = retained_by(&annotated("delete"), DeletionPolicy::Retain);
        assert_eq!(delete, Ok(None));
        assert!(retained_by(&annotated("retian"), DeletionPolicy::Delete).is_err());
        let plan = Plan {
            retained: vec![Retained {
                kind: "Postgres".into(),
                namespace: "app".into(),
                name: "db".into(),
                by: "annotation".into(),
            }],
            ..Plan::default()
        };
        assert_eq!(plan.exit_code(), 0, "keeping is no change");
        assert!(
            plan.summary().starts_with(
                "retain: deleting Postgres app/db leaves its cloud resource, data and Secrets (deletion policy retain, by its annotation)\n"
            ),
            "{}",
            plan.summary()
        );
    }
}
