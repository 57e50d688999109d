// An agent's text as GitHub-flavoured markdown, rendered into React
// elements (react-markdown: markdown → mdast → hast → elements), never an
// HTML string: the page's Trusted Types policy is 'none', so no code path
// may write HTML into the DOM, and none does. What the text could smuggle in
// is defused here: raw HTML is shown as the text it is, a link is a link
// only to http, https or mailto (anything else is its text), and an image
// is shown as a link to it, never loaded (it could track the reader, and
// the CSP would refuse it anyway).
//
// The answer is cut into its top-level blocks (md-blocks.ts), each
// rendered and memoized on its own, so while an answer is typed a delta
// re-renders only the block that grows.

import { memo, useMemo, useRef, useState, type ReactElement, type ReactNode } from "react";
import Markdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";
import type { Root as MdRoot, RootContent as MdNode, Parent as MdParent } from "mdast";
import type { Element as HastElement, Root as HastRoot, ElementContent } from "hast";
import { createLowlight } from "lowlight";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import ini from "highlight.js/lib/languages/ini";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { appendBlocks, type Split } from "./md-blocks.ts";

/**
 * The languages code blocks are highlighted in: what agents write most.
 * A chosen few rather than highlight.js's whole set keeps the console's
 * bundle small; a block in another language is shown unhighlighted.
 */
const lowlight = createLowlight({
  bash,
  c,
  cpp,
  css,
  diff,
  go,
  ini,
  java,
  javascript,
  json,
  markdown,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
});
lowlight.registerAlias({
  bash: ["sh", "zsh"],
  ini: ["toml"],
  javascript: ["js", "jsx", "mjs"],
  typescript: ["ts", "tsx"],
  python: ["py"],
  rust: ["rs"],
  shell: ["console", "shellsession"],
  xml: ["html", "svg"],
  yaml: ["yml"],
  markdown: ["md"],
});

/** The schemes a link may have; any other link is shown as its text. */
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/** `url` when it is an absolute http, https or mailto URL, else null (the attribute is dropped). */
export function safeUrl(url: string): string | null {
  try {
    return SAFE_SCHEMES.has(new URL(url).protocol) ? url : null;
  } catch {
    return null; // relative, or not a URL: it would point into the console itself
  }
}

/**
 * Raw HTML in the text becomes text: `<script>` or `<img onerror>` in an
 * answer is shown as those characters. (react-markdown would do the same
 * with the raw nodes it meets; doing it in the syntax tree says so here and
 * does not depend on that default.) Block-level HTML becomes a paragraph.
 */
function remarkHtmlAsText() {
  const walk = (parent: MdParent, flow: boolean) => {
    parent.children = parent.children.map((n: MdNode): MdNode => {
      if (n.type === "html")
        return flow ? { type: "paragraph", children: [{ type: "text", value: n.value }] } : { type: "text", value: n.value };
      if ("children" in n) walk(n, n.type === "blockquote" || n.type === "listItem" || n.type === "footnoteDefinition");
      return n;
    });
  };
  return (tree: MdRoot) => walk(tree, true);
}

/** The language named by a code element's `language-X` class, if any. */
function languageOf(code: HastElement): string | undefined {
  const cls: unknown = code.properties["className"];
  const list: string[] = Array.isArray(cls) ? cls.map(String) : typeof cls === "string" ? cls.split(" ") : [];
  return list.find((c) => c.startsWith("language-"))?.slice("language-".length).toLowerCase();
}

/** Syntax highlighting of fenced code blocks that name a known language: hast spans, no HTML. */
function rehypeHighlight() {
  const walk = (node: HastRoot | HastElement) => {
    for (const child of node.children) {
      if (child.type !== "element") continue;
      const code = child.tagName === "pre" ? child.children.find((k): k is HastElement => k.type === "element" && k.tagName === "code") : undefined;
      const lang = code && languageOf(code);
      if (code && lang && lowlight.registered(lang)) {
        const text = code.children.map((k) => (k.type === "text" ? k.value : "")).join("");
        code.children = lowlight.highlight(lang, text).children as ElementContent[];
        code.properties["className"] = ["hljs", `language-${lang}`];
      } else walk(child);
    }
  };
  return (tree: HastRoot) => walk(tree);
}

