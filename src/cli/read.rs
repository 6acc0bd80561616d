//! `plan` and `status`: read the cluster and the clouds as the operator
//! would, and print; they write nothing.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use anyhow::Context as _;
use cro_provider_api::Fence;
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use super::{
    args::{ClusterArgs, PlanArgs, PlanFormat, StatusArgs},
    connect::{Connected, SERVICE_ACCOUNT_NAMESPACE, Work, connect},
};
use crate::{cli::plan, cli::status, config::ConfigReader, providers, reconcile::Settings};
use cro_runtime::cache;

/// What `plan` and `status` read the cluster and the clouds through, as
/// the operator would: its ConfigMaps (with `overrides` standing in) and
/// its providers. Logs go to stderr, quietly: stdout is the answer.
struct Reader {
    client: kube::Client,
    settings: Settings,
    config: ConfigReader,
    providers: BTreeMap<&'static str, Arc<dyn cro_provider_api::Provider>>,
}

impl Reader {
    async fn connect(
        cluster: &ClusterArgs,
        namespaces: &[String],
        config_files: &[PathBuf],
    ) -> anyhow::Result<Reader> {
        let Connected {
            client,
            settings,
            providers,
        } = connect(cluster, namespaces, Work::read_only(), None, &Fence::open()).await?;
        let providers = providers::build(&client, providers, None);
        let overrides = plan::config_overrides(config_files, &settings.operator_namespace)?;
        let scopes = cache::scopes(namespaces);
        let config =
            ConfigReader::new(client.clone(), settings.operator_namespace.clone(), &scopes)
                .with_namespace_config(settings.namespace_config)
                .with_overrides(overrides);
        let watches = config.clone();
        tokio::spawn(async move { watches.run().await });
        let providers = providers.into_iter().map(|p| (p.name(), p)).collect();
        Ok(Reader {
            client,
            settings,
            config,
            providers,
        })
    }

    fn scope<'a>(&'a self, namespaces: &'a [String]) -> plan::Scope<'a> {
        plan::Scope {
            client: &self.client,
            config: &self.config,
            settings: &self.settings,
            providers: &self.providers,
            namespaces,
        }
    }
}

fn quiet_logs() {
    tracing_subscriber::registry()
        .with(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")))
        .with(fmt::layer().with_writer(std::io::stderr))
        .init();
}

/// Prints the plan; the exit status says whether anything would change.
pub async fn plan(args: PlanArgs) -> anyhow::Result<i32> {
    quiet_logs();
    let reader = Reader::connect(&args.cluster, &args.namespaces, &args.config).await?;
    let planned = plan::plan(&reader.scope(&args.namespaces))
        .await
        .context("listing the resources to plan")?;
    match args.output {
        PlanFormat::Text => print!("{}", planned.text()),
        PlanFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&planned).context("serialising the plan")?
        ),
    }
    eprint!("{}", planned.summary());
    Ok(planned.exit_code())
}

/// Explains one CR. The cloud is read only when the operator's namespace
/// is known (its ConfigMaps say how to reach it).
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    quiet_logs();
    let (resource, name) = status::target(&args.target)?;
    let namespace = match args.namespace.clone() {
        Some(ns) => ns,
        None => {
            super::connect::kube_config(&args.cluster)
                .await?
                .default_namespace
        }
    };
    let namespaces = [namespace.clone()];
    let known = args.cluster.operator_namespace.is_some()
        || std::path::Path::new(SERVICE_ACCOUNT_NAMESPACE).exists();
    let reader = match known {
        true => Some(Reader::connect(&args.cluster, &namespaces, &[]).await?),
        false => None,
    };
    let client = match &reader {
        Some(r) => r.client.clone(),
        None => kube::Client::try_from(super::connect::kube_config(&args.cluster).await?).context(
            "building the Kubernetes client from the kubeconfig (its TLS settings or proxy)",
        )?,
    };
    let scope = reader.as_ref().map(|r| r.scope(&namespaces));
    let cloud = scope.as_ref().ok_or(
        "give --operator-namespace (OPERATOR_NAMESPACE), the namespace the operator runs in, to read the cloud through its configuration",
    );
    let report = status::gather(&client, (&resource, &namespace, &name), cloud).await?;
    match args.output {
        PlanFormat::Text => print!("{}", status::text(&report)),
        PlanFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the status")?
        ),
    }
    Ok(())
}
