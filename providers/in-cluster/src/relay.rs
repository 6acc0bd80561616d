//! Relaying an SMTPCredentialSet's mail to a smarthost the platform names
//! (the tier's `mailRelay`, beside `mailServer: "own"`). Mailpit keeps a
//! copy for a person to read and passes each mail on before it answers the
//! application, so a refusal reaches the sender: nothing is lost silently.
//!
//! The smarthost's login lives in a Secret of the operator namespace. A pod
//! reads only Secrets of its own namespace, so the login is copied into the
//! CR's credentials Secret, which the tenant can read: the platform gives
//! the relay a login meant for tenants (see docs/security.md).

use cro_provider_api::ProviderError;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tier's `mailRelay`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Relay {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub tls: RelayTls,
    /// A Secret of the operator namespace with `username` and `password`
    /// (and `ca.crt`, the one CA the smarthost's certificate is checked
    /// against); none for a smarthost that takes mail without a login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,
}

/// How the relay secures its connection to the smarthost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayTls {
    /// Plain SMTP upgraded with STARTTLS (submission, port 587).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: only for a smarthost without a login.
    None,
}

fn default_port() -> u16 {
    587
}

/// The key of the tier that holds it.
pub const KEY: &str = "mailRelay";

/// Parses and checks `mailRelay` (at `at`, e.g. `createStrategy.mailRelay`).
pub fn parse(value: Value, at: &str) -> Result<Relay, ProviderError> {
    let invalid = |m: String| Err(ProviderError::invalid_strategy(format!("{at}.{m}")));
    let relay: Relay = match serde_path_to_error::deserialize(value) {
        Ok(relay) => relay,
        // The path is "." for the object itself (a field left out).
        Err(e) => return invalid(format!("{}: {}", e.path(), e.inner()).replace(".: ", ": ")),
    };
    if relay.host.is_empty()
        || relay
            .host
            .contains(|c: char| c.is_whitespace() || c == '/' || c == ':')
    {
        return invalid(format!(
            "host is {:?}; it takes the smarthost's DNS name or IPv4 address, without a port (that is port)",
            relay.host
        ));
    }
    if relay.port == 0 {
        return invalid("port is 0; it takes the smarthost's SMTP port, 587 unless set".into());
    }
    match &relay.credentials_secret {
        Some(_) if relay.tls == RelayTls::None => invalid(
            "tls is \"none\" with a credentialsSecret: the login would cross the network unencrypted; use \"starttls\" or \"tls\", or leave credentialsSecret out".into(),
        ),
        Some(name) if !is_secret_name(name) => invalid(format!(
            "credentialsSecret is {name:?}, which is not a Secret's name (lowercase letters, digits, '-' and '.')"
        )),
        _ => Ok(relay),
    }
}

fn is_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// The path of a `credentialsSecret` in the tier, if it names one: it
/// reads a Secret of the operator namespace, so only a tier there may.
pub fn operator_only_key(strategy: &Value) -> Option<String> {
    ["strategy", "createStrategy"].into_iter().find_map(|key| {
        let named = &strategy[key][KEY]["credentialsSecret"];
        (!named.is_null()).then(|| format!("{key}.{KEY}.credentialsSecret"))
    })
}

/// The smarthost's login, as read from the operator namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: String,
    pub ca: Option<String>,
    /// The source Secret's version: a new one rolls the relay's pod,
    /// which reads its environment only when it starts.
    pub version: String,
}

/// How often a relaying CR reads its login again.
pub const LOGIN_RECHECK: std::time::Duration = std::time::Duration::from_secs(120);

/// The keys of the login in the CR's credentials Secret.
pub const USERNAME_KEY: &str = "relayUsername";
pub const PASSWORD_KEY: &str = "relayPassword";
pub const CA_KEY: &str = "relayCA";

/// Reads `name` from the operator namespace. A missing Secret or key is
/// retried (the platform may be about to create it); the CR is not failed.
pub async fn login(
    client: &Client,
    operator_namespace: Option<&str>,
    name: &str,
) -> Result<Login, ProviderError> {
    let retry =
        |m: String| ProviderError::transient(m).retry_in(std::time::Duration::from_secs(30));
    let Some(ns) = operator_namespace else {
        return Err(retry(format!(
            "the tier's {KEY}.credentialsSecret names Secret {name} of the operator namespace, which this process does not know: set --operator-namespace (OPERATOR_NAMESPACE), as the shipped manifests do from the pod's namespace"
        )));
    };
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| cro_kube::provider_error(format!("reading Secret {ns}/{name}"), &e))?
        .ok_or_else(|| {
            retry(format!(
                "Secret {ns}/{name}, the smarthost's login that the tier's {KEY}.credentialsSecret names, does not exist; create it with the keys username and password (and ca.crt to check the smarthost's certificate against)"
            ))
        })?;
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    let mut data = cro_kube::secret_strings(&secret);
    let mut take = |key: &str| data.remove(key).filter(|v| !v.is_empty());
    let (Some(username), Some(password)) = (take("username"), take("password")) else {
        return Err(retry(format!(
            "Secret {ns}/{name}, the smarthost's login that the tier's {KEY}.credentialsSecret names, needs the keys username and password, both not empty"
        )));
    };
    Ok(Login {
        username,
        password,
        ca: take("ca.crt"),
        version,
    })
}

/// Where the relay's CA file is mounted in the mail server's pod.
pub const CA_DIR: &str = "/etc/mail-relay";

/// The pod template annotation that carries [`Login::version`].
pub const LOGIN_VERSION: &str = "cloud-resources.integreatly.org/mail-relay-login";

