use super::*;

const NETWORK: &str =
    "https://www.googleapis.com/compute/v1/projects/p1/global/networks/mycluster-x7k2p-network";

fn labels() -> BTreeMap<String, String> {
    [
        ("integreatly-org_clusterid", "mycluster-x7k2p"),
        ("integreatly-org_resource-type", "managed"),
        ("integreatly-org_resource-name", "example-postgres"),
        ("red-hat-managed", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

fn inputs(labels: &BTreeMap<String, String>) -> Inputs<'_> {
    Inputs {
        name: "mycluster-x7k2p-ns-example-postgres",
        region: "europe-west2",
        root_password: "s3cret",
        labels,
        allocated_ip_range: "mycluster-x7k2p-ip-range",
        private_network: NETWORK,
    }
}

/// The body the Go operator sends for its default tier (`"createStrategy":
/// {}`): pkg/providers/gcp/provider_postgres.go `buildCloudSQLCreateStrategy`
/// fills the defaults, gcpiface/database_types.go
/// `MapToGcpDatabaseInstance` converts it, and google-api-go-client
/// encodes int64 fields as strings and sends `ipv4Enabled: false` as a
/// forced field.
fn go_default_body() -> Value {
    json!({
        "name": "mycluster-x7k2p-ns-example-postgres",
        "databaseVersion": "POSTGRES_13",
        "region": "europe-west2",
        "rootPassword": "s3cret",
        "settings": {
            "tier": "db-custom-2-3840",
            "availabilityType": "REGIONAL",
            "storageAutoResizeLimit": "100",
            "dataDiskSizeGb": "20",
            "deletionProtectionEnabled": true,
            "userLabels": labels(),
            "backupConfiguration": {
                "enabled": true,
                "pointInTimeRecoveryEnabled": true,
                "backupRetentionSettings": {"retentionUnit": "COUNT", "retainedBackups": 30}
            },
            "ipConfiguration": {
                "ipv4Enabled": false,
                "allocatedIpRange": "mycluster-x7k2p-ip-range",
                "privateNetwork": NETWORK
            }
        }
    })
}

/// The Go-made instance as `instances.get` returns it months later: output
/// fields, a disk autoresize grew, a label a person added, the operator's
/// labels, and the settings GCP defaults.
fn go_made_instance() -> Value {
    let mut found = go_default_body();
    found.as_object_mut().unwrap().remove("rootPassword");
    let extra = json!({
        "kind": "sql#instance", "state": "RUNNABLE", "project": "p1",
        "connectionName": "p1:europe-west2:mycluster-x7k2p-ns-example-postgres",
        "ipAddresses": [{"type": "PRIVATE", "ipAddress": "10.1.0.3"}],
        "gceZone": "europe-west2-a", "secondaryGceZone": "europe-west2-b"
    });
    found
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let s = found["settings"].as_object_mut().unwrap();
    s.insert("dataDiskSizeGb".into(), json!("31"));
    s.insert("storageAutoResize".into(), json!(true));
    s.insert("settingsVersion".into(), json!("7"));
    s.insert("pricingPlan".into(), json!("PER_USE"));
    s["userLabels"]
        .as_object_mut()
        .unwrap()
        .insert("cost-centre".into(), json!("db"));
    found
}

#[test]
fn the_default_tier_makes_the_body_the_go_operator_sends() {
    let l = labels();
    let body = desired_instance(&json!({}), &inputs(&l)).unwrap();
    assert_eq!(body, go_default_body());
}

#[test]
fn a_tier_s_own_settings_win_and_an_explicit_false_stays_false() {
    let l = labels();
    let tier = json!({"instance": {
        "databaseVersion": "POSTGRES_15",
        "settings": {
            "tier": "db-custom-1-3840", "availabilityType": "ZONAL", "deletionProtectionEnabled": false,
            "userLabels": {"team": "orders"},
            "backupConfiguration": {"pointInTimeRecoveryEnabled": false}
        }
    }});
    let body = desired_instance(&tier, &inputs(&l)).unwrap();
    let s = &body["settings"];
    assert_eq!(body["databaseVersion"], "POSTGRES_15");
    assert_eq!(
        (&s["tier"], &s["availabilityType"]),
        (&json!("db-custom-1-3840"), &json!("ZONAL"))
    );
    assert_eq!(s["deletionProtectionEnabled"], false);
    assert_eq!(
        s["backupConfiguration"]["pointInTimeRecoveryEnabled"],
        false
    );
    assert_eq!(s["backupConfiguration"]["enabled"], true);
    assert_eq!(s["userLabels"]["team"], "orders");
    assert_eq!(s["userLabels"]["red-hat-managed"], "true");
}

#[test]
fn a_malformed_tier_names_the_path() {
    let l = labels();
    let err = desired_instance(&json!({"instance": {"settings": []}}), &inputs(&l)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "createStrategy.instance.settings must be a JSON object, not an array"
    );
    let err = desired_instance(&json!({"instance": "x"}), &inputs(&l)).unwrap_err();
    assert!(
        err.to_string().contains("createStrategy.instance must be"),
        "{err}"
    );
}

#[test]
fn a_go_made_instance_months_later_needs_no_patch() {
    let l = labels();
    let desired = desired_instance(&json!({}), &inputs(&l)).unwrap();
    assert_eq!(diff(&desired, &go_made_instance()), Diff::default());
}

#[test]
fn a_tier_edit_patches_only_what_changed_and_keeps_a_person_s_labels() {
    let mut l = labels();
    let tier =
        json!({"instance": {"settings": {"tier": "db-custom-4-15360", "dataDiskSizeGb": "50"}}});
    let desired = desired_instance(&tier, &inputs(&l)).unwrap();
    let d = diff(&desired, &go_made_instance());
    assert_eq!(
        d.patch,
        Some(json!({"settings": {"tier": "db-custom-4-15360", "dataDiskSizeGb": "50"}}))
    );

    l.insert("integreatly-org_product-name".into(), "3scale".into());
    let desired = desired_instance(&json!({}), &inputs(&l)).unwrap();
    let patch = diff(&desired, &go_made_instance()).patch.unwrap();
    let labels = &patch["settings"]["userLabels"];
    assert_eq!(
        (
            &labels["integreatly-org_product-name"],
            &labels["cost-centre"]
        ),
        (&json!("3scale"), &json!("db"))
    );
}

#[test]
fn what_cloud_sql_cannot_do_is_held_not_sent() {
    let l = labels();
    let mut found = go_made_instance();
    found["databaseVersion"] = json!("POSTGRES_15");
    found["settings"]["storageAutoResize"] = json!(false);
    let desired = desired_instance(&json!({}), &inputs(&l)).unwrap();
    let d = diff(&desired, &found);
    assert_eq!(d.patch, None, "{d:?}");
    assert_eq!(d.held.len(), 2, "{:?}", d.held);
    assert!(
        d.held[0].contains("POSTGRES_13") && d.held[0].contains("POSTGRES_15"),
        "{:?}",
        d.held
    );
    assert!(d.held[1].contains("cannot shrink"), "{:?}", d.held);

    let tier = json!({"instance": {"databaseVersion": "POSTGRES_16"}});
    let desired = desired_instance(&tier, &inputs(&l)).unwrap();
    assert_eq!(
        diff(&desired, &found).patch,
        Some(json!({"databaseVersion": "POSTGRES_16"}))
    );
}
