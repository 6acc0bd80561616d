//! A tier's `createStrategy` or `deleteStrategy` read into the typed struct
//! of the AWS input it feeds. The struct's serde field names are the AWS
//! API's (PascalCase) names, matched case-insensitively as the Go operator
//! matched them (an exact spelling wins over one that differs in case);
//! `null` means unset (the Go operator's helper writes every field of the
//! aws-sdk-go input struct, mostly null); a value of the wrong type is an
//! error naming the field, before any AWS call. A field the struct lacks
//! (an AWS input field this operator does not set, such as `Tags` or
//! `Engine`, or a misspelt one) is left out and reported, as the Go
//! operator's JSON decoding ignored it: a tier it ran on keeps working.
//!
//! The names are the struct's own: serde hands its field list to the
//! deserializer below, which is the one place that knows the tier's JSON.

use std::{cell::RefCell, fmt};

use serde::{
    Deserializer,
    de::{self, DeserializeOwned, IntoDeserializer, MapAccess, Visitor, value::SeqDeserializer},
};
use serde_json::{Map, Value};

use super::{closest, invalid, shown};
use cro_provider_api::ProviderError;

/// A typed strategy section.
pub trait Section: DeserializeOwned + Default {
    /// Its key in the tier: `createStrategy` or `deleteStrategy`.
    const NAME: &'static str;
    /// The AWS call it feeds, for messages: `rds:CreateDBInstance`.
    const API: &'static str;
}

/// `map`, a tier's section, as `S`, and what was left out of it: each key
/// that is no field of `S`, with the field it may misspell.
pub fn parse<S: Section>(map: &Map<String, Value>) -> Result<(S, Vec<String>), ProviderError> {
    let ignored = RefCell::new(Vec::new());
    let de = SectionDe {
        name: S::NAME,
        api: S::API,
        map,
        ignored: &ignored,
    };
    let section = S::deserialize(de).map_err(|e| invalid(e.0))?;
    Ok((section, ignored.into_inner()))
}

/// A message naming the field and what is wrong with it.
#[derive(Debug)]
pub struct Invalid(String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

impl de::Error for Invalid {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Invalid(msg.to_string())
    }
}

/// The section's JSON object, deserialized as a struct only.
struct SectionDe<'a> {
    name: &'static str,
    api: &'static str,
    map: &'a Map<String, Value>,
    ignored: &'a RefCell<Vec<String>>,
}

