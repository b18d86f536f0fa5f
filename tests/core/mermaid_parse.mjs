// Mermaid's own parser over diagrams gitdns wrote (tests/core/test_split.py).
// Usage: node mermaid_parse.mjs DIR < diagrams.json, where DIR holds node_modules with mermaid
// (11) and jsdom.  Reads a JSON list of diagram sources; prints, for each, the parser's error or
// what it read: the diagram type, the directive config, the vertices, edges and subgraphs with
// their labels (Mermaid's entity codes turned back into HTML entities).
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const require = createRequire(join(process.argv[2], "resolve.js"));
const { JSDOM } = require("jsdom");
const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
globalThis.Element = dom.window.Element;
const { default: mermaid } = await import(pathToFileURL(require.resolve("mermaid")).href);
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
const decode = (s) => (s ?? "").replace(/\uFB02\xB0\xB0/g, "&#").replace(/\uFB02\xB0/g, "&").replace(/\xB6\xDF/g, ";");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const text of JSON.parse(input)) {
  try {
    const parsed = await mermaid.parse(text);
    const { db } = await mermaid.mermaidAPI.getDiagramFromText(text);
    out.push({
      type: parsed.diagramType,
      config: parsed.config,
      vertices: [...db.getVertices().values()].map((v) => [v.id, decode(v.text)]),
      edges: db.getEdges().map((e) => [e.start, e.end, decode(e.text)]),
      subgraphs: db.getSubGraphs().map((s) => [s.id, decode(s.title), s.nodes]),
    });
  } catch (e) {
    out.push({ error: String(e.message || e).slice(0, 400) });
  }
}
process.stdout.write(JSON.stringify(out));
