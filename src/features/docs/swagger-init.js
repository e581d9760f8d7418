// Starts Swagger UI on /swagger. A file of its own, not an inline script, so the page's
// policy can say script-src 'self'. The document's URL (BASE_PATH included) comes from the
// data-spec attribute of this script's own tag.
window.ui = SwaggerUIBundle({
  url: document.currentScript.dataset.spec,
  dom_id: "#swagger-ui",
  persistAuthorization: true,
  deepLinking: true,
});
