/* Search of the llm-sizing site: filters the generated window.SITE_DATA in the browser.
   Part of llm-sizing, Apache-2.0; no third-party code. */
(function () {
  "use strict";
  var data = window.SITE_DATA;
  var form = document.getElementById("search-form");
  var results = document.getElementById("results");
  if (!data || !form || !results) { return; }
  var slug = function (id) { return id.replace("/", "--"); };
  var pairHref = function (m, g) {
    return data.pairPath.replace("MODEL", slug(data.models[m][0])).replace("GPU", data.gpus[g][0]);
  };
  var norm = function (s) { return s.toLowerCase().replace(/[\s_.\-\/]+/g, ""); };

  function link(href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  function item(parts) {
    var li = document.createElement("li");
    parts.forEach(function (p) { li.append(p); });
    return li;
  }

  function heading(text) {
    var h = document.createElement("h3");
    h.textContent = text;
    return h;
  }

  function render() {
    var query = norm(document.getElementById("q-model").value);
    var gpuId = document.getElementById("q-gpu").value;
    var context = parseInt(document.getElementById("q-context").value, 10) || 0;
    var gpu = data.gpus.findIndex(function (g) { return g[0] === gpuId; });
    var matches = data.models.map(function (m, i) { return i; }).filter(function (i) {
      return !query || norm(data.models[i][0]).indexOf(query) !== -1;
    });
    results.replaceChildren();
    if (!query && gpu < 0) {
      results.append("Type part of a model's name, or pick a GPU.");
      return;
    }
    if (gpu >= 0) {
      results.append(heading("Runs on one " + data.gpus[gpu][1] + " at " + context.toLocaleString("en") + " tokens"));
      var ul = document.createElement("ul");
      data.pairs.forEach(function (p) {
        if (p[1] !== gpu || matches.indexOf(p[0]) === -1) { return; }
        var f = p[2].findIndex(function (ctx) { return ctx >= context; });
        if (f < 0) { return; }
        ul.append(item([link(pairHref(p[0], gpu), data.models[p[0]][0]),
          " in " + data.formats[f] + " (up to " + p[2][f].toLocaleString("en") + " tokens)"]));
      });
      results.append(ul.children.length ? ul : "Nothing in the tables runs there.");
    }
    if (query) {
      results.append(heading("Models matching \u201c" + document.getElementById("q-model").value + "\u201d"));
      var list = document.createElement("ul");
      list.className = "model-results";
      matches.slice(0, 20).forEach(function (m) {
        // The 4-bit headline formats first: the cheapest 1-bit offer is rarely the answer.
        var rows = data.cheapest.filter(function (c) { return c[0] === m; })
          .sort(function (a, b) { return a[4] - b[4]; });
        var cheap = rows.filter(function (c) { return data.headline.indexOf(c[1]) !== -1; })[0] || rows[0];
        var parts = [link(data.models[m][1], data.models[m][0])];
        if (cheap) {
          parts.push(": cheapest to serve one user ");
          parts.push(link(pairHref(m, cheap[2]), cheap[3] + "\u00d7 " + data.gpus[cheap[2]][1]));
          parts.push(" in " + cheap[1] + ", " + cheap[4].toFixed(2) + " USD per million tokens");
        }
        list.append(item(parts));
      });
      results.append(matches.length ? list : "No model matches.");
    }
  }

  form.addEventListener("input", render);
  form.addEventListener("submit", function (e) { e.preventDefault(); render(); });
  render();
}());
