// "What runs on this GPU": filters and sorts the published rows embedded in the page (no
// sizing here); each model shows its first row, in the order the rows are given, that
// passes the filters. The filters live in the URL hash, so a link is shareable.
(function () {
  const root = document.getElementById("runs");
  if (!root) return;
  const data = JSON.parse(document.getElementById("runs-data").textContent);
  const values = JSON.parse(document.getElementById("runs-values").textContent);
  data.rows = values.model.map((_, i) => data.columns.map((c) => values[c][i]));
  const col = Object.fromEntries(data.columns.map((c, i) => [c, i]));
  const tiers = data.tiers; // best first
  const $ = (id) => document.getElementById(id);
  const controls = { c: $("runs-context"), s: $("runs-min"), e: $("runs-engine"),
                     q: $("runs-quality"), o: $("runs-sort") };
  const params = new URLSearchParams(location.hash.slice(1));
  for (const [k, el] of Object.entries(controls)) if (params.has(k)) el.value = params.get(k);
  const rank = (t) => (t === null ? Infinity : tiers.indexOf(t));
  const fmt = (x, d) => (x === null ? "n/a" : x.toLocaleString("en-US",
    { minimumFractionDigits: d, maximumFractionDigits: d }));

  function update() {
    const ctx = +controls.c.value, min = +controls.s.value || 0, engine = controls.e.value;
    const floor = controls.q.value;
    const seen = new Set(), picked = [];
    for (const r of data.rows) {
      const model = data.models[r[col.model]];
      if (seen.has(model.id) || r[col.context] !== ctx) continue;
      if (engine && r[col.engine] !== engine) continue;
      if (min > 0 && !(r[col.decode] >= min)) continue;
      if (floor !== "any" && !(rank(r[col.quality]) <= tiers.indexOf(floor))) continue;
      seen.add(model.id);
      picked.push({ model, r });
    }
    const key = { params: (p) => -(p.model.params || 0), decode: (p) => -(p.r[col.decode] || 0),
                  cost: (p) => (p.r[col.cost] === null ? Infinity : p.r[col.cost]),
                  context: (p) => -(p.r[col.maxctx] || 0) }[controls.o.value];
    picked.sort((a, b) => key(a) - key(b) || (b.r[col.decode] || 0) - (a.r[col.decode] || 0)
      || (a.model.id < b.model.id ? -1 : 1));
    const body = $("runs-table").tBodies[0];
    body.replaceChildren();
    for (const { model, r } of picked) {
      const tr = body.insertRow();
      const a = document.createElement("a");
      const hash = new URLSearchParams({ f: r[col.format], e: r[col.engine], c: ctx,
                                         kv: r[col.kv], n: 1, b: 1 });
      a.href = `${root.dataset.root}pairs/${model.id.replace("/", "--")}/${root.dataset.gpu}.html#${hash}`;
      a.textContent = model.id;
      tr.insertCell().append(a);
      for (const v of [fmt(model.params / 1e9, 1), r[col.engine], r[col.format], r[col.kv],
                       r[col.quality] || "unmeasured", r[col.verdict],
                       fmt(r[col.maxctx], 0), fmt(r[col.decode], 1), fmt(r[col.cost], 2)]) {
        tr.insertCell().textContent = v;
      }
    }
    $("runs-count").textContent = `${picked.length} models run at ${ctx.toLocaleString("en-US")} tokens`;
    const state = new URLSearchParams(Object.entries(controls).map(([k, el]) => [k, el.value]));
    history.replaceState(null, "", `#${state}`);
  }
  for (const el of Object.values(controls)) el.addEventListener("change", update);
  controls.s.addEventListener("input", update);
  update();
  root.dataset.ready = "1";
})();
