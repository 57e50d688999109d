-- The event log (see server/src/store/postgres/mod.rs). Plain SQL only
-- (text, bigint, bytea; no extensions), so PostgreSQL-compatible databases
-- can hold it too. Ids compare byte by byte (COLLATE "C"), as redb orders
-- them, so pages of sessions come in the same order on either store.

-- (session_id, seq) -> the prost-encoded event as streamed.
CREATE TABLE events (
    session_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    event bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- The whole form of each event that `events` holds cut down.
CREATE TABLE full_events (
    session_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    event bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- session_id -> the JSON-encoded session meta.
CREATE TABLE sessions (
    session_id text COLLATE "C" NOT NULL PRIMARY KEY,
    meta bytea NOT NULL
);

-- (session_id, idempotency key) -> the JSON-encoded receipt; by age for pruning.
CREATE TABLE receipts (
    session_id text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    created_ms bigint NOT NULL,
    receipt bytea NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE INDEX receipts_by_time ON receipts (created_ms, session_id, key);

-- The sessions whose log names a CLI conversation; by session for deletion.
CREATE TABLE conversations (
    resume_id text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (resume_id, session_id)
);
CREATE INDEX conversations_by_session ON conversations (session_id, resume_id);
