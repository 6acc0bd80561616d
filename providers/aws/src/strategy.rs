//! The aws tier: `{"region", "createStrategy", "deleteStrategy"}` where the
//! strategies hold AWS API input fields by their API names, matched
//! case-insensitively as the Go operator does. A field the operator does
//! not know, or a value of the wrong type, is an error naming the field.

use cro_provider_api::ProviderError;
use serde_json::{Map, Value};

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
    let obj = &canonical_keys(given)?;
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
            "roleArn {arn:?} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)"
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
    })
}

/// The tier with its keys as [`TIER_KEYS`] spell them. The Go operator's
/// JSON decoding matched them case-insensitively (`CreateStrategy`,
/// `Region` worked), an exact match winning over one that differs in case.
fn canonical_keys(given: &Map<String, Value>) -> Result<Map<String, Value>, ProviderError> {
    let mut out = Map::new();
    for (k, v) in given {
        let Some(key) = TIER_KEYS.iter().find(|t| t.eq_ignore_ascii_case(k)) else {
            return Err(invalid(format!(
                "{k} is not a key of an aws tier; use {}",
                TIER_KEYS.join(", ")
            )));
        };
        if k == key || !given.contains_key(*key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Ok(out)
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

/// The JSON type an AWS API input field takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    String,
    Int,
    Bool,
    Strings,
}

impl FieldType {
    fn describe(self) -> &'static str {
        match self {
            FieldType::String => "a string",
            FieldType::Int => "an integer",
            FieldType::Bool => "true or false",
            FieldType::Strings => "a list of strings",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            FieldType::String => v.is_string(),
            FieldType::Int => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            FieldType::Bool => v.is_boolean(),
            FieldType::Strings => v
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
        }
    }
}

/// One strategy section (`createStrategy` or `deleteStrategy`) of a kind:
/// the AWS API it feeds and the input fields the operator sets from it.
pub struct Section {
    pub name: &'static str,
    pub api: &'static str,
    pub fields: &'static [(&'static str, FieldType)],
}

/// A [`Section`] with its fields grouped by type, one line a type:
/// `section! { "deleteStrategy" for "rds:DeleteDBInstance" { Bool: SkipFinalSnapshot; } }`.
/// Fields are the AWS input's own (PascalCase) names, as the ConfigMaps spell them.
macro_rules! section {
    ($name:literal for $api:literal { $($ty:ident: $($field:ident)+;)+ }) => {
        $crate::strategy::Section {
            name: $name,
            api: $api,
            fields: &[$($((stringify!($field), $crate::strategy::FieldType::$ty),)+)+],
        }
    };
}
pub(crate) use section;

/// Typed, case-insensitive access to one strategy section.
pub struct Fields<'a> {
    section: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Checks every key against the section's fields, and every value
    /// against the field's type, so a bad tier fails before any AWS call.
    pub fn new(section: &Section, map: &'a Map<String, Value>) -> Result<Self, ProviderError> {
        let names: Vec<&str> = section.fields.iter().map(|(n, _)| *n).collect();
        // `null` means unset, whatever the name: the Go operator's helper
        // writes every field of the aws-sdk-go input struct, mostly null.
        for (key, value) in map.iter().filter(|(_, v)| !v.is_null()) {
            let Some((name, ty)) = section
                .fields
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(key))
            else {
                let hint = closest(key, &names)
                    .map(|k| format!("; did you mean {k}?"))
                    .unwrap_or_default();
                return Err(invalid(format!(
                    "{}.{key} is not a field of {} that this operator sets{hint} (supported: {})",
                    section.name,
                    section.api,
                    names.join(", ")
                )));
            };
            if !ty.accepts(value) {
                return Err(invalid(format!(
                    "{}.{name} must be {}, found {}",
                    section.name,
                    ty.describe(),
                    shown(value)
                )));
            }
        }
        Ok(Fields {
            section: section.name,
            map,
        })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())
    }

    fn wrong(&self, name: &str, want: &str, got: &Value) -> ProviderError {
        invalid(format!(
            "{}.{name} must be {want}, found {}",
            self.section,
            shown(got)
        ))
    }

    pub fn string(&self, name: &str) -> Result<Option<String>, ProviderError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.wrong(name, "a string", v)),
        }
    }

    pub fn int(&self, name: &str) -> Result<Option<i32>, ProviderError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(name, "an integer", v)),
        }
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ProviderError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(name, "true or false", v)),
        }
    }

    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, ProviderError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str().map(str::to_string).ok_or_else(|| {
                        self.wrong(name, "a list of strings", &Value::Array(items.clone()))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(self.wrong(name, "a list of strings", v)),
        }
    }
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

    fn fields(v: Value) -> Result<i32, ProviderError> {
        let map = v.as_object().cloned().unwrap_or_default();
        let f = Fields::new(&crate::rds::CREATE_STRATEGY, &map)?;
        Ok(f.int("AllocatedStorage")?.unwrap_or_default())
    }

    #[test]
    fn names_match_case_insensitively() {
        assert_eq!(fields(json!({"allocatedstorage": 50})).ok(), Some(50));
    }

    #[test]
    fn a_wrong_type_or_a_typo_is_refused_naming_the_field() {
        // Row: (section, what the error says)
        let rows = [
            (
                json!({"AllocatedStorage": "abc"}),
                vec!["createStrategy.AllocatedStorage must be an integer"],
            ),
            (
                json!({"DBInstanceClas": "db.t3.micro"}),
                vec![
                    "createStrategy.DBInstanceClas",
                    "did you mean DBInstanceClass?",
                ],
            ),
        ];
        for (section, says) in rows {
            let err = fields(section).unwrap_err().to_string();
            assert!(says.iter().all(|s| err.contains(s)), "{err}");
        }
    }

    #[test]
    fn section_gives_each_field_the_type_of_its_line() {
        let s = section! { "createStrategy" for "x:Y" { String: A B; Int: C; Strings: D; } };
        let want = [
            ("A", FieldType::String),
            ("B", FieldType::String),
            ("C", FieldType::Int),
            ("D", FieldType::Strings),
        ];
        assert_eq!(s.fields, want);
    }

    #[test]
    fn tier_sections_and_region() {
        let t = parse(&json!({"region": "eu-west-1", "createStrategy": {"A": 1}})).unwrap();
        assert_eq!(t.region.as_deref(), Some("eu-west-1"));
        assert_eq!(t.create.len(), 1);
        assert!(t.delete.is_empty());
        assert!(parse(&json!({"region": ""})).unwrap().region.is_none());
        assert!(parse(&json!({"createStrategy": []})).is_err());
        assert!(parse(&json!({"creatStrategy": {}})).is_err());
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
