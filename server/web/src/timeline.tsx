// The session's log as a conversation: turns from groupEvents, each event
// in log order, tool calls paired with their results, a subagent's own
// messages nested under the Agent call that ran it, and at the end the
// answer being typed (live typing). Every event element carries data-seq
// and data-kind, so what is shown can be checked against the log.

import { memo, useMemo, type ReactNode } from "react";
import {
  InputSource,
  RunEndReason,
  Setting,
  SettingApplied,
  groupEvents,
  subagentChildren,
  type ContentBlock,
  type Event,
  type PendingPermission,
  type ToolCall,
} from "@agent-harness/client/protocol";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { clock, duration, pretty, toolGist, tokens, usd } from "./format.ts";
import { RewindButton } from "./control.tsx";
import { MarkdownText } from "./markdown.tsx";
import { toolDiffs } from "./diff.ts";
import { DiffView } from "./diff-view.tsx";

const SETTINGS: Record<number, string> = {
  [Setting.MODEL]: "model",
  [Setting.PERMISSION_MODE]: "permission mode",
  [Setting.MAX_THINKING_TOKENS]: "thinking budget",
};

/** What the timeline needs to find a tool call's result and a subagent's messages. */
interface Index {
  calls: Map<string, ToolCall>;
  children: Map<string, Event[]>;
  /** Tool calls waiting for a permission answer (their tool_use ids). */
  asking: Set<string>;
  /** What running tools have printed so far, by tool_use id (live typing). */
  outputs: ReadonlyMap<string, string>;
  /** Calls without a result whose turn ended (a stop, a crash, a server restart): they run no more. */
  ended: Set<string>;
  /** The stream is live: a call without a result is known to be running. */
  live: boolean;
}

/**
 * The held events as turns. Re-grouped when the list changes (a new array
 * per change); `pending` (derived.pendingPermissions) marks the calls that
 * wait for an answer; `outputs` is what running tools printed so far, shown
 * under each until its result arrives. `live`: the stream is live, so a call
 * without a result is running (otherwise that is unknown).
 */
export function Timeline({
  events,
  pending,
  outputs,
  live,
}: {
  events: readonly Event[];
  pending: readonly PendingPermission[];
  outputs: ReadonlyMap<string, string>;
  live: boolean;
}) {
  const grouped = useMemo(() => {
    const turns = groupEvents(events);
    const calls = new Map<string, ToolCall>();
    const ended = new Set<string>();
    for (const t of turns)
      for (const c of t.toolCalls) {
        calls.set(c.toolUseId, c);
        if (!c.result && t.end !== undefined) ended.add(c.toolUseId);
      }
    return { turns, calls, ended, children: subagentChildren(events) };
  }, [events]);
  const index = useMemo(
    () => ({
      calls: grouped.calls,
      children: grouped.children,
      asking: new Set(pending.map((p) => p.toolUseId)),
      outputs,
      ended: grouped.ended,
      live,
    }),
    [grouped, pending, outputs, live],
  );
  const { turns } = grouped;
  return (
    <>
      {turns.map((t) => {
        const first = t.events[0]!;
        return (
          <TurnView
            key={String(first.seq)}
            events={t.events}
            open={t.start !== undefined && t.end === undefined}
            stretch={t.start === undefined}
            index={index}
          />
        );
      })}
    </>
  );
}

const TurnView = memo(function TurnView(props: { events: Event[]; open: boolean; stretch: boolean; index: Index }) {
  const { events, open, stretch, index } = props;
  return (
    <section className={`turn${open ? " open" : ""}${stretch ? " stretch" : ""}`} data-testid="turn" data-open={open}>
      {events.map((e) => (isNested(e) ? null : <EventView key={String(e.seq)} e={e} index={index} />))}
    </section>
  );
});

/** A subagent's content or result: shown under its Agent call, not in the turn. */
function isNested(e: Event): boolean {
  const p = e.payload;
  return (p.case === "content" || p.case === "result") && p.value.parentToolUseId !== "";
}

/** One event's element: data-seq and data-kind, and its body. */
/**
 * What the CLI reports of a command it ran for the host (e.g. "Set model
 * to …" after SetModel), without its `<local-command-stdout>` wrapper.
 */
function localCommandOutput(text: string): string {
  const m = /^<local-command-stdout>([\s\S]*)<\/local-command-stdout>$/.exec(text.trim());
  return m ? m[1]! : text;
}

