//! The generated credentials Secret of an in-cluster Postgres (and of an
//! isolated Redis): the password is generated once and kept; it is never
//! logged or put in an error.

use std::collections::BTreeMap;

use cro_kube::secret_strings;
use cro_provider_api::{AccessKey, ProviderError, ResourceRequest, opaque_secret, random_password};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::{
    apply::FIELD_MANAGER,
    merge::is_subset,
    objects::Objects,
    relay::{CA_KEY, Login, PASSWORD_KEY, USERNAME_KEY},
    strategy::Serving,
    workload::{ADMIN_KEY_ID, ADMIN_SECRET, credentials_secret_name, metadata},
};

pub struct Credentials {
    pub username: String,
    pub password: String,
    pub database: String,
}

pub async fn ensure(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    overrides: &BTreeMap<String, String>,
) -> Result<Credentials, ProviderError> {
    let app: &MakeValue = &|| "app".into();
    let keys: [(&str, &MakeValue); 3] = [
        ("username", app),
        ("password", &random_password),
        ("database", app),
    ];
    let mut stored = stored(api, req, "postgres", &keys, overrides, &|_| ()).await?;
    let mut take = |key: &str| stored.remove(key).unwrap_or_default();
    Ok(Credentials {
        username: take("username"),
        password: take("password"),
        database: take("database"),
    })
}

