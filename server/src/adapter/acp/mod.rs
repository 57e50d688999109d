//! The Agent Client Protocol adapter: any agent that speaks ACP on stdio.

pub mod decode;
