//! AWS's Describe calls, read the same way for every SDK: one resource by
//! identifier (`None` when AWS says it does not exist), or every one of the
//! account and region through the SDK's paginator (a stream of pages of its
//! own output type).

use std::collections::BTreeMap;

use aws_sdk_rds::{
    config::http::HttpResponse,
    error::{ProvideErrorMetadata, SdkError},
};
use aws_smithy_async::future::pagination_stream::PaginationStream;
use cro_provider_api::ProviderError;

use crate::errors::Answer;

/// Every item of every page, in AWS's order; `op` names the call in an
/// error (the listing is all or nothing: a page lost fails it).
pub async fn every_item<P, E, I: Clone>(
    pages: PaginationStream<Result<P, SdkError<E, HttpResponse>>>,
    op: &str,
    items: impl Fn(&P) -> &[I],
) -> Result<Vec<I>, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let pages = pages.try_collect().await.named(op, "(all)")?;
    Ok(pages.iter().flat_map(items).cloned().collect())
}

/// The items that carry an identifier, converted and keyed by it.
pub fn by_id<I, T>(items: &[I], id: impl Fn(&I) -> Option<&str>) -> BTreeMap<String, T>
where
    T: for<'a> From<&'a I>,
{
    items
        .iter()
        .filter_map(|i| Some((id(i)?.to_string(), T::from(i))))
        .collect()
}

/// `$one` (the resource of an identifier, if it exists) and `$all` (every
/// one of the account and region, by identifier) over `$call` of a
/// database SDK, whose types differ from the other's by name only: `$id`
/// is both the request's filter and the item's identifier, `$items` the
/// output's list, `$gone` the not-found error's test.
macro_rules! one_and_all {
    ($one:ident, $all:ident: $client:ty => $live:ty,
     $op:literal, $call:ident, $id:ident, $items:ident, $gone:ident) => {
        async fn $one(
            svc: &$client,
            id: &str,
        ) -> Result<Option<$live>, cro_provider_api::ProviderError> {
            use $crate::errors::Answer;
            let out = svc.$call().$id(id).send().await;
            let out = out.unless_missing(|e| e.$gone(), $op, id)?;
            Ok(out.and_then(|o| o.$items().first().map(<$live>::from)))
        }

        async fn $all(
            svc: &$client,
        ) -> Result<std::collections::BTreeMap<String, $live>, cro_provider_api::ProviderError> {
            let pages = svc.$call().max_records(100).into_paginator().send();
            let all = $crate::describe::every_item(pages, $op, |p| p.$items()).await?;
            Ok($crate::describe::by_id(&all, |i| i.$id()))
        }
    };
}
pub(crate) use one_and_all;
