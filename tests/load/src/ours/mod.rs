//! Measurements of our server alone (each against its own baseline).

pub mod spawn;