/// The password of an isolated Redis or of a mail server (`password` in
/// its credentials Secret, labelled for `app`; the tier's `secretData` may
/// set it).
pub async fn password(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    app: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<String, ProviderError> {
    let keys: [(&str, &MakeValue); 1] = [("password", &random_password)];
    let mut stored = stored(api, req, app, &keys, overrides, &|_| ()).await?;
    Ok(stored.remove("password").unwrap_or_default())
}

/// A mail server's password, with the smarthost's login it relays with
/// (copied from the operator namespace) beside it, or none: written in one
/// go.
pub async fn mail_server(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    overrides: &BTreeMap<String, String>,
    relay: Option<&Login>,
) -> Result<String, ProviderError> {
    let keys: [(&str, &MakeValue); 1] = [("password", &random_password)];
    let login = |data: &mut BTreeMap<String, String>| {
        for key in [USERNAME_KEY, PASSWORD_KEY, CA_KEY] {
            data.remove(key);
        }
        if let Some(login) = relay {
            data.insert(USERNAME_KEY.into(), login.username.clone());
            data.insert(PASSWORD_KEY.into(), login.password.clone());
            if let Some(ca) = &login.ca {
                data.insert(CA_KEY.into(), ca.clone());
            }
        }
    };
    let mut stored = stored(api, req, "mailpit", &keys, overrides, &login).await?;
    Ok(stored.remove("password").unwrap_or_default())
}

/// The administrator's keys of a BlobStorage's store, and the
/// certificates of its gRPC ports (see `store_tls`), generated once and
/// written in one go.
pub async fn object_store_admin(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<(String, String), ProviderError> {
    let mut data = read(api, req).await?;
    let has =
        |data: &BTreeMap<String, String>, key: &str| data.get(key).is_some_and(|v| !v.is_empty());
    let tls = crate::store_tls::FILES.map(|(key, _)| key);
    let admin = [ADMIN_KEY_ID, ADMIN_SECRET];
    if !tls.iter().chain(&admin).all(|key| has(&data, key)) {
        // The certificates are made together, or not at all.
        if !tls.iter().all(|key| has(&data, key)) {
            data.extend(crate::store_tls::generate()?);
        }
        for key in admin {
            if !has(&data, key) {
                data.insert(key.into(), random_password());
            }
        }
        write(api, req, "object-store", &data, None).await?;
    }
    let mut take = |key: &str| data.remove(key).unwrap_or_default();
    Ok((take(ADMIN_KEY_ID), take(ADMIN_SECRET)))
}

/// The keys of a BlobStorage's bucket user in its credentials Secret.
const USER_KEY_ID: &str = "accessKeyID";
const USER_SECRET: &str = "secretAccessKey";

/// The bucket user's key the credentials Secret keeps, if any.
pub async fn bucket_user_key(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<Option<AccessKey>, ProviderError> {
    Ok(key_pair(&read(api, req).await?, USER_KEY_ID, USER_SECRET))
}

/// The store administrator's key the credentials Secret keeps, if any;
/// never made here (see [`object_store_admin`]).
pub async fn kept_object_store_admin(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<Option<AccessKey>, ProviderError> {
    Ok(key_pair(&read(api, req).await?, ADMIN_KEY_ID, ADMIN_SECRET))
}

/// Which store a BlobStorage's bucket is in, as its credentials Secret
/// tells: one of its own (the Secret holds that store's administrator
/// key), the namespace's (only the bucket user's key), or none yet.
pub async fn bucket_home(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<Option<Serving>, ProviderError> {
    let data = read(api, req).await?;
    Ok(if key_pair(&data, ADMIN_KEY_ID, ADMIN_SECRET).is_some() {
        Some(Serving::Own)
    } else if key_pair(&data, USER_KEY_ID, USER_SECRET).is_some() {
        Some(Serving::Namespace)
    } else {
        None
    })
}

/// The credentials Secrets in `namespace`, but `except`'s, that say their
/// BlobStorage's bucket is in the namespace's store (see
/// [`bucket_home`]), released ones too: a second witness, beside the
/// store's own bucket list, before the store is deleted.
pub async fn namespace_store_users(
    client: &kube::Client,
    namespace: &str,
    except: &str,
) -> Result<Vec<String>, ProviderError> {
    let labels = format!(
        "{}={},app.kubernetes.io/name=object-store",
        cro_provider_api::MANAGED_BY_LABEL,
        cro_provider_api::MANAGED_BY
    );
    let listed = kube::Api::<Secret>::namespaced(client.clone(), namespace)
        .list(&kube::api::ListParams::default().labels(&labels))
        .await
        .map_err(|e| {
            cro_kube::provider_error(
                format!("listing the object stores' Secrets in {namespace}"),
                &e,
            )
        })?;
    Ok(listed
        .items
        .iter()
        .filter(|s| s.metadata.name.as_deref() != Some(except))
        .filter(|s| {
            let data = secret_strings(s);
            key_pair(&data, ADMIN_KEY_ID, ADMIN_SECRET).is_none()
                && key_pair(&data, USER_KEY_ID, USER_SECRET).is_some()
        })
        .filter_map(|s| s.metadata.name.clone())
        .collect())
}

fn key_pair(data: &BTreeMap<String, String>, id: &str, secret: &str) -> Option<AccessKey> {
    match (data.get(id), data.get(secret)) {
        (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => Some(AccessKey {
            id: id.clone(),
            secret: secret.clone(),
        }),
        _ => None,
    }
}

/// Keeps `key` (just made: its secret is never shown again) in the
/// credentials Secret beside the administrator's.
pub async fn keep_bucket_user_key(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    key: &AccessKey,
) -> Result<(), ProviderError> {
    let mut data = read(api, req).await?;
    data.insert(USER_KEY_ID.into(), key.id.clone());
    data.insert(USER_SECRET.into(), key.secret.clone());
    write(api, req, "object-store", &data, None).await
}

/// The CR's credentials Secret's data (empty when there is none); an
/// error when it is not the CR's.
async fn read(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<BTreeMap<String, String>, ProviderError> {
    let name = credentials_secret_name(&req.name);
    let live = api.get_opt(&name).await.map_err(|e| {
        cro_kube::provider_error(format!("reading Secret {}/{name}", req.namespace), &e)
    })?;
    if let Some(l) = live
        .as_ref()
        .filter(|l| !crate::apply::is_ours(&l.metadata, &req.owner))
    {
        return Err(crate::apply::not_ours("Secret", &l.metadata, &req.owner));
    }
    Ok(live.as_ref().map(secret_strings).unwrap_or_default())
}

/// Makes a value the Secret does not hold yet.
type MakeValue = dyn Fn() -> String + Sync;

/// `keys` from the CR's credentials Secret: a value it holds, else the
/// tier's override, else a default. The Secret's other keys are kept as
/// `others` leaves them (it may set or remove some); written back when
/// anything changed.
async fn stored(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    app: &str,
    keys: &[(&str, &MakeValue)],
    overrides: &BTreeMap<String, String>,
    others: &(dyn Fn(&mut BTreeMap<String, String>) + Sync),
) -> Result<BTreeMap<String, String>, ProviderError> {
    let name = credentials_secret_name(&req.name);
    let err = |verb: &str, e: kube::Error| {
        cro_kube::provider_error(format!("{verb} Secret {}/{name}", req.namespace), &e)
    };
    let live = api.get_opt(&name).await.map_err(|e| err("reading", e))?;
    if let Some(l) = live
        .as_ref()
        .filter(|l| !crate::apply::is_ours(&l.metadata, &req.owner))
    {
        return Err(crate::apply::not_ours("Secret", &l.metadata, &req.owner));
    }
    let existing = live.as_ref().map(secret_strings).unwrap_or_default();
    // Existing values win: the database was initialised with them.
    let values: BTreeMap<String, String> = keys
        .iter()
        .map(|(key, default)| {
            let value = existing
                .get(*key)
                .filter(|v| !v.is_empty())
                .or_else(|| overrides.get(*key))
                .cloned()
                .unwrap_or_else(default);
            (key.to_string(), value)
        })
        .collect();
    // The Secret's other keys stay (a store's bucket user key) unless
    // `others` changes them.
    let mut data = existing.clone();
    others(&mut data);
    data.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
    // A key taken out is gone only once written without it: `write`
    // compares for a subset.
    let removed = existing.keys().any(|k| !data.contains_key(k));
    write(api, req, app, &data, live.filter(|_| !removed)).await?;
    Ok(values)
}

/// Writes `data` as the CR's credentials Secret, unless `live` (the
/// Secret as read) holds it already.
async fn write(
    api: &Objects<Secret>,
    req: &ResourceRequest,
    app: &str,
    data: &BTreeMap<String, String>,
    live: Option<Secret>,
) -> Result<(), ProviderError> {
    let name = credentials_secret_name(&req.name);
    let data = data.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let desired = opaque_secret(metadata(req, &name, app), data);
    let current = live.map(|s| serde_json::to_value(s).unwrap_or_default());
    if !current.is_some_and(|c| is_subset(&desired, &c)) {
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await
        .map_err(|e| {
            let message = format!("writing Secret {}/{name}", req.namespace);
            cro_kube::provider_error(message, &e)
        })?;
    }
    Ok(())
}

/// The credentials of a Postgres the Go operator created, from its Secret
/// `<name>-postgres-credentials` (keys `user`, `password`, `database`),
/// adopted as it is; the password is never changed. A missing Secret is
/// made again in its shape.
pub async fn adopt_go_postgres(
    api: &Objects<Secret>,
    req: &ResourceRequest,
) -> Result<Credentials, ProviderError> {
    let name = crate::legacy::postgres_secret_name(&req.name);
    let live = api.get_opt(&name).await.map_err(|e| {
        cro_kube::provider_error(format!("reading Secret {}/{name}", req.namespace), &e)
    })?;
    let existing = live.as_ref().and_then(crate::legacy::postgres_credentials);
    let creds = existing.unwrap_or_else(|| {
        BTreeMap::from([
            ("user".to_string(), "postgresuser".to_string()),
            ("password".to_string(), random_password()),
            ("database".to_string(), req.name.clone()),
        ])
    });
    let metadata = crate::legacy::adopted_metadata(req, &name, "postgres");
    let desired = opaque_secret(
        metadata,
        creds.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    crate::apply::adopt(api, &desired, &req.owner).await?;
    Ok(Credentials {
        username: creds["user"].clone(),
        password: creds["password"].clone(),
        database: creds["database"].clone(),
    })
}

/// What the Go operator writes in its `redis-config` (`getRedisConfData`,
/// openshift/provider_redis.go), so its next pass changes nothing. RDB
/// persistence only (AOF stays off): turning AOF on over existing RDB data
/// would start Redis empty.
const GO_REDIS_CONF: &str = "protected-mode no
port 6379
timeout 0
tcp-keepalive 300
daemonize no
supervised no
loglevel notice
databases 16
save 900 1
save 300 10
save 60 10000
stop-writes-on-bgsave-error yes
rdbcompression yes
rdbchecksum yes
dbfilename dump.rdb
slave-serve-stale-data yes
slave-read-only yes
repl-diskless-sync no
repl-disable-tcp-nodelay no
appendfilename \"appendonly.aof\"
appendfsync everysec
no-appendfsync-on-rewrite no
auto-aof-rewrite-percentage 100
auto-aof-rewrite-min-size 64mb
aof-load-truncated yes
lua-time-limit 5000
activerehashing no
aof-rewrite-incremental-fsync yes
dir /var/lib/redis/data
";

/// The ConfigMap the Go operator's Redis of a namespace share: created when
/// missing (as the Go operator writes it), never changed.
pub async fn ensure_go_redis_config(
    api: &Objects<k8s_openapi::api::core::v1::ConfigMap>,
) -> Result<(), ProviderError> {
    let name = crate::legacy::REDIS_CONFIG_MAP;
    let err = |e: kube::Error| cro_kube::provider_error(format!("ConfigMap {name}"), &e);
    if api.get_opt(name).await.map_err(err)?.is_some() {
        return Ok(());
    }
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"redis.conf": GO_REDIS_CONF}
    }))
    .map_err(|e| ProviderError::transient(format!("building ConfigMap {name}: {e}")))?;
    match api.create(&Default::default(), &cm).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(err(e)),
    }
}
