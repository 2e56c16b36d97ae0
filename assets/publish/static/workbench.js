/* llm-sizing workbench. Part of llm-sizing, Apache-2.0. It looks up the pair's published
   rows (unpacked from the data script the page loads) and computes no sizing figure;
   only the rent-or-buy arithmetic from the page's inputs is done here. */
(function () {
  "use strict";
  var sec = document.getElementById("workbench");
  var $ = function (id) { return document.getElementById(id); };
  var MONTH_DAYS = 365.25 / 12;
  var D, fit, cost, keys, costKeys, conf, timer;

  function bytes(b64) {
    var s = atob(b64), a = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return new Response(new Blob([a]).stream().pipeThrough(new DecompressionStream("deflate")))
      .arrayBuffer().then(function (buf) { return new Uint8Array(buf); });
  }

  // Each column: a plane of null flags where `nulls[j]`, then `w[j]` byte planes (least
  // significant first) of zigzag-coded differences from the row before, summed with
  // 32-bit wrap-around.
  function columns(p, b, names) {
    var out = {}, o = 0, n = p.n;
    names.forEach(function (name, j) {
      var col = new Array(n), acc = 0, flags = -1;
      if (p.nulls[j]) { flags = o; o += n; }
      for (var i = 0; i < n; i++) {
        var z = 0;
        for (var k = p.w[j] - 1; k >= 0; k--) z = z * 256 + b[o + k * n + i];
        acc = (acc + (z % 2 ? -(z + 1) / 2 : z / 2)) | 0;
        col[i] = flags >= 0 && b[flags + i] ? null : acc;
      }
      o += p.w[j] * n;
      out[name] = col;
    });
    return out;
  }

  function keyOf(sel) {
    var k = 0;
    for (var d in D.dims) {
      var i = D.dims[d].indexOf(sel[d]);
      if (i < 0) return -1;
      k = k * D.dims[d].length + i;
    }
    return k;
  }

  function unkey(k) {
    var names = Object.keys(D.dims), out = {};
    for (var j = names.length - 1; j >= 0; j--) {
      var vals = D.dims[names[j]];
      out[names[j]] = vals[k % vals.length];
      k = Math.floor(k / vals.length);
    }
    return out;
  }

  function index(keyCol) {
    var m = new Map();
    keyCol.forEach(function (k, i) { m.set(k, i); });
    return m;
  }

  function value(cols, name, i) {
    var v = cols[name][i];
    return v === null ? null : v / D.scale[name];
  }

  function fixed(v, digits) { return v === null || v === undefined ? "none" : v.toFixed(digits); }
  function grouped(v) { return v === null || v === undefined ? "none" : Math.round(v).toLocaleString("en-US"); }
  function usd(v) { return "$" + v.toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2}); }

  function options(id, values, label, pick) {
    var s = $(id), old = pick !== undefined ? String(pick) : s.value;
    s.innerHTML = "";
    values.forEach(function (v) {
      var o = document.createElement("option");
      o.value = String(v); o.textContent = label ? label(v) : String(v);
      s.appendChild(o);
    });
    if (values.map(String).indexOf(old) >= 0) s.value = old;
  }

  function present(engine) {
    var seen = {};
    for (var d in D.dims) seen[d] = new Set();
    keys.forEach(function (row) {
      if (row.engine !== engine) return;
      for (var d in D.dims) seen[d].add(row[d]);
    });
    var out = {};
    for (var d2 in D.dims) out[d2] = D.dims[d2].filter(function (v) { return seen[d2].has(v); });
    return out;
  }

  function contextLabel(c) {
    return c.toLocaleString("en-US") + (D.rope_scaled.indexOf(c) >= 0 ? " (RoPE-scaled)" : "");
  }

  function fillControls(preset) {
    var engines = D.dims.engine.filter(function (e) { return keys.some(function (r) { return r.engine === e; }); });
    options("wb-engine", engines, null, preset.engine);
    var p = present($("wb-engine").value);
    options("wb-format", p.weight_format, null, preset.weight_format);
    options("wb-context", p.context, contextLabel, preset.context);
    options("wb-kv", p.kv_dtype, null, preset.kv_dtype);
    options("wb-gpus", p.n_gpus, null, preset.n_gpus);
    options("wb-batch", p.batch, null, preset.batch);
  }

  function selection() {
    return {weight_format: $("wb-format").value, engine: $("wb-engine").value,
            kv_dtype: $("wb-kv").value, n_gpus: +$("wb-gpus").value,
            batch: +$("wb-batch").value, context: +$("wb-context").value};
  }

  function confRow(s) {
    for (var i = 0; i < conf.weight_format.length; i++) {
      if (conf.weight_format[i] === s.weight_format && conf.engine[i] === s.engine &&
          conf.n_gpus[i] === s.n_gpus) return i;
    }
    return -1;
  }

  function set(id, text) { $(id).textContent = text; }

  function command(s) {
    return "llm-sizing estimate --model " + sec.dataset.model + " --gpu " + sec.dataset.gpu +
      " --engine " + s.engine + " --quant " + s.weight_format + " --context " + s.context +
      " --kv-dtype " + s.kv_dtype + " --gpus " + s.n_gpus + " --batch " + s.batch;
  }

  function bar(parts, usable) {
    var total = parts.reduce(function (a, p) { return a + p[1]; }, 0), scale = Math.max(total, usable);
    $("wb-bar").innerHTML = "";
    parts.concat([["headroom", Math.max(usable - total, 0)]]).forEach(function (p) {
      var el = document.createElement("span");
      el.className = "wb-seg wb-" + p[0];
      el.style.width = (100 * p[1] / scale) + "%";
      el.title = p[0];
      $("wb-bar").appendChild(el);
    });
    $("wb-bar").setAttribute("aria-label", "memory per GPU: " + parts.map(function (p) {
      return p[0] + " " + p[1].toFixed(2) + " GiB"; }).join(", ") + " of " + usable.toFixed(2) + " GiB usable");
  }

  var shown = {};

  function update() {
    var s = selection(), i = fit ? fitIndex.get(keyOf(s)) : undefined, c = confRow(s);
    try { history.replaceState(null, "", "#" + new URLSearchParams({f: s.weight_format, e: s.engine, c: s.context, kv: s.kv_dtype, n: s.n_gpus, b: s.batch}).toString()); } catch (e) { /* file:// in some browsers */ }
    var off = i === undefined || c < 0;
    $("wb-offgrid").hidden = !off;
    $("wb-figures").hidden = off;
    $("wb-bar").hidden = off;
    if (off) {
      set("wb-verdict", "");
      $("wb-offgrid").innerHTML = "";
      $("wb-offgrid").append("The published tables hold no row for this configuration on this GPU; this command computes it: ");
      var code = document.createElement("code"); code.textContent = command(s);
      $("wb-offgrid").appendChild(code);
      shown = {off: true};
      rent(s);
      return;
    }
    var v = D.verdicts[fit.verdict[i]], weights = conf.weights_gpu_gib[c], runtime = conf.runtime_gib[c];
    var kvc = value(fit, "kv_cache_gib", i), usable = conf.usable_gib[c], band = conf.decode_error_band[c];
    var ci = cost ? costIndex.get(keyOf(s)) : undefined, usdMtok = ci === undefined ? null : value(cost, "cost_per_mtok_usd", ci);
    var verdicts = JSON.parse(sec.dataset.verdicts);
    $("wb-verdict").innerHTML = "";
    var strong = document.createElement("strong");
    strong.className = "v v-" + v; strong.textContent = verdicts[v].split(":")[0];
    $("wb-verdict").append(strong, verdicts[v].slice(verdicts[v].indexOf(":")));
    $("wb-verdict").dataset.verdict = v;
    shown = {verdict: v, total: fixed(value(fit, "total_gib", i), 2), weights: fixed(weights, 2),
             kvcache: fixed(kvc, 2), runtime: fixed(runtime, 2), usable: fixed(usable, 2),
             headroom: fixed(value(fit, "headroom_gib", i), 2),
             maxctx: grouped(value(fit, "max_context_tokens", i)),
             conc: grouped(value(fit, "max_concurrent_sequences", i)),
             decode: fixed(value(fit, "decode_tok_s", i), 1),
             band: band === null ? "none" : (100 * band).toFixed(1),
             basis: conf.speed_basis[c] + (conf.speed_fit[c] ? ": " + conf.speed_fit[c] : ""),
             agg: fixed(value(fit, "decode_aggregate_tok_s", i), 1),
             prefill: fixed(conf.prefill_tok_s[c], 0), ttft: grouped(value(fit, "ttft_ms", i)),
             cost: usdMtok === null ? "none: no on-demand offer for " + s.n_gpus + " of this GPU" : usd(usdMtok)};
    for (var k in shown) if ($("wb-" + k)) set("wb-" + k, shown[k]);
    bar([["weights", weights], ["kv", kvc], ["runtime", runtime]], usable);
    rent(s);
  }

  function rent(s) {
    var basis = JSON.parse(sec.dataset.basis)[s.n_gpus], hours = +$("wb-hours").value;
    var hourly = $("wb-hourly").value !== "" ? +$("wb-hourly").value : basis ? basis.price_per_gpu_hour_usd : null;
    var buy = $("wb-buy").value !== "" ? +$("wb-buy").value : sec.dataset.priceNewUsd ? +sec.dataset.priceNewUsd : null;
    var tdp = sec.dataset.tdpW ? +sec.dataset.tdpW : null;
    var rentMonth = hourly === null ? null : hourly * s.n_gpus * hours * MONTH_DAYS;
    var power = tdp === null ? null : tdp / 1000 * s.n_gpus * hours * MONTH_DAYS * +$("wb-kwh").value;
    set("wb-rent-month", rentMonth === null ? "no rental price: type one above" :
        usd(rentMonth) + (basis && $("wb-hourly").value === "" ? " (" + basis.provider + ", verified " + basis.price_verified_at + ")" : " (your price)"));
    set("wb-power-month", power === null ? "no TDP published" : usd(power));
    var margin = rentMonth === null || power === null ? null : rentMonth - power;
    set("wb-breakeven", buy === null ? "no purchase price: type one above" : margin === null ? "needs a rental price and a TDP" :
        margin <= 0 ? "never: electricity costs at least the rent" : (buy * s.n_gpus / margin).toFixed(1) + " months");
    shown.rent = $("wb-rent-month").textContent; shown.power = $("wb-power-month").textContent;
    shown.breakeven = $("wb-breakeven").textContent;
  }

  function simulate() {
    clearInterval(timer);
    var s = selection(), i = fitIndex.get(keyOf(s));
    var rate = i === undefined ? null : value(fit, "decode_tok_s", i), ttft = i === undefined ? null : value(fit, "ttft_ms", i);
    var out = $("wb-sim-text");
    out.textContent = "";
    if (!rate) { set("wb-sim-status", "no published decode speed for this configuration"); return; }
    set("wb-sim-status", "waiting " + grouped(ttft || 0) + " ms (time to first token), then " + rate.toFixed(1) + " tok/s");
    $("wb-sim-status").dataset.rate = rate;
    var start = performance.now() + (ttft || 0), n = 0;
    setTimeout(function () {
      timer = setInterval(function () {
        var due = Math.floor((performance.now() - start) * rate / 1000);
        while (n < due && n < 400) { out.textContent += "tok" + (n % 10) + " "; n++; }
        out.dataset.tokens = n;
        out.dataset.elapsedMs = performance.now() - start;
        if (n >= 400) clearInterval(timer);
      }, 50);
    }, ttft || 0);
  }

  var fitIndex, costIndex;

  function preset() {
    var h = new URLSearchParams(location.hash.slice(1));
    var p = {engine: sec.dataset.engine, weight_format: sec.dataset.fmt, kv_dtype: sec.dataset.kv,
             context: sec.dataset.context, n_gpus: 1, batch: 1};
    if (h.get("e")) p.engine = h.get("e");
    if (h.get("f")) p.weight_format = h.get("f");
    if (h.get("kv")) p.kv_dtype = h.get("kv");
    if (h.get("c")) p.context = h.get("c");
    if (h.get("n")) p.n_gpus = h.get("n");
    if (h.get("b")) p.batch = h.get("b");
    return p;
  }

  window.wbData = function (data) {
    D = data;
    var fitBytes = D.fit.n ? bytes(D.fit.b) : Promise.resolve(new Uint8Array(0));
    var costBytes = D.cost.n ? bytes(D.cost.b) : Promise.resolve(new Uint8Array(0));
    Promise.all([fitBytes, costBytes]).then(function (b) {
      fit = columns(D.fit, b[0], ["k"].concat(D.fit_columns));
      cost = D.cost.n ? columns(D.cost, b[1], ["k"].concat(D.cost_columns)) : null;
      fitIndex = index(fit.k);
      costIndex = cost ? index(cost.k) : new Map();
      keys = fit.k.map(unkey);
      conf = D.conf;
      fillControls(preset());
      $("wb-engine").addEventListener("change", function () { fillControls(selection()); update(); });
      ["wb-format", "wb-context", "wb-kv", "wb-gpus", "wb-batch", "wb-hours", "wb-kwh", "wb-buy", "wb-hourly"]
        .forEach(function (id) { $(id).addEventListener("input", update); });
      $("wb-sim-start").addEventListener("click", simulate);
      set("wb-status", "");
      $("wb-status").hidden = true;
      update();
      sec.dataset.ready = "1";
    });
  };
  window.wbShown = function () { return shown; };
})();