impl<'de> Deserializer<'de> for SectionDe<'_> {
    type Error = Invalid;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Invalid> {
        let mut given = Vec::new();
        for (key, value) in self.map.iter().filter(|(_, v)| !v.is_null()) {
            let Some(field) = fields.iter().find(|f| f.eq_ignore_ascii_case(key)) else {
                let hint = match closest(key, fields) {
                    Some(k) => format!("did you mean {k}?"),
                    None => format!("not a field of {} that this operator sets", self.api),
                };
                (self.ignored.borrow_mut()).push(format!("{}.{key} ({hint})", self.name));
                continue;
            };
            // The exact spelling wins over one that differs in case.
            if key != field && self.map.get(*field).is_some_and(|v| !v.is_null()) {
                continue;
            }
            given.push((*field, value));
        }
        visitor.visit_map(Fields {
            section: self.name,
            given: given.into_iter(),
            next: None,
        })
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Invalid> {
        Err(Invalid(format!(
            "{} is read as a struct only (a bug)",
            self.name
        )))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The given fields, each value read as its field's type asks.
struct Fields<'a, I> {
    section: &'static str,
    given: I,
    next: Option<(&'static str, &'a Value)>,
}

impl<'de, 'a, I: Iterator<Item = (&'static str, &'a Value)>> MapAccess<'de> for Fields<'a, I> {
    type Error = Invalid;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Invalid> {
        let Some((field, value)) = self.given.next() else {
            return Ok(None);
        };
        self.next = Some((field, value));
        seed.deserialize(field.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Invalid> {
        let (field, value) = self
            .next
            .take()
            .ok_or_else(|| Invalid("a value without its field (a bug)".into()))?;
        seed.deserialize(FieldDe {
            section: self.section,
            field,
            value,
        })
    }
}

/// One field's value: a string, an integer (AWS's are 32-bit), true or
/// false, or a list of strings, as its type asks.
struct FieldDe<'a> {
    section: &'static str,
    field: &'static str,
    value: &'a Value,
}

impl FieldDe<'_> {
    fn wrong(&self, want: &str) -> Invalid {
        Invalid(format!(
            "{}.{} must be {want}, found {}",
            self.section,
            self.field,
            shown(self.value)
        ))
    }
}

impl<'de> Deserializer<'de> for FieldDe<'_> {
    type Error = Invalid;

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        // Null never reaches here: it means unset, and was left out.
        visitor.visit_some(self)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        match self.value.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => visitor.visit_i32(n),
            None => Err(self.wrong("an integer")),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        match self.value {
            Value::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.wrong("true or false")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        match self.value {
            Value::String(s) => visitor.visit_string(s.clone()),
            _ => Err(self.wrong("a string")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        self.deserialize_string(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Invalid> {
        let strings = self.value.as_array().and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        });
        match strings {
            Some(strings) => visitor.visit_seq(SeqDeserializer::new(strings.into_iter())),
            None => Err(self.wrong("a list of strings")),
        }
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Invalid> {
        Err(Invalid(format!(
            "{}.{} has a type this operator does not read (a bug)",
            self.section, self.field
        )))
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct newtype_struct tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Create {
        #[serde(rename = "DBInstanceClass")]
        class: Option<String>,
        #[serde(rename = "AllocatedStorage")]
        storage: Option<i32>,
        #[serde(rename = "MultiAZ")]
        multi_az: Option<bool>,
        #[serde(rename = "VpcSecurityGroupIds")]
        groups: Option<Vec<String>>,
    }

    impl Section for Create {
        const NAME: &'static str = "createStrategy";
        const API: &'static str = "rds:CreateDBInstance";
    }

    fn parsed(v: Value) -> Result<Create, String> {
        parsed_reporting(v).map(|(c, _)| c)
    }

    fn parsed_reporting(v: Value) -> Result<(Create, Vec<String>), String> {
        parse::<Create>(v.as_object().unwrap_or(&Map::new())).map_err(|e| e.to_string())
    }

    #[test]
    fn fields_match_case_insensitively_and_null_is_unset() {
        let c = parsed(json!({
            "dbinstanceclass": "db.t3.micro", "AllocatedStorage": 50, "MultiAZ": null,
            "vpcSecurityGroupIds": ["sg-1"], "Unknown": null
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c,
            Create {
                class: Some("db.t3.micro".into()),
                storage: Some(50),
                multi_az: None,
                groups: Some(vec!["sg-1".into()]),
            }
        );
        assert_eq!(parsed(json!({})), Ok(Create::default()));
        // The exact spelling wins.
        let c = parsed(json!({"allocatedstorage": 1, "AllocatedStorage": 2}));
        assert_eq!(c.map(|c| c.storage), Ok(Some(2)));
    }

    #[test]
    fn a_field_it_does_not_set_is_ignored_and_named() {
        // As the Go operator's decoding ignored them: Tags and Engine are
        // rds:CreateDBInstance input it passed on; a typo is named with
        // the field it may misspell.
        let (c, ignored) = parsed_reporting(json!({
            "DBInstanceClas": "db.t3.micro", "Tags": [{"Key": "k", "Value": "v"}],
            "AllocatedStorage": 30
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.storage, Some(30));
        assert_eq!(c.class, None);
        assert_eq!(
            ignored,
            [
                "createStrategy.DBInstanceClas (did you mean DBInstanceClass?)",
                "createStrategy.Tags (not a field of rds:CreateDBInstance that this operator sets)"
            ]
        );
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let rows = [
            (
                json!({"AllocatedStorage": "abc"}),
                vec!["createStrategy.AllocatedStorage must be an integer, found \"abc\""],
            ),
            (
                json!({"AllocatedStorage": 5_000_000_000_i64}),
                vec!["createStrategy.AllocatedStorage must be an integer"],
            ),
            (
                json!({"MultiAZ": "yes"}),
                vec!["createStrategy.MultiAZ must be true or false"],
            ),
            (
                json!({"DBInstanceClass": 5}),
                vec!["createStrategy.DBInstanceClass must be a string"],
            ),
            (
                json!({"VpcSecurityGroupIds": ["a", 1]}),
                vec!["createStrategy.VpcSecurityGroupIds must be a list of strings"],
            ),
        ];
        for (section, says) in rows {
            let err = parsed(section.clone()).expect_err("accepted");
            assert!(says.iter().all(|s| err.contains(s)), "{section}: {err}");
        }
    }
}
