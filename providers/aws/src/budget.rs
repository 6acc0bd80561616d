//! A client-side call budget: a token bucket per account, region and
//! service, in front of every request the SDK sends (retries included).
//! AWS throttles per account and region, and the operator shares those
//! limits with every other tool of the account; RDS documents a burst of
//! 300 and 12 requests per second sustained
//! (<https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-api-throttling.html>).
//! ElastiCache, S3 control calls, IAM and SES publish no number, so the
//! same default applies to them.
//!
//! A call over budget waits for its token instead of failing: the budget
//! slows reconciles down, it never fails a CR. The bucket is `governor`'s
//! (GCRA, the token bucket's equivalent).

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::{
    http::{
        HttpConnector, HttpConnectorFuture, SharedHttpClient, SharedHttpConnector, http_client_fn,
    },
    orchestrator::HttpRequest,
};
use cro_provider_api::Fence;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::fenced_https::FencedHttps;

/// Calls per second and burst for each account, region and service.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Sustained calls per second.
    pub rate: f64,
    /// Calls that may go at once after a quiet period.
    pub burst: u32,
}

impl Default for Budget {
    /// Half of RDS's sustained rate and a tenth of its burst, so other
    /// tools of the account keep the rest.
    fn default() -> Self {
        Budget {
            rate: 6.0,
            burst: 30,
        }
    }
}

impl Budget {
    /// Why the budget cannot work, naming the flags.
    pub fn check(&self) -> Result<(), BudgetError> {
        self.quota().map(|_| ())
    }

    /// One call every 1/rate seconds, `burst` at once.
    fn quota(&self) -> Result<Quota, BudgetError> {
        // A period under a nanosecond is no limit at all.
        let period = (self.rate.is_finite() && self.rate > 0.0 && self.rate <= 1e9)
            .then(|| Duration::from_secs_f64(1.0 / self.rate))
            .and_then(Quota::with_period)
            .ok_or(BudgetError::Rate(self.rate))?;
        let burst = NonZeroU32::new(self.burst).ok_or(BudgetError::Burst)?;
        Ok(period.allow_burst(burst))
    }
}

/// A budget that cannot work, naming the flag to fix.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "--aws-api-rate (AWS_API_RATE) must be a positive number of calls per second, at most 1e9, not {0}"
    )]
    Rate(f64),
    #[error("--aws-api-burst (AWS_API_BURST) must be at least 1")]
    Burst,
}

/// Sends each request once the bucket allows it, if the fence still
/// allows it then (the sockets beneath ask again for every write).
#[derive(Debug)]
struct Limited {
    inner: FencedHttps,
    bucket: Arc<DefaultDirectRateLimiter>,
    fence: Fence,
}

impl HttpConnector for Limited {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (inner, bucket, fence) = (self.inner.clone(), self.bucket.clone(), self.fence.clone());
        HttpConnectorFuture::new(async move {
            if bucket.check().is_err() {
                tracing::debug!("AWS call budget spent; waiting");
                bucket.until_ready().await;
            }
            // A process frozen while it waited (or before) learns it here,
            // before it opens a connection.
            if !fence.allows() {
                tracing::warn!(uri = %request.uri(), "{}", cro_provider_api::fence::FENCED);
                return Err(ConnectorError::other(
                    cro_provider_api::fence::FENCED.into(),
                    None,
                ));
            }
            inner.call(request).await
        })
    }
}

/// An HTTPS client with `budget` and `fence` in front: give one to each
/// service client of an account and region.
pub fn limited_client(budget: Budget, fence: Fence) -> SharedHttpClient {
    let https = FencedHttps::new(
        fence.clone(),
        crate::fenced_https::CONNECT_TIMEOUT,
        cro_provider_api::proxy::Proxies::from_env(),
    );
    // The flags are checked at start, so a budget that cannot work never
    // gets here; were one to, the slowest limit stands in, not a panic.
    let quota = budget
        .quota()
        .unwrap_or_else(|_| Quota::per_second(NonZeroU32::MIN));
    let bucket = Arc::new(RateLimiter::direct(quota));
    http_client_fn(move |settings, _| {
        SharedHttpConnector::new(Limited {
            inner: https.answering_within(settings.read_timeout()),
            bucket: bucket.clone(),
            fence: fence.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long each call, made at the given millisecond, waits for the
    /// budget on a clock that moves only when told (a waiting call moves
    /// it to when it may go).
    fn waits(budget: Budget, calls_at_ms: &[u64]) -> Vec<u64> {
        use governor::{
            clock::{Clock, FakeRelativeClock, Reference},
            nanos::Nanos,
        };
        let clock = FakeRelativeClock::default();
        let quota = budget.quota().unwrap_or_else(|e| panic!("{e}"));
        let bucket = RateLimiter::direct_with_clock(quota, clock.clone());
        let start = clock.now();
        calls_at_ms
            .iter()
            .map(|ms| {
                let asked = start + Nanos::from(Duration::from_millis(*ms));
                if clock.now() < asked {
                    clock.advance(Duration::from(asked.duration_since(clock.now())));
                }
                while let Err(not_until) = bucket.check() {
                    clock.advance(not_until.wait_time_from(clock.now()));
                }
                Duration::from(clock.now().duration_since(asked)).as_millis() as u64
            })
            .collect()
    }

    #[test]
    fn the_burst_goes_at_once_then_calls_are_spaced_at_the_rate() {
        let budget = Budget {
            rate: 2.0,
            burst: 3,
        };
        assert_eq!(waits(budget, &[0, 0, 0, 0, 0]), vec![0, 0, 0, 500, 1000]);
    }

    #[test]
    fn a_quiet_period_refills_the_bucket_up_to_the_burst_only() {
        let budget = Budget {
            rate: 2.0,
            burst: 2,
        };
        // Spent at 0; 10 s later the bucket holds 2 tokens, not 20.
        assert_eq!(
            waits(budget, &[0, 0, 10_000, 10_000, 10_000]),
            vec![0, 0, 0, 0, 500]
        );
    }

    #[test]
    fn calls_over_budget_go_one_per_period() {
        let budget = Budget {
            rate: 10.0,
            burst: 1,
        };
        let w = waits(budget, &[0, 0, 0, 0]);
        assert_eq!(w, vec![0, 100, 200, 300]);
    }

    #[test]
    fn a_budget_that_cannot_work_names_its_flag() {
        // Row: (rate, burst, the flag the error names)
        let rows = [
            (0.0, 1, "--aws-api-rate"),
            (f64::NAN, 1, "--aws-api-rate"),
            (1e12, 1, "--aws-api-rate"),
            (1.0, 0, "--aws-api-burst"),
        ];
        for (rate, burst, flag) in rows {
            let e = Budget { rate, burst }.check().unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
        }
        assert_eq!(Budget::default().check(), Ok(()));
    }
}
