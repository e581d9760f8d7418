/** Stylesheets are imported for their side effect: Bun's bundler emits them as the bundle's CSS. */
declare module "*.css";
