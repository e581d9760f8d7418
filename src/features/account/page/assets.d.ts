/** The account pages' script and stylesheet, imported `with { type: "text" }`: their contents as strings. */
declare module "*/account.js" {
  const text: string;
  export default text;
}
declare module "*/account.css" {
  const text: string;
  export default text;
}
