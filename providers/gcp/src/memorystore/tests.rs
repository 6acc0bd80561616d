use super::*;

fn inputs<'a>(labels: &'a BTreeMap<String, String>, size: Option<&'a str>) -> Inputs<'a> {
    Inputs {
        project: "p1",
        region: "europe-west2",
        instance_id: "mycluster-ns-cache",
        labels,
        size,
        network: "https://www.googleapis.com/compute/v1/projects/p1/global/networks/mycluster-network",
        reserved_ip_range: "myclusteriprange",
    }
}

fn ours() -> BTreeMap<String, String> {
    [(
        "integreatly-org_clusterid".to_string(),
        "mycluster".to_string(),
    )]
    .into()
}

#[test]
fn the_default_tier_makes_the_instance_the_go_operator_makes() {
    let labels = ours();
    let d =
        desired_instance(&Value::Null, &inputs(&labels, None)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.parent, "projects/p1/locations/europe-west2");
    assert_eq!(d.instance_id, "mycluster-ns-cache");
    assert_eq!(
        d.instance,
        json!({
            "name": "projects/p1/locations/europe-west2/instances/mycluster-ns-cache",
            "tier": "STANDARD_HA", "readReplicasMode": "READ_REPLICAS_DISABLED", "memorySizeGb": 1,
            "authorizedNetwork": "projects/p1/global/networks/mycluster-network",
            "connectMode": "PRIVATE_SERVICE_ACCESS", "reservedIpRange": "myclusteriprange",
            "redisVersion": "REDIS_6_X", "labels": {"integreatly-org_clusterid": "mycluster"},
        })
    );
}

/// Tiers as Go's tests write them (provider_redis_test.go): snake_case,
/// enums as numbers, keys matched regardless of case, unknown ones dropped.
#[test]
fn a_tier_written_for_the_go_operator_means_the_same() {
    let labels = ours();
    let tier = json!({"instance_id": "pinned", "Instance": {"Memory_Size_Gb": 3, "tier": 1,
        "redis_version": "REDIS_7_2", "connect_mode": 0, "labels": {"team": "a"},
        "maintenance_policy": {"weekly_maintenance_window": [{"day": 2, "start_time": {"hours": 3}}]},
        "not_a_field": true}});
    let d = desired_instance(&tier, &inputs(&labels, None)).unwrap_or_else(|e| panic!("{e}"));
    let i = &d.instance;
    assert_eq!(d.instance_id, "pinned");
    assert_eq!(
        (&i["memorySizeGb"], &i["tier"], &i["redisVersion"]),
        (&json!(3), &json!("BASIC"), &json!("REDIS_7_2"))
    );
    assert_eq!(
        i["connectMode"], "PRIVATE_SERVICE_ACCESS",
        "Go's zero value means unset"
    );
    assert_eq!(
        i["labels"],
        json!({"team": "a", "integreatly-org_clusterid": "mycluster"})
    );
    assert_eq!(
        i["maintenancePolicy"],
        json!({"weeklyMaintenanceWindow": [{"day": "TUESDAY", "startTime": {"hours": 3}}]})
    );
    assert!(i.get("not_a_field").is_none() && i.get("notAField").is_none());
    // spec.size wins over the tier; a size that is no number is named.
    let sized =
        desired_instance(&tier, &inputs(&labels, Some("5"))).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sized.instance["memorySizeGb"], 5);
    assert_eq!(
        desired_instance(&tier, &inputs(&labels, Some("5GB"))),
        Err(MemorystoreError::Size("5GB".into()))
    );
    let bad = json!({"instance": {"tier": 2}});
    let e = desired_instance(&bad, &inputs(&labels, None)).expect_err("2 is no tier");
    assert!(
        e.to_string().contains("createStrategy.instance.tier"),
        "{e}"
    );
}

#[test]
fn a_pass_updates_what_go_updates_keeps_a_person_s_labels_and_never_downgrades() {
    let labels = ours();
    let wanted = desired_instance(
        &json!({"instance": {"memory_size_gb": 2}}),
        &inputs(&labels, None),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .instance;
    let mut found = wanted.clone();
    found["state"] = json!("READY");
    found["host"] = json!("10.100.0.4");
    assert_eq!(
        diff(&wanted, &found),
        Diff::default(),
        "as made: nothing to do"
    );
    found["labels"]["owner"] = json!("someone");
    assert_eq!(
        diff(&wanted, &found),
        Diff::default(),
        "a person's label stays"
    );
    found["memorySizeGb"] = json!(1);
    found["redisVersion"] = json!("REDIS_5_0");
    let d = diff(&wanted, &found);
    let (body, mask) = d.update.unwrap_or_default();
    assert_eq!(
        (body, mask.as_str()),
        (json!({"memorySizeGb": 2}), "memory_size_gb")
    );
    assert_eq!(d.upgrade.as_deref(), Some("REDIS_6_X"));
    found["redisVersion"] = json!("REDIS_7_2");
    let d = diff(&wanted, &found);
    assert_eq!(d.upgrade, None);
    assert!(
        d.held[0].contains("Memorystore upgrades only"),
        "{:?}",
        d.held
    );
}
