// The derive functions now live in ./derive/ (one module per Rust module);
// this file keeps the old import path ("./derive.js") working.

export * from "./derive/index.js";