/** react-markdown passes the hast node along; it must not reach the DOM. */
type WithNode<T> = T & { node?: unknown };

/** The text of a hast node (a code block's source, highlighted or not). */
function hastText(n: unknown): string {
  const node = n as { type?: string; value?: string; children?: unknown[] } | undefined;
  if (!node) return "";
  if (node.type === "text") return node.value ?? "";
  return (node.children ?? []).map(hastText).join("");
}

/** A code block with a button that copies its source. */
function CodeBlock({ node, children }: WithNode<{ children?: ReactNode }>) {
  const [copied, setCopied] = useState<"" | "copied" | "failed">("");
  const copy = () => {
    navigator.clipboard.writeText(hastText(node)).then(
      () => setCopied("copied"),
      () => setCopied("failed"),
    );
  };
  return (
    <div className="md-code">
      <button type="button" className="md-copy" data-testid="copy-code" onClick={copy} title="copy the code">
        {copied || "copy"}
      </button>
      <pre>{children}</pre>
    </div>
  );
}

const components: Components = {
  pre: CodeBlock,
  a: ({ href, children }: WithNode<{ href?: string; children?: ReactNode }>) =>
    href ? (
      <a href={href} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    ) : (
      <span className="md-nolink" title="not a web link: shown as text">
        {children}
      </span>
    ),
  img: ({ src, alt }: WithNode<{ src?: string | Blob; alt?: string }>) =>
    typeof src === "string" && src !== "" ? (
      <a href={src} target="_blank" rel="noopener noreferrer" className="md-image">
        [image{alt ? `: ${alt}` : ""}]
      </a>
    ) : (
      <span className="md-image">[image{alt ? `: ${alt}` : ""}]</span>
    ),
  table: ({ children }: WithNode<{ children?: ReactNode }>) => (
    <div className="md-table">
      <table>{children}</table>
    </div>
  ),
};

const remarkPlugins = [remarkGfm, remarkHtmlAsText];
const rehypePlugins = [rehypeHighlight];

/** The blocks parsed lately, by their text: at most this many characters of them. */
const CACHE_CHARS = 4_000_000;
const cache = new Map<string, ReactElement>();
let cachedChars = 0;

/**
 * A block's elements. Parsing is the costly part (a 200 KB answer takes
 * seconds), so a finished block's elements are kept by its text: the answer
 * that replaces its typed text, a second view of the same session, a
 * reopened session reuse them instead of parsing again. Elements are
 * immutable, so one may sit in several trees. react-markdown's component is
 * a plain function (no hooks), called here to get its elements.
 */
function blockElements(src: string, keep: boolean): ReactElement {
  const hit = cache.get(src);
  if (hit) {
    cache.delete(src); // most recently used last: the oldest go first
    cache.set(src, hit);
    return hit;
  }
  const el = Markdown({ children: src, remarkPlugins, rehypePlugins, components, urlTransform: safeUrl });
  if (keep) {
    cache.set(src, el);
    cachedChars += src.length;
    for (const [k] of cache) {
      if (cachedChars <= CACHE_CHARS) break;
      cache.delete(k);
      cachedChars -= k.length;
    }
  }
  return el;
}

/**
 * One top-level block: rendered again only when its own text changes.
 * `keep`: it is finished (not the last block, which may still grow), so
 * its elements are worth keeping.
 */
const MdBlock = memo(function MdBlock({ src, keep }: { src: string; keep: boolean }) {
  return blockElements(src, keep);
});

/**
 * `text` as markdown in a `div.text.md`. The text's closing whitespace,
 * which markdown drops, is kept as a text node: invisible, and the
 * element's text stays the answer's own (prose reads back as it was
 * written, and typed text only ever grows).
 */
export function MarkdownText({ text, testId }: { text: string; testId?: string }) {
  const last = useRef<Split>({ text: "", blocks: [] });
  const blocks = useMemo(() => {
    const b = appendBlocks(last.current, text);
    last.current = { text, blocks: b };
    return b;
  }, [text]);
  const trailing = text.slice(text.trimEnd().length);
  return (
    <div className="text md" data-testid={testId}>
      {blocks.map((b, i) => (
        <MdBlock key={i} src={b} keep={i < blocks.length - 1} />
      ))}
      {trailing}
    </div>
  );
}
