//! Access tokens from a service account's key, against the test
//! environment's token endpoint (tests/testenv/gcp_server.py), which
//! verifies the assertion as Google documents it and lets API calls in
//! only with a token it issued. Its own binary, its tests one at a time
//! ([`ONE_AT_A_TIME`]): the token faults set here match every exchange.

mod support;

use std::sync::Arc;

use cro_provider_api::ErrorKind;
use cro_provider_gcp::{
    rest::{FixedToken, Token},
    sqladmin,
};
use serde_json::{Value, json};
use support::{fault, key_file, rest_with, token_of};

/// Held by each test: a fault set for one would meet another's exchange.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sets the token endpoint's fault: it matches every exchange.
fn token_fault(f: Option<Value>) {
    fault(
        "token",
        f.map(|mut f| {
            f["method"] = json!("oauth2.token");
            f["match"] = json!("");
            f
        }),
    );
}

#[tokio::test]
async fn an_exchange_whose_answer_is_lost_is_made_again_and_the_token_is_kept() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let token = token_of(&key_file());
    let rest = rest_with(token.clone());
    token_fault(Some(json!({"lose_answer": true, "times": 1})));
    let lost = sqladmin::get(&rest, "p1", "none")
        .await
        .expect_err("the token's answer was lost");
    assert_eq!(lost.kind(), ErrorKind::Transient, "{lost}");
    // The next call exchanges again; the stand-in's API lets it in.
    assert_eq!(
        sqladmin::get(&rest, "p1", "none")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        None
    );
    // The token is kept: an endpoint that now refuses is not asked.
    token_fault(Some(
        json!({"code": 400, "error": "invalid_grant", "message": "refused", "times": 1}),
    ));
    let kept = token.bearer().await;
    token_fault(None);
    assert!(kept.is_ok(), "{kept:?}");
}

/// A key of the stand-in's account made anew: its signature is not the
/// account's key's.
fn forged_key() -> String {
    use aws_lc_rs::{encoding::AsDer, rsa::KeySize, signature::RsaKeyPair};
    let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap_or_else(|e| panic!("{e}"));
    let der = pair.as_der().unwrap_or_else(|e| panic!("{e}"));
    let body = data_encoding::BASE64.encode(der.as_ref());
    format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")
}

#[tokio::test]
async fn an_assertion_signed_with_another_key_is_refused() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut forged = key_file();
    forged["private_key"] = json!(forged_key());
    let refused = sqladmin::get(&rest_with(token_of(&forged)), "p1", "none")
        .await
        .expect_err("a signature of another key is refused");
    assert_eq!(refused.kind(), ErrorKind::Permanent, "{refused}");
    assert!(
        refused.message().contains("Invalid JWT Signature."),
        "{refused}"
    );
}

#[tokio::test]
async fn a_key_the_endpoint_does_not_know_waits_for_a_person_and_a_made_up_token_is_refused() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut other = key_file();
    other["client_email"] = json!("someone-else@p1.iam.gserviceaccount.com");
    let refused = sqladmin::get(&rest_with(token_of(&other)), "p1", "none")
        .await
        .expect_err("an unknown account is refused");
    assert_eq!(refused.kind(), ErrorKind::Permanent, "{refused}");
    assert!(
        refused.message().contains("account not found")
            && refused
                .message()
                .contains("someone-else@p1.iam.gserviceaccount.com")
            && !refused.message().contains("PRIVATE KEY"),
        "{refused}"
    );
    let made_up = Arc::new(FixedToken("ya29.made-up".into()));
    let unauthenticated = sqladmin::get(&rest_with(made_up), "p1", "none")
        .await
        .expect_err("a token the endpoint never issued is refused");
    assert!(
        unauthenticated
            .message()
            .contains("invalid authentication credentials"),
        "{unauthenticated}"
    );
}
