//! Holds request bodies to Google's published contract: the API's
//! discovery document (the `google-api-python-client` wheel on PyPI ships
//! them; the test environment unpacks them into the directory
//! `CRO_TESTENV_GCP_DISCOVERY` names). A body passes when every field is
//! in the schema, of its type and format, one of its enum values, and not
//! read only (output only).

use serde_json::Value;

/// A discovery document, e.g. `sqladmin.v1beta4`.
pub struct Document(Value);

impl Document {
    /// Reads `<api>.json` from the test environment's discovery directory.
    pub fn load(api: &str) -> Document {
        let dir = std::env::var("CRO_TESTENV_GCP_DISCOVERY").unwrap_or_else(|_| {
            panic!("CRO_TESTENV_GCP_DISCOVERY is not set: run `make testenv-up` and source target/testenv/env.sh (make test does both)")
        });
        let path = std::path::Path::new(&dir).join(format!("{api}.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Document(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    /// The request schema of `resource.method` (`instances.insert`).
    pub fn request_of(&self, resource: &str, method: &str) -> String {
        let m = &self.0["resources"][resource]["methods"][method];
        m["request"]["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{resource}.{method} takes no request body"))
            .to_string()
    }

    /// What in `body` the schema `name` refuses, each with its path.
    pub fn violations(&self, name: &str, body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        self.check(&serde_json::json!({ "$ref": name }), body, name, &mut out);
        out
    }

    fn check(&self, schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(name) = schema["$ref"].as_str() {
            let resolved = &self.0["schemas"][name];
            if resolved.is_null() {
                out.push(format!("{path}: schema {name} is not in the document"));
            } else {
                self.check(resolved, v, path, out);
            }
            return;
        }
        if schema["readOnly"] == true {
            out.push(format!("{path}: output only, not to be sent"));
        }
        match (schema["type"].as_str(), v) {
            (Some("object"), Value::Object(fields)) => {
                for (k, fv) in fields {
                    let p = format!("{path}.{k}");
                    match (
                        schema["properties"].get(k),
                        schema.get("additionalProperties"),
                    ) {
                        (Some(s), _) | (None, Some(s)) => self.check(s, fv, &p, out),
                        (None, None) => out.push(format!("{p}: no such field")),
                    }
                }
            }
            (Some("array"), Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.check(&schema["items"], item, &format!("{path}[{i}]"), out);
                }
            }
            (Some("string"), Value::String(s)) => {
                let int64 = matches!(schema["format"].as_str(), Some("int64" | "uint64"));
                if int64 && s.parse::<i128>().is_err() {
                    out.push(format!("{path}: {s:?} is not an int64"));
                }
                if let Some(values) = schema["enum"].as_array()
                    && !values.iter().any(|e| e == s)
                {
                    out.push(format!("{path}: {s:?} is none of {values:?}"));
                }
            }
            // int64 as a JSON number is accepted too (proto3 JSON).
            (Some("string"), Value::Number(n))
                if matches!(schema["format"].as_str(), Some("int64" | "uint64")) && n.is_i64() => {}
            (Some("integer"), Value::Number(n)) if n.is_i64() => {}
            (Some("number"), Value::Number(_))
            | (Some("boolean"), Value::Bool(_))
            | (Some("any"), _) => {}
            (want, got) => out.push(format!("{path}: {got} is not of type {want:?}")),
        }
    }
}
