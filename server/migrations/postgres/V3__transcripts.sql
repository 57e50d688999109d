-- The CLI's own record of each conversation (see
-- server/src/store/transcript.rs): the lines of its conversation files, kept
-- beside the log so another node can write a file back before it resumes
-- the conversation. Never log events; written in the commit that holds the
-- events of the same stdout batch, deleted with the session. `n` orders a
-- session's entries (one writer per session appends them); `line` is empty
-- for an entry that was too large to keep.
CREATE TABLE transcripts (
    session_id text COLLATE "C" NOT NULL,
    n bigint NOT NULL,
    path text NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session_id, n)
);
