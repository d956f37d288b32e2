// Starts Swagger UI (/docs) or ReDoc (/redoc) over the server's OpenAPI schema. A file of the server, not an inline
// script, so the docs pages' Content-Security-Policy needs no 'unsafe-inline'. Where the UI's script did not run,
// the page's note saying where the schema is stays.
"use strict";

(function start() {
  const holder = document.querySelector("[data-openapi]");
  if (!holder) return;
  const url = holder.dataset.openapi;
  let started = false;
  if (holder.id === "swagger-ui" && window.SwaggerUIBundle) {
    // validatorUrl: null, or the page would fetch a badge from a third party for the schema
    window.ui = window.SwaggerUIBundle({ url, dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null,
      presets: [window.SwaggerUIBundle.presets.apis], layout: "BaseLayout" });
    started = true;
  } else if (holder.id === "redoc" && window.Redoc) {
    window.Redoc.init(url, {}, holder);
    started = true;
  }
  if (started) document.getElementById("docs-fallback").hidden = true;
})();
