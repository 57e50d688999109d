//! This node's name among the nodes that share one store: `--node-id`, by
//! default the host name and the listen port (`host:50051`), so two nodes
//! on one machine differ. Answers name the node that served them, and the
//! store records which node runs each session under this name.

use std::fmt;
use std::net::SocketAddr;

/// The response header every answer names its node in (unary and
/// streaming, gRPC, grpc-web and plain HTTP, errors too), so an operator
/// or a test behind a balancer sees which node served a call.
pub const HEADER: &str = "x-agent-harness-node";

/// Longest node id accepted.
pub const MAX_NODE_ID_LEN: usize = 128;

/// A checked node id (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeId(String);

impl NodeId {
    /// `flag` when given (checked), else this host's name and `listen`'s port.
    pub fn resolve(flag: Option<&str>, listen: SocketAddr) -> Result<Self, String> {
        match flag {
            Some(id) => Self::parse(id),
            None => {
                let host = nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "localhost".to_owned());
                Self::parse(&format!("{host}:{}", listen.port()))
            }
        }
    }

    /// A node id: 1 to [`MAX_NODE_ID_LEN`] characters of ASCII letters,
    /// digits and `.`, `_`, `-`, `:` (it travels in a header and in logs).
    pub fn parse(id: &str) -> Result<Self, String> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
        if id.is_empty() || id.len() > MAX_NODE_ID_LEN || !id.chars().all(ok_char) {
            return Err(format!(
                "--node-id {id:?}: use 1 to {MAX_NODE_ID_LEN} characters of letters, digits, \
                 '.', '_', '-' and ':'"
            ));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as the value of [`HEADER`] (its characters are all valid in
    /// a header).
    pub fn header_value(&self) -> http::HeaderValue {
        http::HeaderValue::from_str(&self.0).expect("a node id is a valid header value")
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_host_name_and_the_listen_port() {
        let id = NodeId::resolve(None, "127.0.0.1:50123".parse().unwrap()).unwrap();
        assert!(id.as_str().ends_with(":50123"), "{id}");
        assert!(id.as_str().len() > ":50123".len(), "{id}");
    }

    #[test]
    fn a_given_id_is_checked() {
        let listen = "127.0.0.1:1".parse().unwrap();
        assert_eq!(
            NodeId::resolve(Some("node-a"), listen).unwrap().as_str(),
            "node-a"
        );
        for bad in ["", "a b", "a\nb", "ä", &"x".repeat(MAX_NODE_ID_LEN + 1)] {
            let err = NodeId::parse(bad).unwrap_err();
            assert!(err.contains("--node-id"), "{err}");
        }
    }
}
