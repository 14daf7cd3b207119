// Live updates (server-sent events): an element with `data-live="URL"` follows that stream
// while it is on the page. `exchange` events carry a row for the top of the exchange list (a
// row already shown under the same key is replaced); `timeline` events carry a run's timeline,
// shown in place of the element's content; `end` closes the stream.
(function () {
  "use strict";

  function template(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html.trim();
    return holder.content;
  }

  function addRow(body, html) {
    var row = template("<table><tbody>" + html + "</tbody></table>").querySelector("tr");
    if (!row) return;
    var key = row.getAttribute("data-key");
    body.querySelectorAll("tr").forEach(function (old) {
      if (old.getAttribute("data-key") === key || old.querySelector("td.empty")) old.remove();
    });
    row.classList.add("arrived");
    body.insertBefore(row, body.firstChild);
    if (window.htmx) window.htmx.process(row);
  }

  function follow(element) {
    if (element.pyrulaLive) return;
    var source = new EventSource(element.getAttribute("data-live"));
    element.pyrulaLive = source;
    function gone() {  // swapped away by a boosted link: the stream is no longer shown
      if (document.contains(element)) return false;
      stop(element);
      return true;
    }
    source.addEventListener("exchange", function (event) {
      if (!gone()) addRow(element, event.data);
    });
    source.addEventListener("timeline", function (event) {
      if (gone()) return;
      element.innerHTML = event.data;
      if (window.htmx) window.htmx.process(element);
    });
    source.addEventListener("end", function () {
      source.close();
    });
  }

  function stop(element) {
    if (element.pyrulaLive) {
      element.pyrulaLive.close();
      element.pyrulaLive = null;
    }
  }

  function scan(root) {
    if (root.matches && root.matches("[data-live]")) follow(root);
    if (root.querySelectorAll) root.querySelectorAll("[data-live]").forEach(follow);
  }

  document.addEventListener("DOMContentLoaded", function () { scan(document); });
  // hx-boost swaps pages in place: follow what arrives, stop what leaves.
  document.addEventListener("htmx:load", function (event) { scan(event.detail.elt); });
  document.addEventListener("htmx:beforeCleanupElement", function (event) { stop(event.detail.elt); });
  window.addEventListener("pagehide", function () {
    document.querySelectorAll("[data-live]").forEach(stop);
  });
})();
