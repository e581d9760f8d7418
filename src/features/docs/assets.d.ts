/** The Swagger UI files (and our starter script), imported `with { type: "file" }`: their paths (embedded in the binary). */
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
declare module "*/swagger-init.js" {
  const text: string;
  export default text;
}
