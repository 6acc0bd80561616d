//! The aws tier: `{"region", "createStrategy", "deleteStrategy"}` where the
//! strategies hold AWS API input fields by their API names, matched
//! case-insensitively as the Go operator does. A value of the wrong type is
//! an error naming the field; a key or field the operator does not read is
//! ignored, as the Go operator's decoding ignored it, and reported
//! ([`Tier::ignored`], `Sections::ignored`).

pub mod section;

use cro_provider_api::ProviderError;
use serde_json::{Map, Value};

pub use section::{Section as TypedSection, parse as parse_section};

#[derive(Clone, Debug, Default)]
pub struct Tier {
    pub region: Option<String>,
    /// The role the tier's calls run as (another AWS account, typically),
    /// assumed on top of the operator's own credentials.
    pub role_arn: Option<String>,
    pub external_id: Option<String>,
    pub create: Map<String, Value>,
    pub delete: Map<String, Value>,
    /// `serviceUpdates`: Unix times (Postgres) or ElastiCache service
    /// update names (Redis).
    pub service_updates: Vec<String>,
    /// Keys of the tier this operator does not read, with the key each
    /// may misspell.
    pub ignored: Vec<String>,
}

/// Keys of an aws tier. `_network` is the Go operator's standalone-VPC
/// setting (its helper writes `"_network": ""` into every tier); this
/// operator uses the subnet and security groups the createStrategy names,
/// so it is accepted and ignored. `serviceUpdates`: see
/// [`crate::service_updates`].
const TIER_KEYS: [&str; 7] = [
    "region",
    "roleArn",
    "externalId",
    "createStrategy",
    "deleteStrategy",
    "serviceUpdates",
    "_network",
];

pub fn parse(tier: &Value) -> Result<Tier, ProviderError> {
    if tier.is_null() {
        return Ok(Tier::default());
    }
    let Some(given) = tier.as_object() else {
        return Err(invalid(
            "the tier must be an object with region, createStrategy, deleteStrategy".into(),
        ));
    };
    let (obj, ignored) = &canonical_keys(given);
    let section = |name: &str| match obj.get(name) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(other) => Err(invalid(format!(
            "{name} must be an object of AWS API fields, found {}",
            shown(other)
        ))),
    };
    // An empty string means unset, as the Go operator's helper writes it.
    let text = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(r)) if r.is_empty() => Ok(None),
        Some(Value::String(r)) => Ok(Some(r.clone())),
        Some(other) => Err(invalid(format!(
            "{key} must be a string, found {}",
            shown(other)
        ))),
    };
    let role_arn = text("roleArn")?;
    if let Some(arn) = &role_arn
        && !(arn.starts_with("arn:") && arn.contains(":role/"))
    {
        return Err(invalid(format!(
            "roleArn {} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
            shown(&Value::String(arn.clone()))
        )));
    }
    let service_updates = match obj.get("serviceUpdates") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(other) => {
            return Err(invalid(format!(
                "serviceUpdates must be a list of strings (Postgres: Unix times, Redis: ElastiCache service update names), found {}",
                shown(other)
            )));
        }
    };
    Ok(Tier {
        region: text("region")?,
        role_arn,
        external_id: text("externalId")?,
        create: section("createStrategy")?,
        delete: section("deleteStrategy")?,
        service_updates,
        ignored: ignored.clone(),
    })
}

/// Keys only a tier of the operator namespace may set: they choose the
/// AWS identity the tier's calls run as.
const OPERATOR_ONLY_KEYS: [&str; 2] = ["roleArn", "externalId"];

/// The first of [`OPERATOR_ONLY_KEYS`] that `tier` sets (in any case, as
/// [`parse`] reads them), as the tier spells it.
pub fn operator_only_key(tier: &Value) -> Option<String> {
    let given = tier.as_object()?;
    given
        .iter()
        .filter(|(_, v)| !(v.is_null() || v.as_str().is_some_and(str::is_empty)))
        .map(|(k, _)| k)
        .find(|k| OPERATOR_ONLY_KEYS.iter().any(|o| o.eq_ignore_ascii_case(k)))
        .cloned()
}

/// The tier with its keys as [`TIER_KEYS`] spell them. The Go operator's
/// JSON decoding matched them case-insensitively (`CreateStrategy`,
/// `Region` worked), an exact match winning over one that differs in case.
/// A key it does not know is left out and named, with the key it may
/// misspell.
fn canonical_keys(given: &Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let (mut out, mut ignored) = (Map::new(), Vec::new());
    for (k, v) in given {
        let Some(key) = TIER_KEYS.iter().find(|t| t.eq_ignore_ascii_case(k)) else {
            let hint = closest(k, &TIER_KEYS)
                .map(|t| format!(" (did you mean {t}?)"))
                .unwrap_or_default();
            ignored.push(format!("{k}{hint}"));
            continue;
        };
        if k == key || !given.contains_key(*key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    (out, ignored)
}

/// A value as shown in a message: cut, so a huge value cannot make a
/// status or Event too big to write.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn invalid(m: String) -> ProviderError {
    ProviderError::invalid_strategy(m)
}

/// The known field nearest to a typo (edit distance at most 2).
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let key = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (strsim::levenshtein(&key, &k.to_ascii_lowercase()), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_role_keys_are_operator_only_in_any_case_unless_empty() {
        let key = |t: Value| operator_only_key(&t);
        assert_eq!(
            key(json!({"RoleArn": "arn:aws:iam::1:role/x"})).as_deref(),
            Some("RoleArn")
        );
        assert_eq!(
            key(json!({"externalId": "e"})).as_deref(),
            Some("externalId")
        );
        // As the Go operator's helper writes unset fields.
        assert_eq!(
            key(json!({"region": "", "roleArn": "", "externalId": null})),
            None
        );
        assert_eq!(
            key(json!({"region": "eu-west-1", "_network": "10.0.0.0/26"})),
            None
        );
    }

    #[test]
    fn tier_sections_and_region() {
        let t = parse(&json!({"region": "eu-west-1", "createStrategy": {"A": 1}})).unwrap();
        assert_eq!(t.region.as_deref(), Some("eu-west-1"));
        assert_eq!(t.create.len(), 1);
        assert!(t.delete.is_empty());
        assert!(parse(&json!({"region": ""})).unwrap().region.is_none());
        assert!(parse(&json!({"createStrategy": []})).is_err());
        // A key it does not read is ignored, as the Go operator's decoding
        // ignored it, and named.
        let t = parse(&json!({"creatStrategy": {}})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.ignored, ["creatStrategy (did you mean createStrategy?)"]);
    }

    #[test]
    fn tier_keys_match_case_insensitively_as_in_the_go_operator() {
        let t = parse(
            &json!({"Region": "eu-west-1", "CreateStrategy": {"A": 1}, "ServiceUpdates": ["1"]}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.region.as_deref(), Some("eu-west-1"));
        assert_eq!((t.create.len(), t.service_updates.len()), (1, 1));
        // The exact spelling wins over one that differs in case.
        let t = parse(&json!({"REGION": "us-east-1", "region": "eu-west-1"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.region.as_deref(), Some("eu-west-1"));
    }
}
