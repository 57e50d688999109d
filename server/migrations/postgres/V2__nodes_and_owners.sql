-- Nodes and session ownership (see server/src/store/postgres/fence.rs).
-- Every lease is judged by the database's clock (now()), never a node's.

-- node_id -> its epoch (one more at each join) and how long its lease runs.
CREATE TABLE nodes (
    node_id text COLLATE "C" NOT NULL PRIMARY KEY,
    epoch bigint NOT NULL,
    lease_until timestamptz NOT NULL,
    -- Where other nodes and operators reach it ("" when not given).
    address text NOT NULL DEFAULT ''
);

-- session_id -> the node (and its epoch) that may append to it, and the
-- session's head as that owner last committed it: every commit compares
-- and sets it, so two writers can never both append after one head.
CREATE TABLE owners (
    session_id text COLLATE "C" NOT NULL PRIMARY KEY,
    node_id text COLLATE "C" NOT NULL,
    epoch bigint NOT NULL,
    head_seq bigint NOT NULL
);
CREATE INDEX owners_by_node ON owners (node_id, session_id);