/// Mailpit's environment that relays every mail through `relay`, with the
/// login from the CR's credentials Secret `secret` when there is one; the
/// CA's volume, when the login has a CA.
pub fn mailpit_env(
    relay: &Relay,
    login: Option<&Login>,
    secret: &str,
) -> (Vec<Value>, Option<Value>) {
    let var = |name: &str, value: &str| json!({"name": name, "value": value});
    let from = |name: &str, key: &str| json!({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}});
    let mut env = vec![
        var("MP_SMTP_RELAY_HOST", &relay.host),
        var("MP_SMTP_RELAY_PORT", &relay.port.to_string()),
        // Every mail, not only those a person releases in the UI.
        var("MP_SMTP_RELAY_ALL", "true"),
        // The smarthost's refusal is the application's answer.
        var("MP_SMTP_RELAY_FWD_SMTP_ERRORS", "true"),
    ];
    match relay.tls {
        RelayTls::Starttls => env.push(var("MP_SMTP_RELAY_STARTTLS", "true")),
        RelayTls::Tls => env.push(var("MP_SMTP_RELAY_TLS", "true")),
        RelayTls::None => {}
    }
    let Some(login) = login else {
        return (env, None);
    };
    env.push(var("MP_SMTP_RELAY_AUTH", "plain"));
    env.push(from("MP_SMTP_RELAY_USERNAME", USERNAME_KEY));
    env.push(from("MP_SMTP_RELAY_PASSWORD", PASSWORD_KEY));
    let volume = login.ca.as_ref().map(|_| {
        // Go reads the CAs it trusts from SSL_CERT_FILE when it is set.
        env.push(var("SSL_CERT_FILE", &format!("{CA_DIR}/ca.crt")));
        json!({"name": "mail-relay-ca", "secret": {"secretName": secret, "items": [{"key": CA_KEY, "path": "ca.crt"}]}})
    });
    (env, volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(v: Value) -> Result<Relay, String> {
        parse(v, "createStrategy.mailRelay").map_err(|e| e.to_string())
    }

    #[test]
    fn a_relay_defaults_to_submission_with_starttls() {
        let relay = parsed(json!({"host": "smtp.example.com"}));
        assert_eq!(
            relay,
            Ok(Relay {
                host: "smtp.example.com".into(),
                port: 587,
                tls: RelayTls::Starttls,
                credentials_secret: None,
            })
        );
    }

    #[test]
    fn a_login_never_crosses_the_network_unencrypted() {
        let err = parsed(json!({"host": "smtp", "tls": "none", "credentialsSecret": "login"}));
        assert!(
            err.as_ref()
                .is_err_and(|e| e.contains("createStrategy.mailRelay.tls")),
            "{err:?}"
        );
        let open = parsed(json!({"host": "smtp", "port": 25, "tls": "none"}));
        assert!(open.is_ok(), "{open:?}");
    }

    #[test]
    fn bad_values_name_their_field() {
        for (tier, named) in [
            (json!({"host": ""}), "mailRelay.host"),
            (json!({"host": "smtp:587"}), "mailRelay.host"),
            (json!({"host": "smtp", "port": 0}), "mailRelay.port"),
            (json!({"host": "smtp", "port": 70000}), "mailRelay.port"),
            (json!({"host": "smtp", "tls": "ssl"}), "mailRelay.tls"),
            (
                json!({"host": "smtp", "credentialsSecret": "A_B"}),
                "mailRelay.credentialsSecret",
            ),
            (json!({"host": "smtp", "user": "x"}), "mailRelay.user"),
        ] {
            let err = parsed(tier.clone());
            assert!(
                err.as_ref().is_err_and(|e| e.contains(named)),
                "{tier}: {err:?}"
            );
        }
    }

    #[test]
    fn only_the_operator_namespace_may_name_a_login() {
        let tier = json!({"createStrategy": {"mailServer": "own", "mailRelay": {"host": "smtp", "credentialsSecret": "login"}}});
        assert_eq!(
            operator_only_key(&tier).as_deref(),
            Some("createStrategy.mailRelay.credentialsSecret")
        );
        let open = json!({"strategy": {"mailServer": "own", "mailRelay": {"host": "smtp"}}});
        assert_eq!(operator_only_key(&open), None);
    }

    #[test]
    fn the_login_reaches_mailpit_from_the_crs_secret_only() {
        let relay = Relay {
            host: "smtp.example.com".into(),
            port: 587,
            tls: RelayTls::Starttls,
            credentials_secret: Some("login".into()),
        };
        let login = Login {
            username: "u".into(),
            password: "p".into(),
            ca: Some("pem".into()),
            version: "7".into(),
        };
        let (env, volume) = mailpit_env(&relay, Some(&login), "mail-credentials");
        let text = serde_json::to_string(&env).unwrap_or_default();
        assert!(
            !text.contains("\"p\""),
            "the password is never in the Deployment: {text}"
        );
        let find = |n: &str| {
            env.iter()
                .find(|e| e["name"] == n)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            find("MP_SMTP_RELAY_PASSWORD")["valueFrom"]["secretKeyRef"]["key"],
            PASSWORD_KEY
        );
        assert_eq!(find("MP_SMTP_RELAY_STARTTLS")["value"], "true");
        assert_eq!(find("MP_SMTP_RELAY_FWD_SMTP_ERRORS")["value"], "true");
        assert_eq!(find("SSL_CERT_FILE")["value"], "/etc/mail-relay/ca.crt");
        let volume = volume.unwrap_or_default();
        assert_eq!(volume["secret"]["items"][0]["key"], CA_KEY);
    }
}