function Ev(props: { e: Event; cls: string; children?: ReactNode }) {
  const { e, cls, children } = props;
  return (
    <div className={`ev ${cls}`} data-seq={String(e.seq)} data-kind={e.payload.case} title={`#${e.seq} ${clock(e.time)}`}>
      {children}
    </div>
  );
}

const REASONS: Record<number, string> = {
  [RunEndReason.COMPLETED]: "completed",
  [RunEndReason.STOPPED]: "stopped",
  [RunEndReason.INTERRUPTED]: "interrupted",
  [RunEndReason.ERROR]: "error",
  [RunEndReason.PROCESS_EXIT]: "process exited",
  [RunEndReason.IDLE_TIMEOUT]: "idle timeout",
  [RunEndReason.IDLE_EVICTED]: "evicted while idle (--max-idle-runs)",
  [RunEndReason.SERVER_RESTART]: "server restart",
};

function EventView({ e, index }: { e: Event; index: Index }) {
  const p = e.payload;
  switch (p.case) {
    case "inputSent": {
      const images = p.value.contentBlocks.filter((b) => b["type"] === "image").length;
      const from = p.value.source === InputSource.WAKEUP ? "wakeup" : p.value.source === InputSource.INITIAL ? "prompt" : "you";
      return (
        <Ev e={e} cls="user">
          <span className="who">{from}</span>
          <div className="text">{p.value.text}</div>
          {images > 0 && <span className="badge">{images === 1 ? "1 image" : `${images} images`}</span>}
          {p.value.messageUuid !== "" && <RewindButton seq={e.seq} />}
        </Ev>
      );
    }
    case "settingChanged":
      return (
        <Ev e={e} cls="sys">
          {SETTINGS[p.value.setting] ?? "setting"} set to {p.value.value || "the CLI's default"}
          {p.value.applied === SettingApplied.NEXT_SPAWN ? " (for the next process)" : ""}
        </Ev>
      );
    case "titleSet":
      return (
        <Ev e={e} cls="sys">
          {p.value.title ? `named “${p.value.title}”` : "title cleared (named by the first message again)"}
        </Ev>
      );
    case "filesRewound":
      return (
        <Ev e={e} cls="sys">
          file edits undone back to #{String(p.value.toSeq)}: {p.value.filesChanged.join(", ") || "no files"} (+
          {String(p.value.insertions)} −{String(p.value.deletions)})
        </Ev>
      );
    case "unreadable":
      return (
        <Ev e={e} cls="sys failed">
          a stored event the server cannot read ({String(p.value.size)} bytes): {p.value.reason}
        </Ev>
      );
    case "content":
      return (
        <Ev e={e} cls={`assistant${p.value.error ? " failed" : ""}`}>
          {p.value.blocks.map((b, i) => (
            <Block key={i} b={b} index={index} />
          ))}
          {p.value.error && <div className="error">API error: {p.value.error}</div>}
        </Ev>
      );
    case "result":
      // Tool results are shown with their calls; what is left is a marker
      // such as the CLI's "[Request interrupted by user]".
      if (p.value.toolResults.length > 0 || p.value.text === "") return null;
      return (
        <Ev e={e} cls="note">
          {localCommandOutput(p.value.text)}
        </Ev>
      );
    case "turnEnd": {
      const v = p.value;
      if (v.compact)
        return (
          <Ev e={e} cls="sys">
            context compacted ({v.compactTrigger || "auto"}, {tokens(Number(v.compactPreTokens))} tokens before)
          </Ev>
        );
      const out = Number(v.usage?.outputTokens ?? 0);
      return (
        <Ev e={e} cls={`turn-end${v.isError ? " failed" : ""}`}>
          {v.isError ? `✗ ${v.subtype || "error"}` : "✓ done"} · {duration(Number(v.durationMs))} · {usd(v.costUsd)} ·{" "}
          {tokens(out)} out{v.terminalReason ? ` · ${v.terminalReason}` : ""}
        </Ev>
      );
    }
    case "runStart":
      return (
        <Ev e={e} cls="sys">
          run started ({p.value.adapter}
          {p.value.trigger ? `, ${p.value.trigger}` : ""}){p.value.lostResumeId ? " · earlier context lost" : ""}
        </Ev>
      );
    case "runReady":
      return (
        <Ev e={e} cls="sys">
          CLI {p.value.cliVersion} ready · {p.value.model} · {p.value.permissionMode || "default"} permissions
        </Ev>
      );
    case "runEnd":
      return (
        <Ev e={e} cls="sys">
          process ended: {REASONS[p.value.reason] ?? "unknown"}
          {p.value.exitCode !== undefined ? ` (exit ${p.value.exitCode})` : ""}
          {p.value.signal ? ` (${p.value.signal})` : ""}
          {p.value.stderrTail && <pre className="stderr">{p.value.stderrTail}</pre>}
        </Ev>
      );
    case "runError":
      return (
        <Ev e={e} cls="sys failed">
          run error{p.value.kind ? ` (${p.value.kind})` : ""}: {p.value.message}
        </Ev>
      );
    case "stopRequested":
      return (
        <Ev e={e} cls="sys">
          stop requested ({p.value.source})
        </Ev>
      );
    case "turnStart":
      return (
        <Ev e={e} cls="sys">
          turn started by the CLI{p.value.origin ? ` (${p.value.origin})` : ""}
        </Ev>
      );
    case "taskStarted":
      return (
        <Ev e={e} cls="sys">
          background task {p.value.taskId} started: {p.value.description}
        </Ev>
      );
    case "taskNotification":
      return (
        <Ev e={e} cls="sys">
          background task {p.value.taskId} {p.value.status}
          {p.value.summary ? `: ${p.value.summary}` : ""}
        </Ev>
      );
    case "permissionRequested":
      return (
        <Ev e={e} cls="sys">
          asks to run {p.value.toolName}
        </Ev>
      );
    case "permissionResolved":
      return (
        <Ev e={e} cls="sys">
          {p.value.allow ? "allowed" : "denied"} by {p.value.by}
          {p.value.message ? `: ${p.value.message}` : ""}
        </Ev>
      );
    default:
      // task_updated and anything newer: in the side panel or not shown.
      return null;
  }
}

