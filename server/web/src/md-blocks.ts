// An answer's markdown cut into its top-level blocks, so each block renders
// (and is memoized) on its own: while an answer is typed only its last block
// grows, and a delta re-renders that block alone instead of re-parsing the
// whole answer. Pure and cheap (one pass over the lines); the blocks joined
// give back the text.

/** A fence opening or closing a code block: its marker character and length. */
const FENCE = /^ {0,3}(`{3,}|~{3,})/;
/** A line that starts a list item. */
const LIST_ITEM = /^ {0,3}([-+*]|\d{1,9}[.)])(\s|$)/;

/**
 * The top-level blocks of `text`. A block ends at a blank line, unless that
 * line is inside a fenced code block, or the block is a list (or an indented
 * continuation) and the next line goes on with an item or an indented line,
 * as loose lists do. Every block but the last ends with its blank lines, so
 * the blocks joined are `text` and a block before the last stays the same
 * string while text is appended.
 */
export function splitBlocks(text: string): string[] {
  const lines = text.split("\n");
  const blocks: string[] = [];
  let start = 0; // character offset where the current block begins
  let offset = 0; // character offset of the current line
  let fence: string | undefined; // the open fence's marker, inside a code block
  let inList = false; // the current block is a list (loose lists keep blank lines)
  let blank = false; // the previous line was blank (outside a fence)
  let content = false; // the current block has a non-blank line
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const isBlank = line.trim() === "";
    if (fence === undefined && !isBlank && blank && content) {
      const continues = inList && (LIST_ITEM.test(line) || /^(\s{2,}|\t)/.test(line));
      if (!continues) {
        blocks.push(text.slice(start, offset));
        start = offset;
        inList = false;
        content = false;
      }
    }
    if (!isBlank) {
      if (!content) inList = LIST_ITEM.test(line);
      content = true;
    }
    const f = FENCE.exec(line);
    if (f) {
      const marker = f[1]!;
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
    }
    blank = fence === undefined && isBlank;
    offset += line.length + 1;
  }
  blocks.push(text.slice(start));
  return blocks.filter((b, i) => b !== "" || i === 0);
}

/** The text last split, and its blocks. */
export interface Split {
  text: string;
  blocks: string[];
}

/**
 * The blocks of `text`, given those of an earlier text. When `text` only
 * appends to it (an answer being typed), the earlier blocks but the last
 * are kept as they are and only the rest is split: a delta costs the
 * length of the growing block, not of the answer. A block starts in the
 * splitter's starting state, so this equals `splitBlocks(text)`.
 */
export function appendBlocks(prev: Split, text: string): string[] {
  if (prev.blocks.length < 2 || !text.startsWith(prev.text)) return splitBlocks(text);
  const kept = prev.blocks.slice(0, -1);
  const from = prev.text.length - prev.blocks[prev.blocks.length - 1]!.length;
  return kept.concat(splitBlocks(text.slice(from)));
}
