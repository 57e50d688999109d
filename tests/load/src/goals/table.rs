//! The goals as a markdown table, after every other table of the run.

use super::{Goal, Status, Unit};

/// The goals as a markdown table.
pub fn print(goals: &[Goal]) {
    if goals.is_empty() {
        return;
    }
    println!("\n## Goals, judged on this run (ratios are ours / peer)\n");
    println!("| goal | ours | peer | figure | ours / peer | target | status |");
    println!("|---|---|---|---|---|---|---|");
    let fig = |u: Unit, v: Option<f64>| v.map_or("–".into(), |v| u.show(v));
    for g in goals {
        let (value, target) = if g.ratio {
            (
                g.value.map_or("–".into(), |v| format!("**{v:.2}×**")),
                g.target.show(|b| format!("{b:.1}×")),
            )
        } else {
            ("–".into(), g.target.show(|b| g.unit.show(b)))
        };
        let note = g.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        println!(
            "| {}{note} | {} | {} | {} | {value} | {target} | {} |",
            g.measure,
            fig(g.unit, g.ours),
            g.peer_name.as_deref().unwrap_or("–"),
            fig(g.unit, g.peer),
            g.status.show()
        );
    }
    let count = |s: Status| goals.iter().filter(|g| g.status == s).count();
    println!(
        "\n{} met, {} not met ({} of them past this machine's gRPC ceiling), {} not run{}.",
        count(Status::Met),
        count(Status::NotMet) + count(Status::PastCeiling),
        count(Status::PastCeiling),
        count(Status::NotRun),
        match count(Status::NoRatio) {
            0 => String::new(),
            n => format!(", {n} without a ratio"),
        }
    );
}
