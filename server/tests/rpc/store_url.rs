//! `serve --store-url`: the whole server on PostgreSQL (no `events.redb`
//! in the data dir), and a database that cannot be reached is a start-up
//! error naming the host, never the password.

use crate::files::{config, serve_once};
use crate::support::postgres::cluster;

use agent_harness_server::config::ServeConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_store_url_the_log_is_in_postgresql_and_not_in_the_data_dir() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let url = tokio::task::block_in_place(|| cluster().fresh_database());
    let on_postgres = ServeConfig {
        store_url: Some(url.parse().unwrap()),
        ..config(&data)
    };
    serve_once(on_postgres.clone()).await.expect("serves");
    assert!(!data.join("events.redb").exists());
    // Started again on the same database: the schema is there already.
    serve_once(on_postgres).await.expect("serves again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_a_start_up_error_naming_the_host() {
    let base = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = ServeConfig {
        store_url: Some(
            format!("postgres://app:s3cret@127.0.0.1:{port}/log")
                .parse()
                .unwrap(),
        ),
        ..config(&base.path().join("data"))
    };
    let err = serve_once(unreachable).await.unwrap_err().to_string();
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}
