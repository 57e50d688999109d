//! The tables: each measurement, then the ratios against the peers.

use crate::ours::fanout::Transport;
use crate::plan::Results;
use crate::stats::{Latency, Rate};

fn k(rate: &Rate) -> String {
    format!("{:.0}", rate.per_sec())
}

fn lat(l: &Latency) -> String {
    format!("{:.2} / {:.2} / {:.2} / {:.2}", l.p50, l.p99, l.p999, l.max)
}

fn ratio(ours: f64, peer: f64) -> String {
    if peer > 0.0 && ours > 0.0 {
        format!("{:.2}×", ours / peer)
    } else {
        "–".into()
    }
}

/// Prints every table as markdown.
pub fn print(r: &Results) {
    println!(
        "\n# agent-harness load run{} ({:.0} s; load average {} at start, {} at end)\n",
        if r.quick {
            " (--quick: smoke sizes, figures mean nothing)"
        } else {
            ""
        },
        r.secs,
        r.loadavg.0,
        r.loadavg.1
    );

    println!("## Durable events/s end to end (stand-in CLI at full speed → subscriber)\n");
    throughput_table(&r.throughput);
    println!("\n## Fan-out latency, ms: p50 / p99 / p99.9 / max\n");
    println!(
        "On a server started for these rows, as JetStream's run on one of their own. A row judged against JetStream's runs in turns, each followed by JetStream's round of the same size; each side's samples are pooled.\n"
    );
    fanout_table(&r.fanout);
    if let Some(f) = &r.lone_after_throughput {
        println!(
            "\nThe lone row again on the server that took the throughput rows (not judged): CLI write → receipt {}, commit → receipt {}, server CPU {:.1} s, RSS {:.0} MiB.",
            lat(&f.from_write),
            lat(&f.from_commit),
            f.server_cpu,
            f.rss as f64 / 1048576.0
        );
    }

    if !r.deltas.is_empty() {
        println!("\n## Live typing (issue 12), one session, gRPC, ms: p50 / p99 / p99.9 / max\n");
        println!(
            "| subscribers | deltas | messages/s | messages × fragments | fragment write → receipt | newest fragment of a delta → receipt | content event: CLI write → receipt | content event: commit → receipt | deltas (fragments each) | blocks typed in full / cut short, of | server RSS before / end / peak MiB | s | CPU s server / client |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        let mib = |b: u64| b as f64 / 1048576.0;
        for d in &r.deltas {
            let s = &d.spec;
            let (typing, coalesced, typed) = if s.deltas {
                (
                    lat(&d.fragment),
                    lat(&d.delta),
                    format!(
                        "{} ({:.1})",
                        d.deltas,
                        d.fragments as f64 / d.deltas.max(1) as f64
                    ),
                )
            } else {
                ("–".into(), "–".into(), "–".into())
            };
            let blocks_typed = if s.deltas {
                format!("{} / {} of {}", d.blocks_typed, d.blocks_cut, d.blocks)
            } else {
                "–".into()
            };
            println!(
                "| {} | {} | {} | {} × {} | {typing} | {coalesced} | {} | {} | {typed} | {blocks_typed} | {:.0} / {:.0} / {:.0} | {:.1} | {:.1} / {:.1} |",
                s.subscribers,
                if s.deltas { "**on**" } else { "off" },
                if s.rate > 0.0 {
                    format!("{}", s.rate)
                } else {
                    "full speed".into()
                },
                s.messages,
                s.frags,
                lat(&d.from_write),
                lat(&d.from_commit),
                mib(d.rss_before),
                mib(d.rss),
                mib(d.peak_rss),
                d.secs,
                d.server_cpu,
                d.client_cpu
            );
        }
    }

    if let Some(rp) = &r.replay {
        println!("\n## Replay over gRPC (one Subscribe from seq 0 to caught_up)\n");
        replay_table(rp);
    }

    println!("\n## Server memory per idle gRPC subscriber\n");
    println!(
        "| subscribers | RSS before MiB | RSS after MiB | KiB per subscriber | open streams (/metrics) |"
    );
    println!("|---|---|---|---|---|");
    for i in &r.idle {
        println!(
            "| {} | {:.1} | {:.1} | **{:.2}** | {:.0} |",
            i.subscribers,
            i.rss_before as f64 / 1048576.0,
            i.rss_after as f64 / 1048576.0,
            i.per_subscriber / 1024.0,
            i.open_streams
        );
    }

    if let Some(spawn) = &r.spawn {
        println!();
        spawn.print();
    }
    if let Some(codex) = &r.codex {
        println!();
        codex.print();
    }

    postgres(r);
    if let Some(p) = &r.peers {
        side_by_side(r, p);
    }
    crate::goals::print(&r.goals);
}

/// Each figure of ours beside its peers', then the peers' own tables.
fn side_by_side(r: &Results, p: &crate::plan::Peers) {
    println!(
        "\n## Side by side (ours / peer; payload {} bytes per event; throughput > 1× and latency < 1× favour us)\n",
        p.payload
    );
    println!("| measure | ours | peer | figure | ours / peer |");
    println!("|---|---|---|---|---|");
    for t in &r.throughput {
        let ours = t.rate.per_sec();
        if let Some((_, js)) = p.jetstream_publish.iter().find(|(s, _)| *s == t.sessions) {
            println!(
                "| durable events/s, {} session(s) | {:.0} | JetStream (fsync always) | {:.0} | **{}** |",
                t.sessions,
                ours,
                js.per_sec(),
                ratio(ours, js.per_sec())
            );
        }
        if let Some((_, b, sq)) = p.sqlite_append.iter().find(|(s, _, _)| *s == t.sessions) {
            println!(
                "| durable events/s, {} session(s) | {:.0} | SQLite WAL FULL, batches of {b} | {:.0} | **{}** |",
                t.sessions,
                ours,
                sq.per_sec(),
                ratio(ours, sq.per_sec())
            );
        }
        let batch = t.batch.round().max(1.0) as usize;
        if let Some((_, grow, pre)) = p.fsync.iter().find(|(b, _, _)| *b == batch) {
            for (how, fs) in [("growing file", grow), ("in place", pre)] {
                println!(
                    "| durable events/s, {} session(s) | {:.0} | raw write + fdatasync, batches of {batch}, {how} | {:.0} | {} |",
                    t.sessions,
                    ours,
                    fs.per_sec(),
                    ratio(ours, fs.per_sec())
                );
            }
        }
    }
    for f in r.fanout.iter().filter(|f| f.transport == Transport::Grpc) {
        let same = |js: &&crate::plan::JetStreamFanout| {
            js.subscribers == f.subscribers && js.rate == f.rate
        };
        if let Some(js) = p.jetstream_fanout.iter().find(same) {
            let short = if js.run.received < js.run.expected {
                format!(" (received {} of {})", js.run.received, js.run.expected)
            } else {
                String::new()
            };
            for (q, ours, peer) in [
                ("p50", f.from_write.p50, js.run.latency.p50),
                ("p99", f.from_write.p99, js.run.latency.p99),
            ] {
                println!(
                    "| fan-out {q} ms, {} subscribers × {}/s | {:.2} | JetStream{short} | {:.2} | **{}** |",
                    f.subscribers,
                    f.rate,
                    ours,
                    peer,
                    ratio(ours, peer)
                );
            }
        }
    }
    let replay_peers = [
        ("SQLite in process", p.sqlite_replay.as_ref()),
        ("JetStream ordered consumer", p.jetstream_replay.as_ref()),
    ];
    if let Some(rp) = &r.replay {
        for (name, peer) in replay_peers {
            let Some(peer) = peer else { continue };
            for (what, ours, theirs) in [
                ("cold", &rp.cold.rate, &peer.cold),
                ("warm", &rp.warm.rate, &peer.warm),
            ] {
                println!(
                    "| replay events/s, {what}, {} events | {} | {name} | {} | **{}** |",
                    rp.events,
                    k(ours),
                    k(theirs),
                    ratio(ours.per_sec(), theirs.per_sec())
                );
            }
        }
    }
    if let Some(js) = &p.jetstream_replay {
        println!(
            "\n## JetStream replay (file storage, ordered consumer from the first message, the client's default pull)\n"
        );
        println!("| events | cold events/s | warm events/s | OS cache dropped |");
        println!("|---|---|---|---|");
        println!(
            "| {} | **{}** | **{}** | {} |",
            js.cold.events,
            k(&js.cold),
            k(&js.warm),
            js.cold_dropped_os_cache
        );
    }
    if !p.jetstream_fanout.is_empty() {
        println!(
            "\n## JetStream fan-out (push consumers, 100 per connection), ms: p50 / p99 / p99.9 / max\n"
        );
        println!(
            "| subscribers | msgs/s | rounds | publish → receive | received / expected | consumer set-up s | publishing took s |"
        );
        println!("|---|---|---|---|---|---|---|");
        for j in &p.jetstream_fanout {
            println!(
                "| {} | {} | {} | {} | {} / {} | {:.1} | {:.1} |",
                j.subscribers,
                j.rate,
                j.run.rounds,
                lat(&j.run.latency),
                j.run.received,
                j.run.expected,
                j.run.setup_secs,
                j.run.publish_secs
            );
        }
    }
    if !p.jetstream_publish_default_sync.is_empty() {
        println!(
            "\nJetStream with its default sync (fsync every 2 minutes: **not durable**), events/s:"
        );
        for (s, r) in &p.jetstream_publish_default_sync {
            println!("- {s} sessions: {}", k(r));
        }
    }
}

fn throughput_table(rows: &[crate::ours::throughput::Row]) {
    println!(
        "| sessions | events | s | events/s | commits | events/commit | server CPU s per M events | bytes/event | server RSS / peak MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for t in rows {
        println!(
            "| {} | {} | {:.2} | **{}** | {:.0} | {:.1} | **{:.1}** | {:.0} | {:.0} / {:.0} |",
            t.sessions,
            t.rate.events,
            t.rate.secs,
            k(&t.rate),
            t.commits,
            t.batch,
            t.cpu_s_per_m,
            t.event_bytes,
            t.rss as f64 / 1048576.0,
            t.peak_rss as f64 / 1048576.0
        );
    }
}

fn fanout_table(rows: &[crate::ours::fanout::Row]) {
    println!(
        "| transport | subscribers | lines/s | lines (turns) | CLI write → receipt | commit → receipt | server RSS / peak MiB | s | CPU s server / client | server CPU s per M events delivered |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for f in rows {
        let t = f.transport.name();
        println!(
            "| {t} | {} | {} | {} ({}) | {} | {} | {:.0} / {:.0} | {:.1} | {:.1} / {:.1} | {:.1} |",
            f.subscribers,
            f.rate,
            f.events,
            f.rounds,
            lat(&f.from_write),
            lat(&f.from_commit),
            f.rss as f64 / 1048576.0,
            f.peak_rss as f64 / 1048576.0,
            f.secs,
            f.server_cpu,
            f.client_cpu,
            crate::goals::fanout_cpu_per_m(f)
        );
    }
}

fn replay_table(rp: &crate::plan::Replay) {
    println!(
        "| events | written at (events/s) | cold events/s | warm events/s | OS cache dropped | CPU s server / client, cold | warm |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | **{}** | **{}** | {} | {:.1} / {:.1} | {:.1} / {:.1} |",
        rp.events,
        k(&rp.build),
        k(&rp.cold.rate),
        k(&rp.warm.rate),
        rp.cold_dropped_os_cache,
        rp.cold.server_cpu,
        rp.cold.client_cpu,
        rp.warm.server_cpu,
        rp.warm.client_cpu
    );
    if let Some(c) = &rp.ceiling {
        println!(
            "\nThe gRPC ceiling: the same messages from a server that holds them in memory and only sends them, to the same subscriber:\n"
        );
        println!("| events/s | ours warm / ceiling | CPU s ceiling server / client |");
        println!("|---|---|---|");
        println!(
            "| **{}** | {:.2}× | {:.1} / {:.1} |",
            k(&c.rate),
            rp.warm.rate.per_sec() / c.rate.per_sec(),
            c.server_cpu,
            c.client_cpu
        );
    }
}

/// Our server on PostgreSQL: its tables, then each figure beside redb and
/// raw PostgreSQL.
fn postgres(r: &Results) {
    let Some(pg) = &r.postgres else {
        if r.postgres_skipped {
            println!("\n## On PostgreSQL: skipped (--no-postgres)");
        }
        return;
    };
    println!("\n## On PostgreSQL ({})\n", pg.database);
    if !pg.throughput.is_empty() {
        println!("### Durable events/s end to end\n");
        throughput_table(&pg.throughput);
    }
    if !pg.fanout.is_empty() {
        println!("\n### Fan-out latency, ms: p50 / p99 / p99.9 / max\n");
        fanout_table(&pg.fanout);
    }
    if let Some(rp) = &pg.replay {
        println!("\n### Replay over gRPC\n");
        replay_table(rp);
    }
    if pg.ratios.is_empty() {
        return;
    }
    println!(
        "\n### PostgreSQL beside redb and raw PostgreSQL (same run; raw: one COPY BINARY transaction per batch, fsync on; events/s > 1× and latency < 1× favour PostgreSQL)\n"
    );
    println!(
        "| measure | ours on PostgreSQL | ours on redb | raw PostgreSQL | ours on PostgreSQL / raw PostgreSQL | ours on PostgreSQL / ours on redb |"
    );
    println!("|---|---|---|---|---|---|");
    let fig = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.2}"));
    let times = |v: Option<f64>| v.map_or("–".into(), |v| format!("**{v:.2}×**"));
    for q in &pg.ratios {
        println!(
            "| {} | {:.2} | {} | {} | {} | {} |",
            q.measure,
            q.on_postgres,
            fig(q.on_redb),
            fig(q.raw_postgres),
            times(q.postgres_over_raw),
            times(q.postgres_over_redb)
        );
    }
}