function Block({ b, index }: { b: ContentBlock; index: Index }) {
  switch (b.type) {
    case "text":
      return <MarkdownText text={b.text} />;
    case "thinking":
    case "redacted_thinking":
      return (
        <details className="thinking">
          <summary>thinking</summary>
          {b.thinking ? <MarkdownText text={b.thinking} /> : <div className="text muted">(redacted)</div>}
        </details>
      );
    case "tool_use":
    case "server_tool_use": {
      const call = index.calls.get(b.toolUseId);
      return call ? <ToolCallView call={call} index={index} /> : null;
    }
    default:
      return <div className="muted">[{b.type}]</div>;
  }
}

/** The call's recorded tool_use_result, as JSON (where an ACP agent's diffs are). */
function resultJson(call: ToolCall): JsonValue | undefined {
  const p = call.resultEvent?.payload;
  return p?.case === "result" && p.value.toolUseResult ? toJson(ValueSchema, p.value.toolUseResult) : undefined;
}

function ToolCallView({ call, index }: { call: ToolCall; index: Index }) {
  const diffs = useMemo(() => toolDiffs(call.toolName, call.input, resultJson(call)), [call]);
  const state = call.result
    ? call.result.isError
      ? "error"
      : "done"
    : index.asking.has(call.toolUseId)
      ? "asking"
      : index.ended.has(call.toolUseId)
        ? "ended"
        : index.live
          ? "running"
          : "unknown";
  const children = call.kind === "agent" ? index.children.get(call.toolUseId) : undefined;
  return (
    <div className={`tool ${call.kind} ${state}`} data-testid="tool-call" data-tool={call.toolName} data-state={state}>
      <div className="tool-head">
        <span className="tool-name">{call.toolName}</span>
        <span className="gist">{toolGist(call.input)}</span>
        <span className={`tool-state ${state}`}>{state === "ended" ? "no result" : state}</span>
      </div>
      {diffs && diffs.length > 0 && <DiffView files={diffs} />}
      <details className="tool-input">
        <summary>input</summary>
        <pre>{pretty(call.input)}</pre>
      </details>
      {children && children.length > 0 && (
        <div className="subagent" data-testid="subagent" data-parent={call.toolUseId}>
          {children.map((e) => (
            <EventView key={String(e.seq)} e={e} index={index} />
          ))}
        </div>
      )}
      {call.result ? (
        <pre className="tool-result" data-testid="tool-result">
          {call.result.text}
        </pre>
      ) : (
        index.outputs.has(call.toolUseId) && (
          <pre className="tool-result live" data-testid="tool-output">
            {index.outputs.get(call.toolUseId)}
          </pre>
        )
      )}
    </div>
  );
}
