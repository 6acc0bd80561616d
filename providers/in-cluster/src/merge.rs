//! JSON merging for partial tier overrides, and the subset test that lets a
//! steady-state reconcile skip writes. Pure functions.

use serde_json::Value;

/// Merges `patch` onto `base`: RFC 7386 (objects recursively, `null`
/// removes a key, anything else replaces; `json_patch::merge`), except that
/// arrays whose elements are all objects with a `name` merge element-wise
/// by name (new names are appended), so an override can change one
/// container's image — which RFC 7386 cannot say.
pub fn merge(base: &mut Value, patch: &Value) {
    let (Value::Object(b), Value::Object(p)) = (&mut *base, patch) else {
        json_patch::merge(base, patch);
        return;
    };
    let mut rest = serde_json::Map::new();
    for (k, v) in p {
        match (b.get_mut(k), v) {
            (Some(Value::Array(have)), Value::Array(items)) if named(have) && named(items) => {
                for item in items {
                    match have.iter_mut().find(|e| e["name"] == item["name"]) {
                        Some(existing) => merge(existing, item),
                        None => have.push(item.clone()),
                    }
                }
            }
            (Some(existing @ Value::Object(_)), Value::Object(_)) => merge(existing, v),
            _ => {
                rest.insert(k.clone(), v.clone());
            }
        }
    }
    json_patch::merge(base, &Value::Object(rest));
}

fn named(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| i.get("name").is_some_and(Value::is_string))
}

/// Whether `live` already holds everything in `desired` (fields the server
/// or others added are ignored; arrays must match element for element).
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| is_subset(v, lv))),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(dv, lv)| is_subset(dv, lv))
        }
        (d, l) => d == l,
    }
}

/// Where `live` differs from `desired`: each leaf of `desired` that `live`
/// lacks or holds otherwise, as `(path, live value, desired value)`; lists
/// of named items are matched by name (`containers[postgres].image`).
pub fn diff(desired: &Value, live: &Value) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    diff_into(desired, live, String::new(), &mut out);
    out
}

fn diff_into(desired: &Value, live: &Value, path: String, out: &mut Vec<(String, Value, Value)>) {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => {
            for (k, v) in d {
                diff_into(v, l.get(k).unwrap_or(&Value::Null), at(k), out);
            }
        }
        (Value::Array(d), Value::Array(l)) if named(d) && d.len() == l.len() => {
            for item in d {
                let name = item["name"].as_str().unwrap_or_default();
                let live = l
                    .iter()
                    .find(|e| e["name"] == item["name"])
                    .unwrap_or(&Value::Null);
                diff_into(item, live, format!("{path}[{name}]"), out);
            }
        }
        (d, l) if !is_subset(d, l) => out.push((path, l.clone(), d.clone())),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn override_changes_one_container_by_name() {
        let mut base = json!({"containers": [
            {"name": "postgres", "image": "postgres:17", "ports": [{"containerPort": 5432}]},
            {"name": "sidecar", "image": "s:1"}
        ]});
        merge(
            &mut base,
            &json!({"containers": [{"name": "postgres", "image": "postgres:16"}]}),
        );
        assert_eq!(base["containers"][0]["image"], "postgres:16");
        assert_eq!(base["containers"][0]["ports"][0]["containerPort"], 5432);
        assert_eq!(base["containers"][1]["image"], "s:1");
    }

    #[test]
    fn new_names_append_and_null_removes() {
        let mut base = json!({"env": [{"name": "A", "value": "1"}], "keep": 1, "drop": 2});
        merge(
            &mut base,
            &json!({"env": [{"name": "B", "value": "2"}], "drop": null}),
        );
        assert_eq!(
            base,
            json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "keep": 1})
        );
    }

    #[test]
    fn unnamed_arrays_and_scalars_replace() {
        let mut base = json!({"args": ["a", "b"], "replicas": 1});
        merge(&mut base, &json!({"args": ["c"], "replicas": 2}));
        assert_eq!(base, json!({"args": ["c"], "replicas": 2}));
    }

    #[test]
    fn diff_names_each_changed_leaf_by_path() {
        let desired = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "postgres", "image": "postgres:17", "env": [{"name": "A", "value": "1"}]}
        ]}}}});
        let live = json!({"spec": {"replicas": 1, "paused": false, "template": {"spec": {"containers": [
            {"name": "postgres", "image": "postgres:16", "env": [{"name": "A", "value": "1"}], "imagePullPolicy": "Always"}
        ]}}}});
        assert_eq!(
            diff(&desired, &live),
            vec![(
                "spec.template.spec.containers[postgres].image".to_string(),
                json!("postgres:16"),
                json!("postgres:17")
            )]
        );
        assert!(diff(&desired, &desired).is_empty());
        let missing = diff(
            &json!({"spec": {"selector": {"app": "db"}}}),
            &json!({"spec": {}}),
        );
        assert_eq!(
            missing,
            vec![(
                "spec.selector".to_string(),
                json!(null),
                json!({"app": "db"})
            )]
        );
    }

    #[test]
    fn subset_ignores_server_defaults_but_not_changes() {
        let desired = json!({"spec": {"ports": [{"port": 5432}], "selector": {"app": "db"}}});
        let live = json!({"spec": {"ports": [{"port": 5432, "protocol": "TCP"}], "selector": {"app": "db"}, "clusterIP": "10.0.0.1"}});
        assert!(is_subset(&desired, &live));
        let changed = json!({"spec": {"ports": [{"port": 5433, "protocol": "TCP"}], "selector": {"app": "db"}}});
        assert!(!is_subset(&desired, &changed));
        let extra_port =
            json!({"spec": {"ports": [{"port": 5432}, {"port": 1}], "selector": {"app": "db"}}});
        assert!(!is_subset(&desired, &extra_port));
        assert!(!is_subset(&desired, &json!({})));
    }
}
