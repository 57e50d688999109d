// A file edit as a unified diff: the path, +added −removed, the lines
// coloured; a long one folded to its first lines until "show all".

import { useState } from "react";
import type { FileDiff } from "./diff.ts";

/** Past this many lines a diff opens folded. */
export const FOLD_LINES = 40;

const SIGN = { add: "+", del: "-", ctx: " ", hunk: "" } as const;

export function DiffView({ files }: { files: FileDiff[] }) {
  return (
    <div className="diffs">
      {files.map((f, i) => (
        <OneFile key={i} f={f} />
      ))}
    </div>
  );
}

function OneFile({ f }: { f: FileDiff }) {
  const [all, setAll] = useState(false);
  const folded = !all && f.lines.length > FOLD_LINES;
  const lines = folded ? f.lines.slice(0, FOLD_LINES) : f.lines;
  return (
    <div className="diff" data-testid="diff" data-path={f.path} data-folded={folded}>
      <div className="diff-head">
        <span className="diff-path mono">{f.path || "(file)"}</span>
        {f.note && <span className="badge">{f.note}</span>}
        <span className="diff-count">
          <span className="plus">+{f.added}</span> <span className="minus">−{f.removed}</span>
        </span>
      </div>
      <div className="diff-body mono">
        {lines.map((l, i) => (
          <div key={i} className={`dl dl-${l.kind}`} data-kind={l.kind}>
            {l.kind === "hunk" ? l.text : `${SIGN[l.kind]}${l.text}`}
          </div>
        ))}
      </div>
      {folded && (
        <button type="button" className="link show-all" data-testid="diff-show-all" onClick={() => setAll(true)}>
          show all {f.lines.length} lines
        </button>
      )}
    </div>
  );
}
