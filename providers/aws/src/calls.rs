//! Every AWS call counted by service, operation and outcome (the budget
//! the operator is held to: a few calls per resource per hour at rest).

use std::{collections::BTreeMap, sync::Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CallOutcome {
    Success,
    Throttled,
    Error,
}

impl CallOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Success => "success",
            CallOutcome::Throttled => "throttled",
            CallOutcome::Error => "error",
        }
    }
}

/// (service, operation, outcome) → count.
pub type CallCounts = BTreeMap<(&'static str, &'static str, CallOutcome), u64>;

#[derive(Default)]
pub struct Calls(Mutex<CallCounts>);

impl Calls {
    pub fn record(&self, service: &'static str, operation: &'static str, outcome: CallOutcome) {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry((service, operation, outcome)).or_default() += 1;
    }

    pub fn snapshot(&self) -> CallCounts {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}
