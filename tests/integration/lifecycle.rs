//! A database's life after creation (issue 14): scheduled snapshots.

use std::{collections::BTreeSet, time::Duration};

use cloud_resource_operator::{
    api::{Phase, Postgres, PostgresSnapshot},
    controllers::schedule::{PERIOD_LABEL, SCHEDULED_FOR_LABEL},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
};
use serde_json::json;

use crate::{
    aws::create_postgres,
    support::{
        DEFAULT_TIMEOUT, Launch, Operator, ensure_crds, wait_deleted, wait_phase, with_namespace,
    },
};

#[tokio::test]
async fn scheduled_snapshots_keep_to_the_retention_through_a_kill() {
    with_namespace("schedule", |client, ns| async move {
        ensure_crds(&client).await;
        let mut operator = Operator::launch(Launch::new(&ns)).await;
        create_postgres(
            &client,
            &ns,
            "db",
            json!({"snapshotFrequency": "1m", "snapshotRetention": "3m"}),
        )
        .await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let db = wait_phase(&pgs, "db", Phase::Complete).await;
        let uid = db.metadata.uid.clone().unwrap_or_default();
        let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        let scheduled = ListParams::default().labels(&format!("{SCHEDULED_FOR_LABEL}={uid}"));

        // Five minutes, looked at every second; the operator is SIGKILLed
        // and started again half way.
        let start = tokio::time::Instant::now();
        let mut periods = BTreeSet::new();
        let mut killed = false;
        let mut held = 0;
        while start.elapsed() < Duration::from_secs(300) {
            let list = snaps
                .list(&scheduled)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            held = list.items.len();
            assert!(
                held <= 3,
                "{held} scheduled snapshots held with a three-minute retention: {:?}",
                list.items.iter().map(|s| s.name_any()).collect::<Vec<_>>()
            );
            for s in &list.items {
                let period = s
                    .labels()
                    .get(PERIOD_LABEL)
                    .cloned()
                    .unwrap_or_else(|| panic!("{} has no period label", s.name_any()));
                periods.insert((period, s.name_any()));
            }
            if !killed && start.elapsed() > Duration::from_secs(150) {
                operator.kill().await;
                operator = Operator::launch(Launch::new(&ns)).await;
                killed = true;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            (2..=3).contains(&held),
            "{held} scheduled snapshots after five minutes"
        );
        // One snapshot per period, one period per minute: five or six seen.
        let distinct: BTreeSet<_> = periods.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            distinct.len(),
            periods.len(),
            "two snapshots for one period: {periods:?}"
        );
        assert!(
            (5..=6).contains(&periods.len()),
            "{} periods in five minutes: {periods:?}",
            periods.len()
        );
        // The ones kept are complete snapshots.
        for s in snaps
            .list(&scheduled)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items
        {
            if s.metadata.deletion_timestamp.is_none() {
                wait_phase(&snaps, &s.name_any(), Phase::Complete).await;
            }
        }

        pgs.delete("db", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while !snaps
            .list(&scheduled)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items
            .is_empty()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "scheduled snapshots left after their Postgres"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        drop(operator);
    })
    .await;
}
