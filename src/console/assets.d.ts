/** Style sheets imported by components are bundled by esbuild into the one CSS file (scripts/build-console.mjs). */
declare module '*.css';
