//! Our throughput, fan-out and replay rows again with the log on
//! PostgreSQL, beside raw PostgreSQL appends of the same batches.

use crate::Args;
use crate::ours::{fanout, throughput};
use crate::peers;
use crate::server::{Server, ServerOptions};
use crate::stats::Rate;

use super::{
    OnPostgres, Ratio, Replay, Sizes, fresh_fanout_rows, payload, progress, run_replay,
    throughput_rows,
};

/// The throughput, fan-out and replay rows on PostgreSQL (a throwaway
/// server unless `--store-url`), then the raw PostgreSQL peer on the same
/// server in the batch shapes our server committed there; `redb` holds the
/// same rows on redb, for the ratios.
pub(super) async fn run_postgres(
    args: &Args,
    sizes: &Sizes,
    opts: &ServerOptions,
    dir: &std::path::Path,
    redb: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
) -> OnPostgres {
    use agent_harness_pg_temp::Cluster;
    let cluster = args.store_url.is_none().then(|| {
        progress("PostgreSQL: starting a throwaway server");
        tokio::task::block_in_place(Cluster::start)
    });
    let (url, database) = match (&args.store_url, &cluster) {
        (Some(url), _) => (
            url.clone(),
            agent_harness_server::store::redact_store_url(url),
        ),
        (None, Some(c)) => (
            c.fresh_database(),
            format!("a throwaway PostgreSQL {}, fsync on", version()),
        ),
        (None, None) => unreachable!("a cluster was started"),
    };
    // In the environment rather than argv, where `ps` would show a password.
    let mut env = opts.env.clone();
    env.push(("AGENT_HARNESS_STORE_URL".into(), url.clone().into()));
    let pg_opts = ServerOptions {
        data_dir: dir.join("data-postgres"),
        env,
        ..opts.clone()
    };
    // A cold read must find the database's own cache empty too, as a
    // restarted server finds redb's: a checkpoint (so the restart has no
    // log to replay), then a stop and a start.
    let restart = || {
        if let Some(c) = &cluster {
            tokio::task::block_in_place(|| {
                c.sql("postgres", "CHECKPOINT");
                c.kill_server();
                c.start_server();
            });
        }
    };
    let on = " on PostgreSQL";
    let server = Server::start(&pg_opts).await;
    let throughput = throughput_rows(args, sizes, &server, on, None).await;
    // One node on the database at a time: the fan-out rows' server of
    // their own (as on redb) starts once this one has stopped, and the
    // replay rows get another.
    server.stop();
    let fanout = fresh_fanout_rows(
        args,
        sizes,
        (&pg_opts, dir.join("data-postgres-fanout")),
        on,
        None,
    )
    .await;
    let replay = if args.runs("replay") {
        let server = Server::start(&pg_opts).await;
        Some(run_replay(server, &pg_opts, sizes.replay_events, false, on, restart).await)
    } else {
        None
    };

    let mut raw_append = Vec::new();
    let mut raw_replay = None;
    if !args.no_peers {
        let payload = payload(if redb.0.is_empty() {
            &throughput
        } else {
            redb.0
        });
        // A database of its own on the throwaway server; the same one
        // (its own table) on a given one.
        let raw_url = cluster.as_ref().map_or(url.clone(), |c| {
            tokio::task::block_in_place(|| c.fresh_database())
        });
        for row in &throughput {
            let batch = row.batch.round().max(1.0) as usize;
            progress(&format!(
                "raw PostgreSQL: {} sessions, batches of {batch}",
                row.sessions
            ));
            let rate =
                peers::postgres::append(&raw_url, row.sessions, batch, row.rate.events, payload)
                    .await;
            raw_append.push((row.sessions, batch, rate));
        }
        if args.runs("replay") {
            progress("raw PostgreSQL: replay");
            let events = replay.as_ref().map_or(sizes.replay_events, |r| r.events);
            raw_replay =
                Some(peers::postgres::replay(&raw_url, events, payload, true, restart).await);
        }
    }
    if let Some(c) = &cluster {
        // Not left running (idle, but still a process) under the rows that follow.
        tokio::task::block_in_place(|| c.kill_server());
    }
    let ratios = ratios(
        redb,
        (&throughput, &fanout, replay.as_ref()),
        &raw_append,
        raw_replay.as_ref(),
    );
    OnPostgres {
        database,
        throughput,
        fanout,
        replay,
        raw_append,
        raw_replay,
        ratios,
    }
}

/// The installed PostgreSQL's major version (the directory name).
fn version() -> String {
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .max()
        .map_or_else(|| "?".into(), |v| v.to_string())
}

/// Each figure on PostgreSQL beside redb and raw PostgreSQL.
fn ratios(
    redb: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
    pg: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
    raw_append: &[(usize, usize, Rate)],
    raw_replay: Option<&peers::Replay>,
) -> Vec<Ratio> {
    let mut out = Vec::new();
    for t in pg.0 {
        let on_redb = redb.0.iter().find(|r| r.sessions == t.sessions);
        let raw = raw_append.iter().find(|(s, _, _)| *s == t.sessions);
        out.push(Ratio::new(
            format!(
                "durable events/s, {} session(s){}",
                t.sessions,
                raw.map_or(String::new(), |(_, b, _)| format!(", batches of {b}"))
            ),
            t.rate.per_sec(),
            on_redb.map(|r| r.rate.per_sec()),
            raw.map(|(_, _, r)| r.per_sec()),
        ));
    }
    for f in pg.1 {
        let same = redb.1.iter().find(|r| {
            r.transport == f.transport && r.subscribers == f.subscribers && r.rate == f.rate
        });
        for (q, ours, theirs) in [
            ("p50", f.from_write.p50, same.map(|r| r.from_write.p50)),
            ("p99", f.from_write.p99, same.map(|r| r.from_write.p99)),
        ] {
            out.push(Ratio::new(
                format!(
                    "fan-out {q} ms, {}, {} subscribers × {}/s",
                    f.transport.name(),
                    f.subscribers,
                    f.rate
                ),
                ours,
                theirs,
                None,
            ));
        }
    }
    if let Some(rp) = pg.2 {
        out.push(Ratio::new(
            format!("replay written at events/s, {} events", rp.events),
            rp.build.per_sec(),
            redb.2.map(|r| r.build.per_sec()),
            None,
        ));
        out.push(Ratio::new(
            format!("replay events/s, cold, {} events", rp.events),
            rp.cold.rate.per_sec(),
            redb.2.map(|r| r.cold.rate.per_sec()),
            raw_replay.map(|r| r.cold.per_sec()),
        ));
        out.push(Ratio::new(
            format!("replay events/s, warm, {} events", rp.events),
            rp.warm.rate.per_sec(),
            redb.2.map(|r| r.warm.rate.per_sec()),
            raw_replay.map(|r| r.warm.per_sec()),
        ));
    }
    out
}
