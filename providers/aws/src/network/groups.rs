//! The RDS DB subnet group and the ElastiCache cache subnet group of the
//! cluster's network: one name for both (`BuildInfraName(..,
//! "subnet-group", 40)`), over the network's subnets.

use aws_sdk_elasticache::types::Tag as CacheTag;
use aws_sdk_rds::types::Tag as RdsTag;
use cro_provider_api::ProviderError;

use super::{Engine, Network};
use crate::errors::{Answer, created};

/// The Go operator's description (`defaultSubnetGroupDesc`, cluster_vpc.go).
const DESCRIPTION: &str = "Subnet group created and managed by the Cloud Resource Operator";

/// The subnet group of `engine`'s service exists and holds every subnet
/// of `subnets` (a group found with fewer gets them added; one with more
/// keeps them). Only that service is called: a Postgres is placed while
/// ElastiCache is down, and a Redis while RDS is.
pub async fn ensure(
    net: &Network<'_>,
    engine: Engine,
    subnets: &[String],
    tags: &[(String, String)],
) -> Result<(), ProviderError> {
    match engine {
        Engine::Postgres => ensure_rds(net, subnets, tags).await,
        Engine::Redis => ensure_cache(net, subnets, tags).await,
    }
}

async fn ensure_rds(
    net: &Network<'_>,
    subnets: &[String],
    tags: &[(String, String)],
) -> Result<(), ProviderError> {
    let name = net.subnet_group();
    match rds_subnets(net, &name).await? {
        Some(have) if subnets.iter().all(|s| have.contains(s)) => {}
        Some(_) => {
            net.rds
                .modify_db_subnet_group()
                .db_subnet_group_name(&name)
                .set_subnet_ids(Some(subnets.to_vec()))
                .send()
                .await
                .named("rds:ModifyDBSubnetGroup", &name)?;
        }
        None => {
            let sent = net
                .rds
                .create_db_subnet_group()
                .db_subnet_group_name(&name)
                .db_subnet_group_description(DESCRIPTION)
                .set_subnet_ids(Some(subnets.to_vec()))
                .set_tags(Some(crate::tags::sdk::<RdsTag>(tags)))
                .send()
                .await;
            created(sent, "rds:CreateDBSubnetGroup", &name)?;
        }
    }
    Ok(())
}

async fn ensure_cache(
    net: &Network<'_>,
    subnets: &[String],
    tags: &[(String, String)],
) -> Result<(), ProviderError> {
    let name = net.subnet_group();
    match cache_subnets(net, &name).await? {
        Some(have) if subnets.iter().all(|s| have.contains(s)) => {}
        Some(_) => {
            net.elasticache
                .modify_cache_subnet_group()
                .cache_subnet_group_name(&name)
                .set_subnet_ids(Some(subnets.to_vec()))
                .send()
                .await
                .named("elasticache:ModifyCacheSubnetGroup", &name)?;
        }
        None => {
            let sent = net
                .elasticache
                .create_cache_subnet_group()
                .cache_subnet_group_name(&name)
                .cache_subnet_group_description(DESCRIPTION)
                .set_subnet_ids(Some(subnets.to_vec()))
                .set_tags(Some(crate::tags::sdk::<CacheTag>(tags)))
                .send()
                .await;
            created(sent, "elasticache:CreateCacheSubnetGroup", &name)?;
        }
    }
    Ok(())
}

/// The subnets of the DB subnet group `name`, if it exists.
pub async fn rds_subnets(
    net: &Network<'_>,
    name: &str,
) -> Result<Option<Vec<String>>, ProviderError> {
    let out = net
        .rds
        .describe_db_subnet_groups()
        .db_subnet_group_name(name)
        .send()
        .await
        .unless_missing(
            |e| e.is_db_subnet_group_not_found_fault(),
            "rds:DescribeDBSubnetGroups",
            name,
        )?;
    Ok(out.and_then(|o| {
        o.db_subnet_groups().first().map(|g| {
            g.subnets()
                .iter()
                .filter_map(|s| s.subnet_identifier().map(str::to_string))
                .collect()
        })
    }))
}

/// The subnets of the cache subnet group `name`, if it exists.
pub async fn cache_subnets(
    net: &Network<'_>,
    name: &str,
) -> Result<Option<Vec<String>>, ProviderError> {
    let out = net
        .elasticache
        .describe_cache_subnet_groups()
        .cache_subnet_group_name(name)
        .send()
        .await
        .unless_missing(
            |e| e.is_cache_subnet_group_not_found_fault(),
            "elasticache:DescribeCacheSubnetGroups",
            name,
        )?;
    Ok(out.and_then(|o| {
        o.cache_subnet_groups().first().map(|g| {
            g.subnets()
                .iter()
                .filter_map(|s| s.subnet_identifier().map(str::to_string))
                .collect()
        })
    }))
}

/// Removes both subnet groups, the DB one first (the Go operator's
/// `DeleteNetwork` order); gone already is fine.
pub async fn remove(net: &Network<'_>) -> Result<(), ProviderError> {
    let name = net.subnet_group();
    net.rds
        .delete_db_subnet_group()
        .db_subnet_group_name(&name)
        .send()
        .await
        .unless_missing(
            |e| e.is_db_subnet_group_not_found_fault(),
            "rds:DeleteDBSubnetGroup",
            &name,
        )?;
    net.elasticache
        .delete_cache_subnet_group()
        .cache_subnet_group_name(&name)
        .send()
        .await
        .unless_missing(
            |e| e.is_cache_subnet_group_not_found_fault(),
            "elasticache:DeleteCacheSubnetGroup",
            &name,
        )?;
    Ok(())
}
