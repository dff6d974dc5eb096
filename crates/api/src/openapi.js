// The API reference page (openapi.html): renders the server's OpenAPI document.
// A file of its own: the page's policy allows no inline script.
"use strict";
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
};
const refName = (r) => r.split("/").pop();
// A schema as text, with references kept as names (each links to its definition below).
function schemaNode(s) {
  const pre = el("pre");
  const text = JSON.stringify(s, null, 2);
  let last = 0;
  for (const m of text.matchAll(/"\$ref": "(#\/components\/schemas\/[^"]+)"/g)) {
    pre.append(text.slice(last, m.index), '"$ref": ');
    pre.append(el("a", { class: "ref", href: "#schema-" + refName(m[1]) }, refName(m[1])));
    last = m.index + m[0].length;
  }
  pre.append(text.slice(last));
  return pre;
}
function operation(doc, path, method, o) {
  const d = el("details", { id: o.operationId });
  const lock = o.security && o.security.length === 0 ? "no token" : (o.security ? "admin token" : "");
  d.append(el("summary", {}, el("span", { class: "m " + method }, method.toUpperCase()), el("span", { class: "p" }, path),
    el("span", { class: "s" }, o.summary || ""), el("span", { class: "lock" }, lock)));
  const b = el("div", { class: "body" });
  b.append(el("div", { class: "s" }, "operationId: " + o.operationId));
  if (o.parameters && o.parameters.length) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "schema")));
    for (const p of o.parameters) t.append(el("tr", {}, el("td", { class: "p" }, p.name + (p.required ? " *" : "")), el("td", {}, p.in), el("td", { class: "p" }, JSON.stringify(p.schema))));
    b.append(el("h4", {}, "Parameters"), t);
  }
  if (o.requestBody) {
    for (const [type, c] of Object.entries(o.requestBody.content)) b.append(el("h4", {}, "Body: " + type), schemaNode(c.schema));
  }
  b.append(el("h4", {}, "Answers"));
  const t = el("table");
  for (const [status, r0] of Object.entries(o.responses)) {
    const r = r0.$ref ? doc.components.responses[refName(r0.$ref)] : r0;
    const c = r.content && r.content["application/json"];
    const cell = el("td");
    if (c) cell.append(schemaNode(c.schema));
    t.append(el("tr", {}, el("td", { class: "p" }, status), el("td", {}, r.description), cell));
  }
  b.append(t);
  d.append(b);
  return d;
}
fetch("openapi.json").then((r) => r.json()).then((doc) => {
  document.getElementById("title").textContent = doc.info.title + " " + doc.info.version;
  document.getElementById("desc").replaceChildren(doc.info.description + " Base URL: " + doc.servers[0].url + ". The raw document: ",
    el("a", { href: "openapi.json" }, "openapi.json"), ".");
  const byTag = new Map();
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, o] of Object.entries(item)) {
      const tag = (o.tags || ["Other"])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push([path, method, o]);
    }
  const nav = document.getElementById("nav"), ops = document.getElementById("ops");
  for (const [tag, list] of [...byTag].sort((x, y) => x[0].localeCompare(y[0]))) {
    nav.append(el("a", { href: "#tag-" + tag }, tag + " (" + list.length + ")"));
    const s = el("section", { id: "tag-" + tag }, el("h2", {}, tag));
    for (const [path, method, o] of list) s.append(operation(doc, path, method, o));
    ops.append(s);
  }
  nav.append(el("a", { href: "#schemas" }, "Schemas"));
  const s = el("section", { id: "schemas" }, el("h2", {}, "Schemas"));
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    const d = el("details", { id: "schema-" + name }, el("summary", {}, el("span", { class: "p" }, name), el("span", { class: "s" }, schema.description || "")));
    d.append(el("div", { class: "body" }, schemaNode(schema)));
    s.append(d);
  }
  ops.append(s);
  // A link to an operation or schema opens it.
  const open = () => { const t = location.hash && document.getElementById(location.hash.slice(1)); if (t && t.tagName === "DETAILS") t.open = true; };
  window.addEventListener("hashchange", open);
  open();
  document.body.dataset.ready = String(Object.keys(doc.paths).length);
});
