//! kube's watcher, made to relist after it lost the API server.
//!
//! kube resumes a watch from the last resourceVersion it saw, which is
//! right after a dropped connection but wrong after an etcd restore: every
//! resourceVersion the operator holds is then from etcd's future, the API
//! server answers a watch from one with silence until the cluster's writes
//! pass it, and then streams only what comes after, so whatever changed in
//! between (a CR deleted right after the restore) is never seen. A restore
//! always takes the API server away, so a watch that could not even reach
//! it starts over with a list, which shows what exists. A watch the API
//! server refused (an HTTP status: 410 Gone, 429, 403) is left to kube,
//! which relists on 410 and resumes otherwise.

use std::fmt::Debug;

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{Api, Resource, runtime::watcher};
use serde::de::DeserializeOwned;

type Events<K> = BoxStream<'static, watcher::Result<watcher::Event<K>>>;

/// `watcher(api, config)`, started again from a list whenever a watch
/// could not reach the API server.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    futures::stream::unfold(None, move |running: Option<Events<K>>| {
        let (api, config) = (api.clone(), config.clone());
        async move {
            let mut events = running.unwrap_or_else(|| watcher(api, config).boxed());
            let event = events.next().await?;
            let next = (!lost_the_api_server(&event)).then_some(events);
            Some((event, next))
        }
    })
}

/// Whether `event` says a watch could not be started because no answer
/// came from the API server at all.
fn lost_the_api_server<K>(event: &watcher::Result<watcher::Event<K>>) -> bool {
    matches!(event, Err(watcher::Error::WatchStartFailed(e)) if !matches!(e, kube::Error::Api(_)))
}
