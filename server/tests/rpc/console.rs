//! The web console at `/` on the serving port: the embedded files with
//! their content types and security headers, only GET and HEAD, 404 for
//! anything else and with `--no-ui`, behind the same origin and Host rules
//! as the RPCs. The files are public (they hold no data); every call the
//! page makes needs the token.

use crate::metrics::{Http, get_with, request};
use crate::support::server::*;
use agent_harness_protocol::pb;
use agent_harness_server::ServeOptions;
use agent_harness_server::web::{ASSETS, CONTENT_SECURITY_POLICY};

/// Every console answer, found or not, carries these (lowercased head).
fn assert_security_headers(resp: &Http, what: &str) {
    for line in [
        format!(
            "content-security-policy: {}",
            CONTENT_SECURITY_POLICY.to_ascii_lowercase()
        ),
        "x-content-type-options: nosniff".into(),
        "x-frame-options: deny".into(),
        "referrer-policy: no-referrer".into(),
    ] {
        assert!(
            resp.head.contains(&line),
            "{what}: {line} in\n{}",
            resp.head
        );
    }
    assert!(
        !resp.head.contains("access-control-allow-origin"),
        "{what}: no CORS for the files"
    );
}

#[tokio::test]
async fn every_file_is_served_with_its_type_and_the_security_headers() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    assert!(ASSETS.iter().any(|a| a.path == "/"));
    for a in ASSETS {
        let resp = get_with(server.addr, a.path, &host, "").await;
        assert_eq!(resp.status, 200, "{}: {}", a.path, resp.head);
        assert!(
            resp.head
                .contains(&format!("content-type: {}\r\n", a.content_type)),
            "{}: {}",
            a.path,
            resp.head
        );
        assert_eq!(resp.body.as_bytes(), a.body, "{}", a.path);
        assert_security_headers(&resp, a.path);

        let head = request(server.addr, "HEAD", a.path, &host, "").await;
        assert_eq!(head.status, 200, "HEAD {}", a.path);
        assert!(head.body.is_empty());
        assert!(
            head.head
                .contains(&format!("content-length: {}", a.body.len())),
            "HEAD {}: {}",
            a.path,
            head.head
        );
    }
    let page = get_with(server.addr, "/", &host, "").await;
    assert!(page.body.starts_with("<!doctype html>"), "{}", page.body);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_paths_are_404_and_only_get_and_head_are_answered() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    for path in [
        "/index.html",
        "/nope",
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/console.js/../../Cargo.toml",
        "/..%2f..%2fCargo.toml",
        "//etc/passwd",
        "/web/dist/console.js",
    ] {
        let resp = get_with(server.addr, path, &host, "").await;
        assert_eq!(resp.status, 404, "{path}: {}", resp.head);
        assert!(!resp.body.contains("[package]"), "{path}: {}", resp.body);
        assert_security_headers(&resp, path);
    }
    // A query is not part of the path: still the script, nothing else.
    let resp = get_with(server.addr, "/console.js?x=/../Cargo.toml", &host, "").await;
    assert_eq!(resp.status, 200, "{}", resp.head);
    assert!(resp.head.contains("content-type: text/javascript"));
    for (method, path) in [
        ("POST", "/"),
        ("PUT", "/console.js"),
        ("DELETE", "/"),
        ("OPTIONS", "/"),
    ] {
        let resp = request(server.addr, method, path, &host, "").await;
        assert_eq!(resp.status, 405, "{method} {path}: {}", resp.head);
        assert!(resp.head.contains("allow: get, head"), "{}", resp.head);
    }
    // The RPCs on the same port are untouched.
    let mut c = server.client().await;
    c.list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_ui_serves_nothing() {
    let server = TestServer::serving(ServeOptions {
        ui: false,
        ..ServeOptions::default()
    })
    .await;
    let host = server.addr.to_string();
    for a in ASSETS {
        let resp = get_with(server.addr, a.path, &host, "").await;
        assert_eq!(resp.status, 404, "{}: {}", a.path, resp.head);
        assert!(!resp.body.contains("<!doctype"), "{}", resp.body);
    }
    let mut c = server.client().await;
    c.list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_foreign_origin_or_host_is_refused_like_the_api() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    for (host, extra) in [
        (host.as_str(), "Origin: http://evil.example\r\n"),
        (host.as_str(), "Origin: null\r\n"),
        ("evil.example", ""),
        ("evil.example:80", ""),
    ] {
        for method in ["GET", "HEAD"] {
            let resp = request(server.addr, method, "/", host, extra).await;
            assert_eq!(resp.status, 403, "{method} {host} {extra:?}: {}", resp.head);
            assert!(resp.body.is_empty(), "{}", resp.body);
        }
    }
    // The control: a loopback name and a loopback page pass the same checks.
    for (host, extra) in [
        (host.as_str(), "Origin: http://localhost:5173\r\n"),
        ("localhost:1234", ""),
    ] {
        let resp = get_with(server.addr, "/", host, extra).await;
        assert_eq!(resp.status, 200, "{host} {extra:?}: {}", resp.head);
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_page_is_public_but_every_call_needs_the_token() {
    let server = TestServer::serving(ServeOptions {
        auth_token: Some("s3cret-token".into()),
        ..ServeOptions::default()
    })
    .await;
    let host = server.addr.to_string();
    // A browser cannot put a bearer token on a navigation: the files, which
    // hold no data, are served without it.
    for a in ASSETS {
        let resp = get_with(server.addr, a.path, &host, "").await;
        assert_eq!(resp.status, 200, "{}: {}", a.path, resp.head);
        assert!(!resp.body.contains("s3cret-token"));
    }
    // The data is not: the calls the page makes are refused without it.
    let mut c = server.client().await;
    let err = c
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let metrics = get_with(server.addr, "/metrics", &host, "").await;
    assert_eq!(metrics.status, 401);
    server.shutdown().await.unwrap();
}

#[test]
fn the_no_ui_flag_reaches_the_serve_options() {
    use agent_harness_server::config::{Cli, Command, ServeConfig};
    use agent_harness_server::server::serve_options;
    use clap::Parser;

    let Command::Serve(config) = Cli::try_parse_from(["agent-harness", "serve", "--no-ui"])
        .unwrap()
        .command
    else {
        panic!("serve");
    };
    assert!(config.no_ui);
    assert!(!serve_options(&config).unwrap().ui);
    assert!(
        serve_options(&ServeConfig::default()).unwrap().ui,
        "on by default"
    );
}
