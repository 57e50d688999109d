// The classify helpers now live in ./derive/classify.ts, as in the Rust
// layout (client-rs/protocol/src/derive/classify.rs); this file keeps the old import
// path ("./classify.js") working.

export {
  classifyTool,
  derivePendingMessages,
  groupEvents,
  subagentChildren,
  type PendingMessage,
  type ToolCall,
  type ToolKind,
  type Turn,
} from "./derive/classify.js";
