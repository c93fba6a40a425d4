use super::{profile_keys, Auth};

#[test]
fn a_key_is_an_api_key_or_a_typed_access_key_pair_with_its_session_token() {
    match Auth::from_key("ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl").ok() {
        Some(Auth::ApiKey(k)) => assert_eq!(k, "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl"),
        _ => panic!("a Bedrock API key"),
    }
    match Auth::from_key(" AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ").ok() {
        Some(Auth::Keys {
            id,
            secret,
            session,
        }) => {
            assert_eq!(id, "AKIAIOSFODNN7EXAMPLE");
            assert_eq!(secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
            assert_eq!(session, None);
        }
        _ => panic!("a key pair"),
    }
    match Auth::from_key("ASIAIOSFODNN7EXAMPLE:secret:FwoGZXIvYXdzEB0aDH").ok() {
        Some(Auth::Keys { session, .. }) => {
            assert_eq!(session.as_deref(), Some("FwoGZXIvYXdzEB0aDH"))
        }
        _ => panic!("temporary credentials"),
    }
    let alone = Auth::from_key("AKIAIOSFODNN7EXAMPLE")
        .err()
        .expect("refused");
    assert!(
        alone.reason.contains("ACCESS_KEY_ID:SECRET_ACCESS_KEY"),
        "{}",
        alone.reason
    );
    assert_eq!(alone.class, crate::limits::ErrorClass::Auth);
}

#[test]
fn a_profile_is_read_from_its_own_section_only() {
    let file = "# comment\n[default]\naws_access_key_id = AKIADEFAULT000000000\naws_secret_access_key=d\n\n[work]\naws_access_key_id = ASIAWORK000000000000\n aws_secret_access_key = w/s+x \naws_session_token = tok\n[sso]\nsso_session = corp\n";
    match profile_keys(file, "work") {
        Some(Auth::Keys {
            id,
            secret,
            session,
        }) => {
            assert_eq!(
                (id.as_str(), secret.as_str()),
                ("ASIAWORK000000000000", "w/s+x")
            );
            assert_eq!(session.as_deref(), Some("tok"));
        }
        _ => panic!("the work profile"),
    }
    match profile_keys(file, "default") {
        Some(Auth::Keys { id, session, .. }) => {
            assert_eq!(id, "AKIADEFAULT000000000");
            assert_eq!(session, None, "the next section's token is not this one's");
        }
        _ => panic!("the default profile"),
    }
    assert!(
        profile_keys(file, "sso").is_none(),
        "an SSO profile has no keys to sign with"
    );
    assert!(profile_keys(file, "missing").is_none());
}

#[test]
fn sigv4_is_dated_by_the_given_clock_and_scoped_to_the_region_and_service() {
    let client = crate::providers::kinds::tests::client();
    let mut req = client
        .post("https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/invoke")
        .header("content-type", "application/json")
        .body("{}")
        .build()
        .unwrap();
    let keys = Auth::from_key("ASIAIOSFODNN7EXAMPLE:secret:session-token")
        .ok()
        .unwrap();
    // 2026-12-06T23:59:59Z: the date of the scope is the clock's, not the machine's.
    keys.apply(&mut req, "eu-west-1", 1_796_601_599_000)
        .ok()
        .unwrap();
    let h = |n: &str| req.headers().get(n).unwrap().to_str().unwrap().to_string();
    assert_eq!(h("x-amz-date"), "20261206T235959Z");
    assert_eq!(h("x-amz-security-token"), "session-token");
    let auth = h("authorization");
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7EXAMPLE/20261206/eu-west-1/bedrock/aws4_request, SignedHeaders="),
        "{auth}"
    );
    assert!(
        auth.contains("x-amz-security-token"),
        "the token is signed: {auth}"
    );
    assert!(req.headers()["authorization"].is_sensitive());

    let mut req = client.get("https://x/model/m/invoke").build().unwrap();
    Auth::from_key("bedrock-api-key-abc")
        .ok()
        .unwrap()
        .apply(&mut req, "us-east-1", 0)
        .ok()
        .unwrap();
    assert_eq!(req.headers()["authorization"], "Bearer bedrock-api-key-abc");
    assert!(
        req.headers().get("x-amz-date").is_none(),
        "an API key is not signed"
    );
}
