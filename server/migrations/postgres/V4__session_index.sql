-- The session index (see server/src/store/index.rs): one row per session of
-- what ListSessions filters and sorts on, written in the commit of the
-- events it reflects (never replaced by a row of an older head), rebuilt
-- from the logs at start-up when missing or behind, deleted with the
-- session. `search` is the title, id and cwd lowercased by the server (one
-- line each), so a text query matches alike on every store; `body` the
-- whole row as JSON, with the fold the next commit goes on from.
CREATE TABLE session_index (
    session_id text COLLATE "C" NOT NULL PRIMARY KEY,
    head_seq bigint NOT NULL,
    cwd text COLLATE "C" NOT NULL,
    agent text COLLATE "C" NOT NULL,
    status integer NOT NULL,
    updated_ns bigint NOT NULL,
    search text NOT NULL,
    body bytea NOT NULL
);
-- The orders ListSessions pages in besides the primary key's: newest first
-- as the negated time ascending, so a page after a place is one row
-- comparison over one index range.
CREATE INDEX session_index_by_activity ON session_index ((-updated_ns), session_id);
CREATE INDEX session_index_by_cwd ON session_index (cwd, (-updated_ns), session_id);
