//! The aws tier: `{"region", "createStrategy", "deleteStrategy"}` where the
//! strategies hold AWS API input fields by their API names, matched
//! case-insensitively as the Go operator does. A field the operator does
//! not know, or a value of the wrong type, is an error naming the field.

use cro_provider_api::ProviderError;
use serde_json::{Map, Value};

#[derive(Debug, Default)]
pub struct Tier {
    pub region: Option<String>,
    pub create: Map<String, Value>,
    pub delete: Map<String, Value>,
}

pub fn parse(tier: &Value) -> Result<Tier, ProviderError> {
    if tier.is_null() {
        return Ok(Tier::default());
    }
    let Some(obj) = tier.as_object() else {
        return Err(invalid(
            "the tier must be an object with region, createStrategy, deleteStrategy".into(),
        ));
    };
    if let Some(k) = obj.keys().find(|k| {
        ![
            "region",
            "createStrategy",
            "deleteStrategy",
            "serviceUpdates",
        ]
        .contains(&k.as_str())
    }) {
        return Err(invalid(format!(
            "{k} is not a key of an aws tier; use region, createStrategy, deleteStrategy, serviceUpdates"
        )));
    }
    let section = |name: &str| match obj.get(name) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(other) => Err(invalid(format!(
            "{name} must be an object of AWS API fields, found {other}"
        ))),
    };
    let region = match obj.get("region") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) if r.is_empty() => None,
        Some(Value::String(r)) => Some(r.clone()),
        Some(other) => return Err(invalid(format!("region must be a string, found {other}"))),
    };
    Ok(Tier {
        region,
        create: section("createStrategy")?,
        delete: section("deleteStrategy")?,
    })
}

fn invalid(m: String) -> ProviderError {
    ProviderError::InvalidStrategy(m)
}

/// Typed, case-insensitive access to one strategy section.
pub struct Fields<'a> {
    section: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Checks every key against the fields of `api` the operator supports.
    pub fn new(
        section: &'static str,
        api: &str,
        map: &'a Map<String, Value>,
        known: &[&str],
    ) -> Result<Self, ProviderError> {
        for key in map.keys() {
            if !known.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                let hint = closest(key, known)
                    .map(|k| format!("; did you mean {k}?"))
                    .unwrap_or_default();
                return Err(invalid(format!(
                    "{section}.{key} is not a field of {api} that this operator sets{hint} (supported: {})",
                    known.join(", ")
                )));
            }
        }
        Ok(Fields { section, map })
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
            "{}.{name} must be {want}, found {got}",
            self.section
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
    known
        .iter()
        .map(|k| {
            (
                distance(&key.to_ascii_lowercase(), &k.to_ascii_lowercase()),
                *k,
            )
        })
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KNOWN: [&str; 3] = ["DBInstanceClass", "AllocatedStorage", "MultiAZ"];

    fn fields(v: Value) -> Result<i32, ProviderError> {
        let map = v.as_object().cloned().unwrap_or_default();
        let f = Fields::new("createStrategy", "rds:CreateDBInstance", &map, &KNOWN)?;
        Ok(f.int("AllocatedStorage")?.unwrap_or_default())
    }

    #[test]
    fn names_match_case_insensitively() {
        assert_eq!(fields(json!({"allocatedstorage": 50})).ok(), Some(50));
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = fields(json!({"AllocatedStorage": "abc"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("createStrategy.AllocatedStorage must be an integer"),
            "{err}"
        );
    }

    #[test]
    fn typo_is_refused_with_a_suggestion() {
        let err = fields(json!({"DBInstanceClas": "db.t3.micro"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("createStrategy.DBInstanceClas")
                && err.contains("did you mean DBInstanceClass?"),
            "{err}"
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
        assert!(parse(&json!({"creatStrategy": {}})).is_err());
    }
}
