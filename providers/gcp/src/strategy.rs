//! One tier of `cloud-resources-gcp-strategies`, read as the Go operator
//! reads it (pkg/providers/gcp/config.go, `StrategyConfig` and
//! `getTierStrategyForProvider`): `region` and `projectID`, each taken from
//! the cluster's Infrastructure when the tier leaves it empty, and the
//! kind's `createStrategy` and `deleteStrategy`, kept as JSON for the kind
//! to read.

use serde_json::{Map, Value};

/// The ConfigMap the tiers live in (Go: `DefaultConfigMapName`).
pub const STRATEGIES_CONFIGMAP: &str = "cloud-resources-gcp-strategies";

/// The cluster's own GCP project and region: the Infrastructure object's
/// `status.platformStatus.gcp` (Go: `resources.GetGCPProject`,
/// `GetGCPRegion`), when the cluster runs on GCP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Platform {
    pub project: Option<String>,
    pub region: Option<String>,
}

/// A tier, its project and region settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Strategy {
    pub project: String,
    pub region: String,
    /// `createStrategy`; `{}` when the tier has none.
    pub create: Value,
    /// `deleteStrategy`; `{}` when the tier has none.
    pub delete: Value,
    /// Keys of the tier the Go operator does not read either (a typo of
    /// `projectID` is the usual one): named in a warning, never fatal,
    /// as the Go operator ignores them.
    pub unread: Vec<String>,
}

/// Where a tier is: the ConfigMap key (`postgres`, `redis`, `_network`, …)
/// and the tier's name, for messages that say what to edit.
#[derive(Clone, Copy, Debug)]
pub struct TierRef<'a> {
    pub key: &'a str,
    pub tier: &'a str,
}

impl std::fmt::Display for TierRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tier {:?} of key {:?} in ConfigMap {STRATEGIES_CONFIGMAP}",
            self.tier, self.key
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StrategyError {
    #[error(
        "{at} must be a JSON object like {{\"region\": \"\", \"projectID\": \"\", \"createStrategy\": {{}}, \"deleteStrategy\": {{}}}}, not {found}"
    )]
    NotAnObject { at: String, found: String },
    #[error("{at}: {field} must be {want}, not {found}")]
    WrongType {
        at: String,
        field: &'static str,
        want: &'static str,
        found: String,
    },
    #[error(
        "{at} sets no {field} and the cluster's Infrastructure (status.platformStatus.gcp) names none: set {field} in the tier"
    )]
    Missing { at: String, field: &'static str },
}

const FIELDS: [&str; 4] = ["region", "projectID", "createStrategy", "deleteStrategy"];

/// Reads the tier `strategy` found at `at`.
pub fn parse(
    at: TierRef<'_>,
    strategy: &Value,
    platform: &Platform,
) -> Result<Strategy, StrategyError> {
    let Value::Object(tier) = strategy else {
        return Err(StrategyError::NotAnObject {
            at: at.to_string(),
            found: json_type(strategy).into(),
        });
    };
    let text = |field: &'static str| -> Result<String, StrategyError> {
        match tier.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.trim().to_string()),
            Some(other) => Err(wrong(at, field, "a string", other)),
        }
    };
    let object = |field: &'static str| -> Result<Value, StrategyError> {
        match tier.get(field) {
            None | Some(Value::Null) => Ok(Value::Object(Map::new())),
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            Some(other) => Err(wrong(at, field, "a JSON object", other)),
        }
    };
    let or_platform = |own: String, cluster: &Option<String>, field| {
        if !own.is_empty() {
            return Ok(own);
        }
        match cluster.as_deref().map(str::trim) {
            Some(c) if !c.is_empty() => Ok(c.to_string()),
            _ => Err(StrategyError::Missing {
                at: at.to_string(),
                field,
            }),
        }
    };
    Ok(Strategy {
        project: or_platform(text("projectID")?, &platform.project, "projectID")?,
        region: or_platform(text("region")?, &platform.region, "region")?,
        create: object("createStrategy")?,
        delete: object("deleteStrategy")?,
        unread: tier
            .keys()
            .filter(|k| !FIELDS.contains(&k.as_str()))
            .cloned()
            .collect(),
    })
}

fn wrong(at: TierRef<'_>, field: &'static str, want: &'static str, found: &Value) -> StrategyError {
    StrategyError::WrongType {
        at: at.to_string(),
        field,
        want,
        found: json_type(found).into(),
    }
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const AT: TierRef<'static> = TierRef {
        key: "postgres",
        tier: "production",
    };

    fn cluster() -> Platform {
        Platform {
            project: Some("cluster-project".into()),
            region: Some("europe-west2".into()),
        }
    }

    /// The Go operator's own default tier (pkg/providers/gcp/config.go,
    /// `BuildDefaultConfigMap`): empty project and region, read from the
    /// Infrastructure.
    #[test]
    fn the_go_default_tier_takes_project_and_region_from_the_cluster() {
        let go_default =
            json!({ "region": "", "projectID": "", "createStrategy": {}, "deleteStrategy": {} });
        let s = parse(AT, &go_default, &cluster()).unwrap();
        assert_eq!(
            (s.project.as_str(), s.region.as_str()),
            ("cluster-project", "europe-west2")
        );
        assert_eq!((s.create, s.delete), (json!({}), json!({})));
        assert!(s.unread.is_empty());
    }

    #[test]
    fn a_tier_s_own_project_and_region_win() {
        let tier = json!({ "region": "us-east1", "projectID": "other", "createStrategy": {"instance": {}} });
        let s = parse(AT, &tier, &cluster()).unwrap();
        assert_eq!(
            (s.project.as_str(), s.region.as_str()),
            ("other", "us-east1")
        );
        assert_eq!(s.create, json!({"instance": {}}));
        assert_eq!(s.delete, json!({}));
    }

    #[test]
    fn no_project_anywhere_names_the_tier_and_the_field() {
        let err = parse(AT, &json!({}), &Platform::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"production\"") && err.contains("\"postgres\""),
            "{err}"
        );
        assert!(
            err.contains(STRATEGIES_CONFIGMAP) && err.contains("set projectID"),
            "{err}"
        );
    }

    #[test]
    fn wrong_types_are_named_and_unknown_keys_are_kept_for_a_warning() {
        let err = parse(AT, &json!({"region": 5}), &cluster())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("region must be a string, not a number"),
            "{err}"
        );
        let err = parse(AT, &json!({"createStrategy": []}), &cluster())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("createStrategy must be a JSON object, not an array"),
            "{err}"
        );
        let err = parse(AT, &json!("x"), &cluster()).unwrap_err().to_string();
        assert!(err.contains("must be a JSON object"), "{err}");
        let s = parse(AT, &json!({"projectId": "typo"}), &cluster()).unwrap();
        assert_eq!(s.unread, vec!["projectId".to_string()]);
        assert_eq!(s.project, "cluster-project");
    }
}
